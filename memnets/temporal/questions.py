"""Time in retrieval: what a question says about time, as a feature of each memory.

Two signals, both from rules (no LLM):

- a question that asks *when* ("When did Caroline go to the support group?", "What year ...", "How
  long ago ...") is best answered by a memory that dates its event: one whose text holds a time
  expression (``resolve_dates`` finds one: "yesterday", "last week", "in May", "2023-05-07");
- a question that names a time ("in May", "last year", "in 2022") is about memories whose dates
  (the dates their text resolves to, else the day they were written) fall in that range.

:func:`time_features` gives a memory 1.0 when it carries the signal the question asks for, else 0;
a ranker adds it, weighted, to the similarity (``memnets.training.retrieval.dated``), and the scorers weigh
it beside recency, relevance and importance (``memnets.scoring``, through :func:`dated_record`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime
from functools import lru_cache

from memnets.records import Memory
from memnets.temporal.dates import DATES_KEY, ResolvedDate, resolve_dates

_WHEN = re.compile(
    r"\b(when|what (?:year|month|day|date|time|week)|which (?:year|month|day|date|week)|how long ago"
    r"|how many (?:days|weeks|months|years)|since when|what weekend)\b",
    re.IGNORECASE,
)


def asks_when(question: str) -> bool:
    """The question asks for a time ("When did ...", "What year ...", "How long ago ...")."""
    return bool(_WHEN.search(question))


def named_range(question: str, at: datetime | date) -> tuple[date, date] | None:
    """The span of the times ``question`` names, read from ``at`` (when it is asked); None if it names none."""
    resolved, _ = dated_memory(question, at)  # cached: an agent asks the same question again
    if not resolved:
        return None
    return min(item.start for item in resolved), max(item.end for item in resolved)


def overlaps(dates: list[ResolvedDate], written: date, span: tuple[date, date]) -> bool:
    """A memory (its resolved ``dates``, else the day it was ``written``) falls in ``span``."""
    ranges = [(item.start, item.end) for item in dates] or [(written, written)]
    return any(start <= span[1] and end >= span[0] for start, end in ranges)


DatedMemory = tuple[list[ResolvedDate], date]  # a memory's resolved dates and the day it was written


@lru_cache(maxsize=1 << 16)
def _resolved(text: str, day: date) -> tuple[ResolvedDate, ...]:
    """resolve_dates, kept: the same memories are scored for question after question."""
    return tuple(resolve_dates(text, day))


def dated_memory(text: str, written: datetime | date) -> DatedMemory:
    """What :func:`time_features` needs of a memory, computed once per memory."""
    day = written.date() if isinstance(written, datetime) else written
    return list(_resolved(text, day)), day


def _stored_dates(entries) -> list[ResolvedDate] | None:
    """The :data:`DATES_KEY` metadata the write path stored, or None when it is not a list of such dates."""
    try:
        return [
            ResolvedDate(entry["text"], date.fromisoformat(entry["start"]), date.fromisoformat(entry["end"]))
            for entry in entries
        ]
    except (TypeError, KeyError, ValueError):
        return None


def dated_record(memory: Memory) -> DatedMemory:
    """:func:`dated_memory` of a stored memory: the dates its metadata holds (the write path's
    ``resolve_dates`` option), else those its text names, resolved from its own time."""
    stored = _stored_dates(memory.metadata[DATES_KEY]) if DATES_KEY in memory.metadata else None
    return (stored, memory.t.date()) if stored is not None else dated_memory(memory.content, memory.t)


def asks_about_time(question: str, asked: datetime | date) -> bool:
    """Whether :func:`time_features` can give a memory 1 for ``question``: it names a time or asks when.

    Most questions do neither; a caller then skips resolving its memories' dates (for each memory
    the search has not met before, the costliest step of scoring it)."""
    return named_range(question, asked) is not None or asks_when(question)


def time_features(question: str, asked: datetime | date, memories: Sequence[DatedMemory]) -> list[float]:
    """Per memory, 1.0 when it carries what the question asks about time (see the module docstring), else 0."""
    span = named_range(question, asked)
    if span is not None:
        return [float(overlaps(dates, day, span)) for dates, day in memories]
    if asks_when(question):
        return [float(bool(dates)) for dates, _ in memories]
    return [0.0] * len(memories)
