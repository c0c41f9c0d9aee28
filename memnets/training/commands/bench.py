"""`memnets bench`: run the benchmarks of a source checkout (``python -m bench``) and write the report.

The benchmark scripts live in bench/ of the checkout, not in the installed package, and memnets
never imports them: this command starts ``python -m bench ARGS`` in the working folder, which must
be the root of a checkout. ``memnets bench --help`` shows the runner's options.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    root = Path.cwd()
    if not (root / "bench" / "__main__.py").is_file():
        print(f"memnets bench: no bench/ folder in {root}; run from the root of a source checkout", file=sys.stderr)
        return 2
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    return subprocess.call([sys.executable, "-m", "bench", *argv], cwd=root, env=env)
