"""One entry point for conversation files: LoCoMo JSON, LongMemEval JSON or memnets JSONL, told apart by content.

Everything that reads conversations from a user-given file (the data config's ``path``,
``memnets eval retrieval --data``, replay) calls :func:`load_conversations`, so every format works
everywhere. A file whose first non-blank character is ``[`` is a JSON list: LongMemEval's
(:mod:`memnets.training.data.longmemeval`, one conversation per question) when its first item has a
``question_id``, else LoCoMo's (:mod:`memnets.training.data.locomo`); one starting with ``{`` is JSONL, one
conversation per line (:mod:`memnets.training.data.jsonl`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memnets.training.data.jsonl import load_jsonl
from memnets.training.data.location import find_data
from memnets.training.data.locomo import (
    Conversation,
    DataFormatError,
    load_locomo,
    select_conversations,
)
from memnets.training.data.longmemeval import FIRST_KEY, first_item_keys, load_longmemeval

FORMATS = ("locomo", "longmemeval", "jsonl")


def detect_format(path: str | Path) -> str:
    """``"locomo"``, ``"longmemeval"`` or ``"jsonl"`` from the file's content; DataFormatError otherwise.

    The first non-blank character tells a JSON list from JSONL; a list whose first item has a
    ``question_id`` is LongMemEval (only that item is read to tell).
    """
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        while chunk := handle.read(4096):
            stripped = chunk.lstrip()
            if stripped:
                if stripped[0] == "[":
                    return "longmemeval" if FIRST_KEY in first_item_keys(path) else "locomo"
                if stripped[0] == "{":
                    return "jsonl"
                raise DataFormatError(
                    f"{path}: neither a LoCoMo JSON list (starts with '[') nor JSONL with one conversation "
                    f"object per line (starts with '{{'); it starts with {stripped[:20]!r}"
                )
    raise DataFormatError(f"{path}: the file is empty")


def load_conversations(path: str | Path | None, sample_ids: Sequence[str] | None = None) -> list[Conversation]:
    """Read a LoCoMo JSON, LongMemEval JSON or memnets JSONL file; optionally keep only ``sample_ids`` (file order).

    A LongMemEval question is one conversation (its haystack) whose sample id is the question id.

    ``path`` None reads the file that :func:`memnets.training.data.location.find_data` finds.

    Raises FileNotFoundError for a missing file and DataFormatError (a ValueError; its subclasses
    LocomoFormatError, LongMemEvalFormatError and JsonlFormatError) naming the file, the line and the field otherwise.
    """
    path = find_data(path)
    kind = detect_format(path)
    if kind == "locomo":
        return load_locomo(path, sample_ids)
    if kind == "longmemeval":
        return select_conversations([q.conversation for q in load_longmemeval(path)], sample_ids, path)
    return select_conversations(load_jsonl(path), sample_ids, path)
