"""How the embedded archive ranks: its engine, FAISS or exact vector search and FTS5's bm25, over SQLite.

:class:`ArchiveEngine` is what the store core is handed for the archive (:mod:`memnets.store.engine`):
SQLite's query builder (:class:`~memnets.store.queries_sqlite.SqliteQueries`), the vector search and the
lexical ranking, run on the archive handed to each call (its transactions, its FAISS index
``_index``, :mod:`memnets.store.faiss_sync`, and its decoding of records).

- Without filters the FAISS index ranks, synced first to the change log; where the owner has a row that
  expired and is not swept yet, and with filters, the matching rows are ranked exactly: clear columns in
  SQL, their vectors scored with one matrix product, and rows decoded best first, metadata conditions
  checked on the decoded (decrypted) record, until k match. So a filter never shortens the result below
  k when k memories match.
- A long memory ranks at its best window (:mod:`memnets.store.chunks`).
- The lexical ranking is FTS5's ``bm25()`` over the index of :mod:`memnets.store.sqlite_lexical`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

import numpy as np

import memnets.timeutil as timeutil
from memnets.store.chunks import from_blob, merge
from memnets.store.core_search import Hit
from memnets.store.engine import Engine
from memnets.store.filters import MemoryFilter
from memnets.store.queries_sqlite import SqliteQueries
from memnets.store.sqlite_lexical import match_expression, query_words

# records read at once when a filter is checked on decoded records; each further read takes twice as many
FIRST_CHECKED_BATCH = 32


class ArchiveEngine(Engine):
    """The archive's engine (see the module docstring)."""

    queries: SqliteQueries

    def search(self, store, query: np.ndarray, k: int, owner: str, filters: MemoryFilter | None) -> list[Hit]:
        """Without filters the FAISS index ranks; with filters the matching rows are ranked exactly
        (see the module docstring), so k results come back whenever k memories match."""
        now = timeutil.now()
        with store._reading() as conn:  # one snapshot: the index is synced to what the rows are read from
            if filters is not None or self._has_expired(conn, owner, now):
                # the index still holds expired rows until a sweep: rank exactly so that k are filled
                return self._search_filtered(store, conn, query, k, owner, filters or MemoryFilter(), now)
            store._index.sync()
            ids, scores = store._index.retriever.search(query[None], k, owner)
            rows = [int(i) for i in ids[0]]
            records = self._records_by_row(conn, rows, owner, now)
            found = [store._hit(records[row], score) for row, score in zip(rows, scores[0]) if row in records]
            where, params = self.dialect.clear_conditions(owner, None, now)
            best = store._window_scores(conn, where, params, query)
            return merge(found, best, k, lambda ids: store._current(conn, ids, owner, now))

    def _has_expired(self, conn: sqlite3.Connection, owner: str, now: datetime) -> bool:
        """Whether the owner has a current row that expired and is not swept yet (one indexed look-up)."""
        return conn.execute(*self.queries.has_expired(owner, now)).fetchone() is not None

    def _records_by_row(
        self, conn: sqlite3.Connection, rows: Sequence[int], owner: str, now: datetime
    ) -> dict[int, tuple]:
        """The owner's current, unexpired records with these row numbers, keyed by row (read in ``conn``,
        the search's transaction)."""
        d = self.dialect
        records = {}
        for start in range(0, len(rows), d.in_batch):
            chunk = rows[start : start + d.in_batch]
            records.update((r[0], r) for r in conn.execute(*self.queries.records_by_row(owner, now, chunk)))
        return records

    def _search_filtered(
        self,
        store,
        conn: sqlite3.Connection,
        query: np.ndarray,
        k: int,
        owner: str,
        filters: MemoryFilter,
        now: datetime,
    ) -> list[Hit]:
        """Exact ranking of the owner's current, unexpired rows that pass ``filters`` (read in ``conn``, the
        search's transaction): clear columns in SQL, metadata and scopes on the decoded records, checked
        best first until k match (:meth:`_best_first`)."""
        where, params = self.dialect.clear_conditions(owner, filters, now)
        candidates = conn.execute(*self.queries.candidates(where, params)).fetchall()
        if not candidates:
            return []
        vectors = np.frombuffer(b"".join(bytes(v) for _, v, _ in candidates), dtype="<f4").reshape(
            len(candidates), store.dim
        )
        scores = vectors @ query
        for p, (_, _, blob) in enumerate(candidates):  # a long memory ranks at its best window
            if blob is not None:
                scores[p] = max(scores[p], float((from_blob(blob, store.dim) @ query).max()))
        order = np.argsort(-scores, kind="stable")
        return self._best_first(
            store, conn, [(candidates[p][0], float(scores[p])) for p in order], k, owner, filters, now
        )

    def _best_first(
        self,
        store,
        conn: sqlite3.Connection,
        ranked: Sequence[tuple[int, float]],
        k: int,
        owner: str,
        filters: MemoryFilter | None,
        now: datetime,
    ) -> list[Hit]:
        """The first k (memory, score) of ``ranked`` (row number, score: the owner's current, unexpired rows
        that pass the clear part of ``filters``, best first) whose records pass the rest, read in ``conn``
        (the search's transaction, so every record is there) in batches; a filter of clear columns only is
        whole in SQL, and no record is checked again."""
        check = filters is not None and filters.needs_payload
        found: list[Hit] = []
        start, batch = 0, max(k, FIRST_CHECKED_BATCH) if check else k
        while start < len(ranked):
            part = ranked[start : start + batch]
            records = self._records_by_row(conn, [row for row, _ in part], owner, now)
            for row, score in part:
                hit = store._hit(records[row], score)
                if not check or filters.matches(hit.memory):
                    found.append(hit)
                    if len(found) == k:
                        return found
            start, batch = start + batch, 2 * batch  # a selective filter: read further ahead each time
        return found

    def lexical(self, store, text: str, k: int, owner: str, filters: MemoryFilter | None) -> list[Hit]:
        """The owner's k current, unexpired memories passing ``filters`` that hold a word of ``text``, by bm25."""
        words = query_words(text)
        if not words:
            return []
        now = timeutil.now()
        where, params = self.dialect.clear_conditions(owner, filters, now)
        everything = filters is not None and filters.needs_payload  # checked on the decoded rows, best first
        ranking = self.queries.lexical(match_expression(owner, words), where, params, -1 if everything else k)
        with store._reading() as conn:
            ranked = conn.execute(*ranking).fetchall()
            return self._best_first(store, conn, ranked, k, owner, filters, now)
