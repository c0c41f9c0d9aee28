"""One entry point for conversation files: LoCoMo JSON or memnets JSONL, told apart by their content.

Everything that reads conversations from a user-given file (the data config's ``path``,
``memnets eval retrieval --data``, replay) calls :func:`load_conversations`, so both formats work
everywhere. A file whose first non-blank character is ``[`` is LoCoMo's JSON list
(:mod:`memnets.data.locomo`); one starting with ``{`` is JSONL, one conversation per line
(:mod:`memnets.data.jsonl`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memnets.data.jsonl import load_jsonl
from memnets.data.location import find_data
from memnets.data.locomo import (
    Conversation,
    DataFormatError,
    load_locomo,
    select_conversations,
)

FORMATS = ("locomo", "jsonl")


def detect_format(path: str | Path) -> str:
    """``"locomo"`` or ``"jsonl"`` from the file's first non-blank character; DataFormatError otherwise."""
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        while chunk := handle.read(4096):
            stripped = chunk.lstrip()
            if stripped:
                if stripped[0] == "[":
                    return "locomo"
                if stripped[0] == "{":
                    return "jsonl"
                raise DataFormatError(
                    f"{path}: neither a LoCoMo JSON list (starts with '[') nor JSONL with one conversation "
                    f"object per line (starts with '{{'); it starts with {stripped[:20]!r}"
                )
    raise DataFormatError(f"{path}: the file is empty")


def load_conversations(path: str | Path | None, sample_ids: Sequence[str] | None = None) -> list[Conversation]:
    """Read a LoCoMo JSON or memnets JSONL file; optionally keep only ``sample_ids`` (file order).

    ``path`` None reads the file that :func:`memnets.data.location.find_data` finds.

    Raises FileNotFoundError for a missing file and DataFormatError (a ValueError; its subclasses
    LocomoFormatError and JsonlFormatError) naming the file, the line and the field otherwise.
    """
    path = find_data(path)
    if detect_format(path) == "locomo":
        return load_locomo(path, sample_ids)
    return select_conversations(load_jsonl(path), sample_ids, path)
