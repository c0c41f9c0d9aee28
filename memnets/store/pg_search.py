"""How the PostgreSQL store searches: ranking in SQL with pgvector, a part of :class:`~memnets.store.postgres.PgVectorStore`.

Every search runs in one transaction that takes the table's ACCESS SHARE lock, checks the store's
encoder before and after ranking (:meth:`PgSearch._search` says why), ranks, and reads the window
scores of the owner's long memories (:mod:`memnets.store.chunks`). How each kind of filter ranks is
in :mod:`memnets.store.postgres`'s docstring.

A search without a filter (an agent's usual question) sends all of its statements at once in a
pipeline (:meth:`PgSearch._search_at_once`): one round trip to the server instead of one per
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
"""

from __future__ import annotations

import numpy as np

import memnets.timeutil as timeutil
from memnets.extras import needs_extra
from memnets.store.chunks import best_scores, entering, merge
from memnets.store.core_search import Hit
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


class PgSearch:
    """Search of :class:`~memnets.store.postgres.PgVectorStore` (see the module docstring); runs on the store's
    dialect, connections, decoder and encoder check."""

    _q: PgQueries  # the store's statements

    def _search(self, query: np.ndarray, k: int, owner: str, filters: MemoryFilter | None) -> list[Hit]:
        """Ranked in SQL (see the module docstring for how each kind of filter runs)."""
        now = timeutil.now()
        where, params = self._dialect.clear_conditions(owner, filters, now)
        if filters is None and self._writes.current() is None:
            try:
                found = self._search_at_once(query, k, where, params)
            except psycopg.Error as error:
                # the steps below read the encoder check before they rank (see the module docstring);
                # a cancel or a conflict (OperationalError) they would meet too
                if isinstance(error, psycopg.OperationalError):
                    raise
                found = None
            if found is not None:
                return found
        with self._transaction() as conn:
            # A re-embedding's swap may commit at any moment. Taking the table's ACCESS SHARE lock
            # before checking the encoder makes a swap that changes the dim (it drops the column
            # under ACCESS EXCLUSIVE) wait for this search, or come before the check; checking again
            # after the ranking catches a same-dim swap that committed while it ran. Either way the
            # answer is from one space, or EncoderMismatchError.
            conn.execute(*self._q.share_lock())
            self._check_encoder(conn)
            found = self._ranked(conn, query, k, where, params, filters)
            best = self._window_scores(conn, where, params, query)
            found = merge(found, best, k, lambda ids: self._current(conn, ids, owner, timeutil.now(), filters))
            self._check_encoder(conn)
        return found

    def _hnsw_settings(self, k: int) -> tuple[str, list]:
        """The HNSW settings of a search for k: ef_search raised to k, within pgvector's range."""
        return self._q.hnsw_settings(min(max(self.ef_search, k), EF_SEARCH_MAX))

    def _found(self, records) -> list[Hit]:
        """The hits of ranked records (the row's columns, then its distance)."""
        return [self._hit(record[:-1], -float(record[-1])) for record in records]

    def _search_at_once(self, query: np.ndarray, k: int, where: str, params: list) -> list[Hit] | None:
        """An unfiltered search's transaction in one round trip (see the module docstring): the statements of
        :meth:`_search` sent in a pipeline and read after its COMMIT. None where the answer needs a further
        read (fewer than k rows ranked, or a long memory's window that may enter the k)."""
        checked = self._encoder is not None
        with self._connection() as conn:
            with self._one_round_trip(conn):
                conn.execute(*self._q.share_lock())
                before = conn.execute(*self._q.get_meta(META_KEY)) if checked else None
                conn.execute(*self._hnsw_settings(k))
                ranked = conn.execute(*self._q.index_ranking(query, where, params, k), binary=True)
                windows = self._window_rows(conn, where, params)
                after = conn.execute(*self._q.get_meta(META_KEY)) if checked else None
            for identity in (before, after) if checked else ():
                check_identity(self._identity_of(identity.fetchone()), self._encoder, self._where())
            records = ranked.fetchall()
            best = best_scores(windows, query, self.dim)
        if len(records) < k:
            return None
        found = self._found(records)
        if entering(found, best, k):
            return None
        return merge(found, best, k, lambda ids: [])  # no window enters from outside the k ranked

    def _ranked(
        self, conn, query: np.ndarray, k: int, where: str, params: list, filters: MemoryFilter | None
    ) -> list[Hit]:
        """Inside search's transaction: the k best (memory, score) of the rows matching ``where`` and ``filters``
        by their main vector."""
        if filters is not None and filters.needs_payload:
            return self._first_matching(conn, self._q.exact_ranking(query, where, params), k, filters)
        # a filter on clear columns: rank exactly when few rows match (the planner misjudges
        # owner-and-kind selectivity, and an index scan under a selective filter loses recall)
        exact = (
            filters is not None
            and conn.execute(*self._q.matching_up_to(where, params, EXACT_BELOW + 1)).fetchone()[0] <= EXACT_BELOW
        )
        records = []
        if not exact:
            conn.execute(*self._hnsw_settings(k))
            records = conn.execute(*self._q.index_ranking(query, where, params, k), binary=True).fetchall()
        if len(records) < k:  # exact by choice, or the index scan gave up early (max_scan_tuples)
            records = conn.execute(*self._q.exact_ranking(query, where, params, k), binary=True).fetchall()
        return self._found(records)

    def _first_matching(self, conn, ranked: tuple[str, list], k: int, filters: MemoryFilter | None) -> list[Hit]:
        """The first k hits of the records the statement ``ranked`` returns (a row's columns, then its distance,
        best first; with no LIMIT) whose memories pass ``filters``: a filter of clear columns only is whole in
        SQL (the first k are read at once); one that reads the payload is checked on the decoded rows,
        streamed from a server-side cursor until k match (metadata checked best first until k match)."""
        if filters is None or not filters.needs_payload:
            return self._found(conn.execute(*self._q.first(ranked, k), binary=True).fetchall())
        found: list[Hit] = []
        with conn.cursor(name="memnets_ranked") as cursor:
            cursor.itersize = STREAM_BATCH
            cursor.execute(*ranked)
            for record in cursor:
                hit = self._hit(record[:-1], -float(record[-1]))
                if filters.matches(hit.memory):
                    found.append(hit)
                    if len(found) == k:
                        break
        return found


__all__ = ["EF_SEARCH_MAX", "EXACT_BELOW", "STREAM_BATCH", "PgSearch"]
