"""`memnets fit COMPONENT -c CONFIG [LightningCLI options]`: train one component with LightningCLI.

Parses the component name, hands the rest to :func:`memnets.lit.cli.build_cli`, prints usage and
config errors. ``memnets fit encoder --help`` lists every option.
"""

from __future__ import annotations

import sys

from memnets.lit.cli import COMPONENTS, build_cli


def usage() -> str:
    names = ", ".join(sorted(COMPONENTS))
    return f"usage: memnets fit {{{names}}} -c CONFIG [LightningCLI fit options]  (memnets fit COMPONENT --help)"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return 0
    component, rest = argv[0], argv[1:]
    if component not in COMPONENTS:
        print(f"memnets fit: unknown component {component!r}\n{usage()}", file=sys.stderr)
        return 2
    from memnets.configs import ConfigNotFoundError

    try:
        build_cli(component, rest)
    except ConfigNotFoundError as error:
        print(f"memnets fit: {error}", file=sys.stderr)
        return 2
    return 0
