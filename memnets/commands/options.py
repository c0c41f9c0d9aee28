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
