"""Options that several commands share, spelled and documented once."""

from __future__ import annotations

import argparse
import json
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


def category_list(text: str) -> tuple[int, ...]:
    """An argparse ``type``: QA categories as comma-separated integers (``1,2,3,4``), so the error names the option
    (``argument --categories: ...``) before anything loads."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 1,2,3,4, got {text!r}") from None


def json_file(text: str) -> Path:
    """An argparse ``type``: where a command writes its JSON results; a folder is refused as the option is parsed,
    not after the whole run (which had ended on IsADirectoryError)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is a folder; give the path of a file to write, e.g. {path / 'report.json'}"
        )
    return path


def write_json(path: Path, payload) -> None:
    """Write a command's JSON results to ``path`` (its folders made), and say so on stdout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    print(f"wrote {path}")
