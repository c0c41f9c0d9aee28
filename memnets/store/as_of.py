"""As-of reads: which versions of a user's memories a read sees at a valid time and at a known time.

A memory has two time axes, kept apart as Zep / Graphiti keep them: *validity* (``valid_from`` /
``valid_to``: when the fact held in the world) and *recording* (``updated_at``: when a version was
written). Its versions are its current row and its older rows (``superseded_by`` set, kept for
``history``); a memory that replaced another (``add(..., replaces=...)``) continues that one's line.

:func:`visible` is the one rule both stores apply, on every unexpired row of a user:

- ``known_at=K``: a line's versions written by K (``updated_at <= K``); the latest of them is
  the memory as it was known then. A version's ``valid_to`` that the next (not yet written)
  version closed was open at K and reads as open.
- ``as_of=T``: among those versions (all of them without ``known_at``), the ones valid at T. A
  version's validity ends at its own ``valid_to`` and where any later-written version of its line
  begins (later knowledge takes precedence from its ``valid_from`` on), so rows written before
  validity existed (no ``valid_to`` on their older versions) read right too.

A read with either is exact: :func:`rank` scores every visible version against the query (a long
memory at its best window), so k results come back whenever k versions pass the filter; no
index is asked, so none can under-fill (the filtered-FAISS under-fill mem0's #7416 reports).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import numpy as np

from memnets.records import Memory
from memnets.store.filters import MemoryFilter


def lines(rows: Sequence[Memory]) -> list[list[Memory]]:
    """The user's rows (in write order) grouped by memory line, each line oldest version first, current last.

    A row's older versions are the rows ``superseded_by`` its id, in write order, each after its own
    older versions; a line ends in a current row. Links that form no line (a cycle, a dangling
    ``superseded_by``) leave those rows out.
    """
    older: dict[str, list[Memory]] = {}
    for row in rows:
        if row.superseded_by is not None:
            older.setdefault(row.superseded_by, []).append(row)
    out = []
    for row in rows:
        if row.superseded_by is not None:
            continue
        line: list[Memory] = []
        seen: set[str] = set()
        stack: list[tuple[Memory, bool]] = [(row, False)]
        while stack:  # post-order walk: a row's older versions first, then the row
            item, expanded = stack.pop()
            if expanded:
                line.append(item)
            elif item.id not in seen:
                seen.add(item.id)
                stack.append((item, True))
                stack.extend((child, False) for child in reversed(older.get(item.id, [])))
        out.append(line)
    return out


def visible(rows: Sequence[Memory], as_of: datetime | None, known_at: datetime | None) -> list[Memory]:
    """The versions a read at valid time ``as_of`` and known time ``known_at`` sees (see the module docstring).

    ``rows``: every unexpired row of one user, older versions included, in write order. Each
    version comes back with the ``valid_to`` it had at ``known_at``.
    """
    out = []
    for line in lines(rows):
        known = line if known_at is None else [v for v in line if v.updated_at <= known_at]
        if not known:
            continue
        last = known[-1]
        position = line.index(last)
        if position + 1 < len(line):  # its next version was written after known_at: the closing was unknown then
            following = line[position + 1]
            if last.valid_to == max(last.valid_from, following.valid_from):
                known[-1] = last.replace(valid_to=None)
        if as_of is None:
            out.append(known[-1])
            continue
        for n, version in enumerate(known):
            starts = [later.valid_from for later in known[n + 1 :]]
            end = min([*starts, *([version.valid_to] if version.valid_to is not None else [])], default=None)
            if version.valid_from <= as_of and (end is None or as_of < end):
                out.append(version)
    return out


def rank(
    rows: Iterable[tuple[Memory, np.ndarray, np.ndarray]], query: np.ndarray, k: int, filters: MemoryFilter
) -> list[tuple[Memory, float]]:
    """The k best (version, score) of one user's rows (memory, vector [dim], window vectors [m, dim]) that
    :func:`visible` keeps at ``filters``' times and ``filters`` matches; exact inner products, best first."""
    rows = list(rows)
    vectors = {row[0].id: row[1:] for row in rows}
    kept = [m for m in visible([row[0] for row in rows], filters.as_of, filters.known_at) if filters.matches(m)]
    scored = []
    for memory in kept:
        vector, windows = vectors[memory.id]
        score = float(vector @ query)
        if len(windows):
            score = max(score, float((windows @ query).max()))
        scored.append((memory, score))
    scored.sort(key=lambda pair: -pair[1])
    return scored[:k]


def listed(rows: Sequence[Memory], filters: MemoryFilter, limit: int | None, offset: int) -> list[Memory]:
    """:func:`visible` versions that ``filters`` matches, by (t, id), ``offset`` skipped, at most ``limit``."""
    kept = sorted(
        (m for m in visible(rows, filters.as_of, filters.known_at) if filters.matches(m)), key=lambda m: (m.t, m.id)
    )
    return kept[offset:] if limit is None else kept[offset : offset + limit]
