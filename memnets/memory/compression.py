"""Compression: condense a stretch of memories into one summary memory that links to them.

Selection keeps the memories of a time window whose importance passes a floor (the filter drops
chit-chat before it costs summary space); the LLM writes the summary; the summary is a memory of
kind ``"summary"`` with the selected ids as ``links``, so the originals stay reachable.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from memnets.llm import LLM
from memnets.memory.reflection import derived_memory, memory_lines
from memnets.records import Memory
from memnets.timeutil import as_utc

SUMMARY_PROMPT = "Summarise the statements below in a few sentences, keeping names, dates and facts."


def select(
    memories: Iterable[Memory],
    *,
    min_importance: float = 0.0,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[Memory]:
    """Memories with ``start <= t < end`` and importance >= ``min_importance``, in time order (naive bounds read as UTC)."""
    start = None if start is None else as_utc(start, "start")
    end = None if end is None else as_utc(end, "end")
    if start is not None and end is not None and end <= start:
        raise ValueError(f"compression window is empty: end {end} is not after start {start}")
    chosen = [
        m
        for m in memories
        if m.importance >= min_importance and (start is None or m.t >= start) and (end is None or m.t < end)
    ]
    return sorted(chosen, key=lambda m: (m.t, m.id))


def summarise(memories: list[Memory], llm: LLM, *, owner: str, now: datetime, max_new_tokens: int = 160) -> Memory:
    """One summary memory over ``memories`` (non-empty), importance = the highest among them."""
    if not memories:
        raise ValueError("summarise: nothing to summarise (no memory passed the window and importance filter)")
    content = llm.complete(f"{SUMMARY_PROMPT}\n{memory_lines(memories)}", max_new_tokens=max_new_tokens)
    return derived_memory(
        owner,
        "summary",
        content,
        memories,
        now,
        {"llm": llm.name, "start": memories[0].t.isoformat(), "end": memories[-1].t.isoformat()},
    )
