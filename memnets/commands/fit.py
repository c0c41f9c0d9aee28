"""`memnets fit COMPONENT -c CONFIG [LightningCLI options]`: train one component with LightningCLI.

Parses the component name, hands the rest to :func:`memnets.lit.cli.build_cli`, prints usage and
config errors. ``memnets fit encoder --help`` lists every option.
"""

from __future__ import annotations

import sys

from memnets.console import setup_output
from memnets.lit.cli import COMPONENTS, build_cli

OUTPUT_OPTIONS = {"-v": 1, "--verbose": 1, "-vv": 2, "-q": -1, "--quiet": -1}


def usage() -> str:
    names = ", ".join(sorted(COMPONENTS))
    return (
        f"usage: memnets fit {{{names}}} -c CONFIG [-v | -q] [LightningCLI fit options]\n\n"
        "Run `memnets fit COMPONENT --help` for every option of a component."
    )


def output_options(argv: list[str]) -> tuple[int, bool, list[str]]:
    """(verbose, quiet, the rest): memnets' -v/-q taken out of argv before LightningCLI parses it."""
    verbose, quiet, rest = 0, False, []
    for arg in argv:
        level = OUTPUT_OPTIONS.get(arg)
        if level is None:
            rest.append(arg)
        elif level < 0:
            quiet = True
        else:
            verbose += level
    return verbose, quiet, rest


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return 0
    verbose, quiet, argv = output_options(argv)
    setup_output(verbose, quiet)
    if not argv:
        print(f"memnets fit: a component is missing\n{usage()}", file=sys.stderr)
        return 2
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
