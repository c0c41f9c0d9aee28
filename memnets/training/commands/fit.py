"""`memnets fit COMPONENT -c CONFIG [LightningCLI options]`: train one component with LightningCLI.

Parses the component name, hands the rest to :func:`memnets.training.lit.cli.build_cli`, prints usage and
config errors. ``memnets fit encoder --help`` lists every option. ``--data FILE`` (the conversations
file, as on every command that reads them) becomes the DataModule's ``--data.data_path FILE``:
LightningCLI's own ``--data`` takes a DataModule config, never a conversations file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memnets.console import setup_output
from memnets.training.lit.cli import COMPONENTS, build_cli

OUTPUT_OPTIONS = {"-v": 1, "--verbose": 1, "-vv": 2, "-q": -1, "--quiet": -1}


def usage() -> str:
    names = ", ".join(sorted(COMPONENTS))
    return (
        f"usage: memnets fit {{{names}}} -c CONFIG [--data FILE] [-v | -q] [LightningCLI fit options]\n\n"
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


def is_conversations(value: str) -> bool:
    path = Path(value)
    return path.suffix in {".json", ".jsonl"} or (path.exists() and path.suffix not in {".yaml", ".yml"})


def data_file_arguments(argv: list[str]) -> list[str]:
    """``--data FILE`` / ``--data=FILE`` naming conversations -> ``--data.data_path FILE``.

    Conversations are a .json / .jsonl file or an existing path that is not a YAML config; any other
    value is LightningCLI's own ``--data`` (a DataModule config) and passes through unchanged.
    """
    out, rest = [], iter(argv)
    for arg in rest:
        if arg == "--data" or arg.startswith("--data="):
            value = arg.partition("=")[2] if "=" in arg else next(rest, "")
            if is_conversations(value):
                out += ["--data.data_path", value]
                continue
            out += [arg] if "=" in arg else [arg, value]
            continue
        out.append(arg)
    return out


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
    from memnets.training.configs import ConfigNotFoundError

    try:
        build_cli(component, data_file_arguments(rest))
    except ConfigNotFoundError as error:
        print(f"memnets fit: {error}", file=sys.stderr)
        return 2
    return 0
