"""Terminal output shared by the commands: rich tables that stay readable when piped to a file, and
the ``-v``/``-q`` options with the logging and progress they set.

Quiet by default: memnets' own loggers and every library's at WARNING, progress as a bar on a
terminal and a plain line every few seconds elsewhere (:mod:`memnets.progress`). ``-v`` shows
memnets' INFO lines, ``-vv`` memnets' DEBUG and the other libraries' INFO lines; ``-q`` shows
errors only and no progress.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from typing import NoReturn

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memnets.progress import set_progress

PIPED_WIDTH = 140  # rich assumes 80 columns when not on a terminal, which wraps wide tables
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def console() -> Console:
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=PIPED_WIDTH)


def print_table(table: Table) -> None:
    """``table`` on stdout, its title on a line of its own above it, never wrapped by rich (which wraps a
    title at the table's width: "retrieval on every conversation of ..." was cut mid-phrase)."""
    terminal = console()
    if table.title:
        title, table.title = table.title, None
        terminal.print(Text(str(title), style="table.title"), soft_wrap=True)
    terminal.print(table)


def add_output_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``-v/--verbose`` (repeatable) and ``-q/--quiet`` to a command's parser."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more log lines on stderr: -v memnets' INFO, -vv memnets' DEBUG and other libraries' INFO",
    )
    group.add_argument(
        "-q", "--quiet", action="store_true", help="errors only on stderr, and no progress bars or progress lines"
    )
    return parser


def setup_output(verbose: int = 0, quiet: bool = False) -> None:
    """Configure logging (one stderr handler on the root logger, replacing the one an earlier call added)
    and progress for a command run."""
    if quiet:
        memnets_level, other_level = logging.ERROR, logging.ERROR
    else:
        memnets_level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
        other_level = logging.WARNING if verbose < 2 else logging.INFO
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "memnets_command", False)]:
        root.removeHandler(handler)  # a second command in the same process replaces the first's handler
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.memnets_command = True
    root.addHandler(handler)
    root.setLevel(other_level)
    logging.getLogger("memnets").setLevel(memnets_level)
    for noisy in ("transformers", "mcp", "faiss", "httpx", "uvicorn", "lightning"):
        logging.getLogger(noisy).setLevel(other_level)  # some set their own level at import
    if other_level != logging.WARNING:  # transformers sets its own level on import: say it there too
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", logging.getLevelName(other_level).lower())
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity(other_level)
    set_progress("off" if quiet else None)
    if quiet:  # errors only: the libraries' Python warnings (Lightning's hints about batches and precision) too
        warnings.simplefilter("ignore")


class CommandParser(argparse.ArgumentParser):
    """The parser of every memnets command: a usage error is one line on stderr, ``PROG: error: MESSAGE``
    (argparse's messages name the argument: ``argument --limit: ...``), and exit 2.

    argparse prints its whole usage block above the message, which buries the one line that says what
    is wrong; ``PROG --help`` prints the usage. Subcommands' parsers are of this class too (argparse
    makes them of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)`` with the output options applied (the parser has them from
    :func:`add_output_options`)."""
    args = parser.parse_args(argv)
    setup_output(getattr(args, "verbose", 0), getattr(args, "quiet", False))
    return args
