"""Run a bench/ script the way a person does, ``python -m bench.NAME ARGS`` from the checkout's root.

The tests never import bench/ (tests/package/test_bench_layout.py checks it): a benchmark script is checked
by running it as its own process on tiny sizes and reading the JSON it writes, so what is tested is
the command line the docs give.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_bench(
    module: str, *args: str, expect: int = 0, timeout: float = 600, cwd: Path = REPO
) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` in ``cwd`` (default: the checkout's root; its bench/ and memnets first on the
    path either way); fails the test with the script's output when the exit code is not ``expect``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != expect:
        raise AssertionError(
            f"python -m {module} {' '.join(map(str, args))} exited {done.returncode}, not {expect}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
    return done


def result(out: Path, name: str) -> dict:
    """The JSON a script wrote to ``OUT/NAME.json`` (results, settings, notes, machine, versions)."""
    return json.loads((Path(out) / f"{name}.json").read_text())
