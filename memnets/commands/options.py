"""Options that several commands share, spelled and documented once."""

from __future__ import annotations

import argparse
from pathlib import Path

DATA_HELP = (
    "conversations to read: a LoCoMo JSON, LongMemEval JSON or memnets JSONL file (docs/data.md); "
    "default: the data config's path, else $MEMNETS_DATA, else data/locomo of a checkout"
)


def add_data_option(parser: argparse.ArgumentParser, help: str = DATA_HELP) -> None:
    """`--data FILE`: the conversations file, which overrides the data config's `path:`."""
    parser.add_argument("--data", type=Path, default=None, metavar="FILE", help=help)


def at_least(minimum: int):
    """An argparse ``type``: an integer of at least ``minimum``, checked as the option is parsed, so the
    error names the option (``argument --limit: must be at least 0, got -3``) before anything loads."""

    def integer(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return integer


def non_empty_text(text: str) -> str:
    """An argparse ``type``: text with something in it besides white space (a query to embed)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be non-empty text, got {text!r}")
    return text
