"""As-of reads: which versions of a user's memories a read sees at a valid time and at a known time.

A memory has two time axes, kept apart as Zep / Graphiti keep them: *validity* (``valid_from`` /
``valid_to``: when the fact held in the world) and *recording* (``updated_at``: when a version was
written). Its versions are its current row and its older rows (``superseded_by`` set, kept for
``history``); a memory that replaced another (``add(..., replaces=...)``) continues that one's line.

:func:`visible` is the one rule both stores apply, on every unexpired row of a user:

- ``known_at=K``: a line's versions written by K (``updated_at <= K``); the latest of them is
  the memory as it was known then. A version's ``valid_to`` that the next (not yet written)
  version closed was open at K and reads as open.
- an ending by the change-of-fact judge whose ender is not among the rows (it expired; the sweep has not run yet)
  is not in force (:func:`in_force`).
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
from memnets.store.core_search import Hit
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
    version comes back with the ``valid_to`` it had at ``known_at``. Linear in the rows: each line is
    read once by :func:`_known_at` and once by :func:`_valid_at`.
    """
    present = {row.id for row in rows}
    out = []
    for line in lines(rows):
        known = _known_at([in_force(version, present) for version in line], known_at)
        if not known:
            continue
        out.extend(known[-1:] if as_of is None else _valid_at(known, as_of))
    return out


def in_force(version: Memory, present: set[str]) -> Memory:
    """``version`` with the judge's ending of it undone where the memory that ended it is not ``present`` among the
    user's unexpired rows: it expired and the sweep has not run yet (which releases it for good, as a deletion
    does). An expired memory is gone at every time, so is what it decided; the fact it ended had answered no read."""
    if version.invalidated_by is None or version.invalidated_by in present:
        return version
    return version.replace(valid_to=None, invalidated_by=None, invalidation_score=None)


def _known_at(line: list[Memory], known_at: datetime | None) -> list[Memory]:
    """The versions of ``line`` (oldest first) written by ``known_at`` (all of them without it), the latest
    with ``valid_to`` open when the version after it, written later, is what closed it (unknown then)."""
    if known_at is None:
        return line
    positions = [n for n, version in enumerate(line) if version.updated_at <= known_at]
    known = [line[n] for n in positions]
    if positions and positions[-1] + 1 < len(line):
        last, following = known[-1], line[positions[-1] + 1]
        if last.valid_to == max(last.valid_from, following.valid_from):
            known[-1] = last.replace(valid_to=None)
    return known


def _valid_at(known: list[Memory], as_of: datetime) -> list[Memory]:
    """The versions of ``known`` (one line, oldest first) valid at ``as_of``, in that order. A version ends at
    its own ``valid_to`` or where any later version begins, whichever is first: one pass from the newest,
    carrying the earliest start seen so far (it had rebuilt the later versions' starts for every version,
    quadratic in a memory's versions: an as-of read of one memory of 8,000 versions took 2.5 s, now 0.03 s)."""
    valid = []
    later_start = None  # the earliest valid_from of the versions after this one
    for version in reversed(known):
        ends = [end for end in (later_start, version.valid_to) if end is not None]
        end = min(ends, default=None)
        if version.valid_from <= as_of and (end is None or as_of < end):
            valid.append(version)
        later_start = version.valid_from if later_start is None else min(later_start, version.valid_from)
    valid.reverse()
    return valid


def rank(
    rows: Iterable[tuple[Memory, np.ndarray, np.ndarray]], query: np.ndarray, k: int, filters: MemoryFilter
) -> list[Hit]:
    """The k best hits (version, score, its vector) of one user's rows (memory, vector [dim], window vectors [m, dim]) that
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
        scored.append(Hit(memory, score, vector))
    scored.sort(key=lambda hit: -hit.score)
    return scored[:k]


def listed(rows: Sequence[Memory], filters: MemoryFilter, limit: int | None, offset: int) -> list[Memory]:
    """:func:`visible` versions that ``filters`` matches, by (t, id), ``offset`` skipped, at most ``limit``."""
    kept = sorted(
        (m for m in visible(rows, filters.as_of, filters.known_at) if filters.matches(m)), key=lambda m: (m.t, m.id)
    )
    return kept[offset:] if limit is None else kept[offset : offset + limit]
