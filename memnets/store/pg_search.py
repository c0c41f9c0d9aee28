"""How the PostgreSQL store searches: ranking in SQL with pgvector, the engine of :class:`~memnets.store.postgres.PgVectorStore`.

:class:`PgEngine` is what the store core is handed (:mod:`memnets.store.engine`): the PostgreSQL query
builder, the vector search below and the lexical ranking (the last section), run on the store it is handed
with each call.

Every search runs in one transaction that takes the table's ACCESS SHARE lock, checks the store's
encoder before and after ranking (:meth:`PgEngine.search` says why), ranks, and reads the window
scores of the owner's long memories (:mod:`memnets.store.chunks`). How each kind of filter ranks is
in :mod:`memnets.store.postgres`'s docstring.

A search without a filter (an agent's usual question) sends all of its statements at once in a
pipeline (:meth:`PgEngine._search_at_once`): one round trip to the server instead of one per
statement (BEGIN, LOCK, the check, the HNSW settings, the ranking, the windows, the check again,
COMMIT), each of which waits for the server process to be scheduled; on a loaded machine that wait,
not the ranking, was most of the search. The ranked rows come back in binary, so their vectors are
copied, not parsed from text. Where the answer needs a further read (fewer than k rows ranked, so the
exact scan must run; or a long memory's window that may enter the k), the search runs statement by
statement as a filtered one does, in a transaction of its own: the same answer, a round trip per step.
So does a search whose one round trip failed in the database: its statements all ran before any
result was read, so after a re-embedding's swap to another dim the ranking fails (vectors of two
dims) where the steps read the encoder check first and refuse with EncoderMismatchError, and a
plan PostgreSQL cached for the old column is prepared again.

Lexical ranking (``PgEngine.lexical``, the statements the builder's ``lexical_schema`` and ``lexical``),
which hybrid search (:mod:`memnets.memory.hybrid`) fuses with the dense one, over an index built so that it
can neither drift from the rows nor outlive them:

- ``lexemes`` is a generated column of the memories table (``to_tsvector('english', content)`` of a
  current row, NULL for an older version), computed by PostgreSQL in every write of the row, so no
  code path can leave it out of step; it goes with its row, and the store's scrub after a deletion
  (``VACUUM FULL`` by default) rewrites the table and its indexes without it. The content is read
  from the unsealed payload's JSON by ``{table}_content(payload)``, a function of the store (declared
  immutable, which a generated column needs: ``convert_from`` of a fixed encoding is).
- A GIN index over the lexemes of current rows (``tsvector_to_array``) finds the rows holding a word.
- Only a store without a key has them: with a key the payload is sealed, and lexemes of its plain
  text would hold what the key protects. A store of format 5 gains them on its first open by this
  memnets (:mod:`memnets.store.pg_schema`), computed for every row it holds.

Ranking: Okapi BM25 (k1 1.2, b 0.75, FTS5's constants and IDF, so both stores rank alike) over the
owner's current, unexpired rows that pass the filter's clear columns: a term's document frequency
and the row count are the owner's, the length of a row is its number of distinct lexemes, and the
mean length is that of the rows holding a query word. The query's words are its lexemes under the
same configuration (English stemming and stop words), any of them.
"""

from __future__ import annotations

import numpy as np

import memnets.timeutil as timeutil
from memnets.extras import needs_extra
from memnets.store.chunks import best_scores, entering, merge
from memnets.store.core_search import Hit
from memnets.store.engine import Engine
from memnets.store.filters import MemoryFilter
from memnets.store.identity import META_KEY, check_identity
from memnets.store.queries_postgres import PgQueries

with needs_extra("the PostgreSQL store", "pgvector"):
    import psycopg

# A search with a kind/time filter ranks the matching rows exactly when at most this many match
# (counted with a bounded index scan first). Measured (docs/scaling.md): at 1M memories a kind
# filter matching 10,000 rows had recall@10 0.48 through the HNSW iterative scan. 20,000 is also
# pgvector's hnsw.max_scan_tuples, the most rows an iterative scan visits.
EXACT_BELOW = 20_000
# pgvector's range of hnsw.ef_search: a search sets max(ef_search, k) capped here (SET refuses 1001 and up);
# a k beyond it is still filled, by the iterative scan past ef_search or else the exact fallback
EF_SEARCH_MAX = 1000
STREAM_BATCH = 256  # rows fetched per round trip when metadata is checked client-side


class PgEngine(Engine):
    """The engine of :class:`~memnets.store.postgres.PgVectorStore` (see the module docstring): its statements
    (:class:`~memnets.store.queries_postgres.PgQueries`), pgvector ranking and BM25 lexical ranking, for the
    store handed to each call (its pooled transactions, decoder and encoder check; ``ef_search``)."""

    queries: PgQueries

    def lexical(self, store, text: str, k: int, owner: str, filters: MemoryFilter | None) -> list[Hit]:
        """The owner's k current, unexpired memories passing ``filters`` that hold a lexeme of ``text``, by BM25
        (see the module docstring)."""
        where, params = self.dialect.clear_conditions(owner, filters, timeutil.now())
        with store._transaction() as conn:
            return self._first_matching(store, conn, self.queries.lexical(text, owner, where, params), k, filters)

    def search(self, store, query: np.ndarray, k: int, owner: str, filters: MemoryFilter | None) -> list[Hit]:
        """Ranked in SQL (see the module docstring for how each kind of filter runs)."""
        now = timeutil.now()
        where, params = self.dialect.clear_conditions(owner, filters, now)
        if filters is None and store._writes.current() is None:
            try:
                found = self._search_at_once(store, query, k, where, params)
            except psycopg.Error as error:
                # the steps below read the encoder check before they rank (see the module docstring);
                # a cancel or a conflict (OperationalError) they would meet too
                if isinstance(error, psycopg.OperationalError):
                    raise
                found = None
            if found is not None:
                return found
        with store._transaction() as conn:
            # A re-embedding's swap may commit at any moment. Taking the table's ACCESS SHARE lock
            # before checking the encoder makes a swap that changes the dim (it drops the column
            # under ACCESS EXCLUSIVE) wait for this search, or come before the check; checking again
            # after the ranking catches a same-dim swap that committed while it ran. Either way the
            # answer is from one space, or EncoderMismatchError.
            conn.execute(*self.queries.share_lock())
            store._check_encoder(conn)
            found = self._ranked(store, conn, query, k, where, params, filters)
            best = store._window_scores(conn, where, params, query)
            found = merge(found, best, k, lambda ids: store._current(conn, ids, owner, timeutil.now(), filters))
            store._check_encoder(conn)
        return found

    def _hnsw_settings(self, store, k: int) -> tuple[str, list]:
        """The HNSW settings of a search for k: ef_search raised to k, within pgvector's range."""
        return self.queries.hnsw_settings(min(max(store.ef_search, k), EF_SEARCH_MAX))

    def _found(self, store, records) -> list[Hit]:
        """The hits of ranked records (the row's columns, then its distance)."""
        return [store._hit(record[:-1], -float(record[-1])) for record in records]

    def _search_at_once(self, store, query: np.ndarray, k: int, where: str, params: list) -> list[Hit] | None:
        """An unfiltered search's transaction in one round trip (see the module docstring): the statements of
        :meth:`search` sent in a pipeline and read after its COMMIT. None where the answer needs a further
        read (fewer than k rows ranked, or a long memory's window that may enter the k)."""
        checked = store._encoder is not None
        with store._connection() as conn:
            with store._one_round_trip(conn):
                conn.execute(*self.queries.share_lock())
                before = conn.execute(*self.queries.get_meta(META_KEY)) if checked else None
                conn.execute(*self._hnsw_settings(store, k))
                ranked = conn.execute(*self.queries.index_ranking(query, where, params, k), binary=True)
                windows = store._window_rows(conn, where, params)
                after = conn.execute(*self.queries.get_meta(META_KEY)) if checked else None
            for identity in (before, after) if checked else ():
                check_identity(store._identity_of(identity.fetchone()), store._encoder, store._where())
            records = ranked.fetchall()
            best = best_scores(windows, query, store.dim)
        if len(records) < k:
            return None
        found = self._found(store, records)
        if entering(found, best, k):
            return None
        return merge(found, best, k, lambda ids: [])  # no window enters from outside the k ranked

    def _ranked(
        self, store, conn, query: np.ndarray, k: int, where: str, params: list, filters: MemoryFilter | None
    ) -> list[Hit]:
        """Inside search's transaction: the k best (memory, score) of the rows matching ``where`` and ``filters``
        by their main vector."""
        if filters is not None and filters.needs_payload:
            return self._first_matching(store, conn, self.queries.exact_ranking(query, where, params), k, filters)
        # a filter on clear columns: rank exactly when few rows match (the planner misjudges
        # owner-and-kind selectivity, and an index scan under a selective filter loses recall)
        exact = (
            filters is not None
            and conn.execute(*self.queries.matching_up_to(where, params, EXACT_BELOW + 1)).fetchone()[0] <= EXACT_BELOW
        )
        records = []
        if not exact:
            conn.execute(*self._hnsw_settings(store, k))
            records = conn.execute(*self.queries.index_ranking(query, where, params, k), binary=True).fetchall()
        if len(records) < k:  # exact by choice, or the index scan gave up early (max_scan_tuples)
            records = conn.execute(*self.queries.exact_ranking(query, where, params, k), binary=True).fetchall()
        return self._found(store, records)

    def _first_matching(self, store, conn, ranked: tuple[str, list], k: int, filters: MemoryFilter | None) -> list[Hit]:
        """The first k hits of the records the statement ``ranked`` returns (a row's columns, then its distance,
        best first; with no LIMIT) whose memories pass ``filters``: a filter of clear columns only is whole in
        SQL (the first k are read at once); one that reads the payload is checked on the decoded rows,
        streamed from a server-side cursor until k match (metadata checked best first until k match)."""
        if filters is None or not filters.needs_payload:
            return self._found(store, conn.execute(*self.queries.first(ranked, k), binary=True).fetchall())
        found: list[Hit] = []
        with conn.cursor(name="memnets_ranked") as cursor:
            cursor.itersize = STREAM_BATCH
            cursor.execute(*ranked)
            for record in cursor:
                hit = store._hit(record[:-1], -float(record[-1]))
                if filters.matches(hit.memory):
                    found.append(hit)
                    if len(found) == k:
                        break
        return found


__all__ = ["EF_SEARCH_MAX", "EXACT_BELOW", "STREAM_BATCH", "PgEngine"]
