"""What the store core is handed: an engine, the ranking and the statements of one backend.

The core (:class:`~memnets.store.core.SqlStore`) holds the contract's logic once and runs statements;
an :class:`Engine` is what differs between backends in reading them: its query builder (with the
dialect it builds over, :mod:`memnets.store.queries`), its vector search and its lexical ranking. A
store is the core plus an engine, composed, not stacked as base classes:

- :class:`~memnets.store.archive.Archive`: the core + :class:`~memnets.store.archive_search.ArchiveEngine`
  (SQLite statements, FAISS or exact ranking, FTS5's bm25);
- :class:`~memnets.store.postgres.PgVectorStore`: the core + :class:`~memnets.store.pg_search.PgEngine`
  (PostgreSQL statements, pgvector ranking, BM25 over full-text lexemes).

An engine ranks for the store that is handed to it (``store``: its transactions, its decoding of records
into :class:`~memnets.store.core_search.Hit` results, its encoder check), after the core's argument checks;
it keeps no state of a search between calls.
"""

from __future__ import annotations

import numpy as np

from memnets.store.core_search import Hit
from memnets.store.dialect import SqlDialect
from memnets.store.filters import MemoryFilter
from memnets.store.queries import SqlQueries


class Engine:
    """One backend's statements, vector search and lexical ranking (see the module docstring)."""

    def __init__(self, queries: SqlQueries) -> None:
        self.queries = queries

    @property
    def dialect(self) -> SqlDialect:
        """The spelling the query builder builds over."""
        return self.queries.d

    def search(self, store, query: np.ndarray, k: int, owner: str, filters: MemoryFilter | None) -> list[Hit]:
        """The owner's k current memories passing ``filters`` of highest score with ``query`` [dim], best first."""
        raise NotImplementedError

    def lexical(self, store, text: str, k: int, owner: str, filters: MemoryFilter | None) -> list[Hit]:
        """The owner's k current memories passing ``filters`` that hold a word of ``text``, best first."""
        raise NotImplementedError
