"""Hybrid search: the dense ranking fused with the store's lexical one, so a name, a number or a rare word counts.

An encoder blurs what it rarely saw: a person's name, a number, a word of a trade. The store ranks
the same memories by the query's words too (:meth:`~memnets.store.core.SqlStore.lexical_search`:
SQLite FTS5's bm25, or BM25 over the owner's rows on PostgreSQL), and :class:`HybridSearcher` fuses
the two rankings (:mod:`memnets.retrieval.fusion`). On LoCoMo's validation conversation, with the bundled
encoder, it lifts R@10 from 39.4% to 63.7% (archive) and 63.1% (PostgreSQL); docs/memory.md, "Hybrid search",
has the figures.

The candidates are the :data:`DEPTH` best of each ranking, under the search's filters (applied in
the store before either ranks, so k results come back whenever k memories match) and owner-scoped;
a memory whose words score below :data:`LEXICAL_FLOOR` (only words most memories hold) is no lexical find.
Each candidate gets both scores: its dense score (the store's cosine, or the pack's learned score:
the :class:`~memnets.memory.search.Searcher`'s rule) also where only the lexical ranking found it,
its lexical score where it holds a word of the query. The fused score is what a hit shows. As in
every search, a stale fact never answers above the memory that ended it
(:func:`~memnets.memory.search.current_first`, the successors of lexical finds fetched too).
The ranking does not depend on k up to :data:`DEPTH`: a search of k returns the first k of one of
more.

``memnets.open(..., search=...)`` (a :class:`~memnets.memory.config.ManagerConfig` field): "auto"
(the default) searches hybrid where the store keeps a lexical index and dense where it keeps none (an
encrypted store: its index would hold the words its key protects); "hybrid" insists (an error where
the store has no index); "dense" never reads the lexical index. A search by vector (no text) and an
as-of read (older versions, which the index does not hold) rank densely. The managers' RECALL stays dense.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import numpy as np

from memnets.argerrors import ArgumentValueError
from memnets.memory.search import Searcher, current_first, score
from memnets.records import Memory
from memnets.retrieval.fusion import weighted
from memnets.store.filters import MemoryFilter
from memnets.store.protocol import LexicalSearch, supports

DEPTH = 20  # candidates of each ranking: fitted with the weight (depths 10, 20, 50; bench/experiments/hybrid_fusion.py)
# the least lexical score that is evidence. BM25 (both stores: FTS5's formula) floors the IDF of a word held by
# half the rows or more at 1e-6, so a row found by such words only scores ~1e-6 per word (< 1e-4 for the 32 words
# a query keeps); min-max scaling would stretch that noise of row lengths over [0, 1] (with three memories all
# naming Ann, "Where does Ann live?" put the shortest first). Below the floor a row counts as not found by its words.
# It costs LoCoMo about a point of R@10 (its turns start with the speaker's name, held by about half of them).
LEXICAL_FLOOR = 1e-3


def hybrid_store(store, mode: str) -> bool:
    """Whether ``memnets.open(..., search=mode)`` (a mode of :data:`~memnets.memory.config.SEARCH_MODES`)
    searches ``store`` hybrid; ArgumentValueError naming ``search`` for "hybrid" on a store without a
    lexical index."""
    has_index = supports(store, LexicalSearch)
    if mode == "hybrid" and not has_index:
        raise ArgumentValueError(
            f"search='hybrid': {type(store).__name__} keeps no lexical index (an encrypted store keeps none: an "
            "index of its words would hold them in clear); open it with search='auto' or search='dense'",
            field="search",
        )
    return mode != "dense" and has_index


class HybridSearcher(Searcher):
    """A :class:`~memnets.memory.search.Searcher` whose text searches fuse its ranking with the store's
    lexical one (see the module docstring).

    Args:
        store, scorer, fetch_factor, supersession: as for the Searcher (the store must keep a lexical index).
        fusion: fuses (dense scores, lexical scores or None) of the candidates into one score each
            (:mod:`memnets.retrieval.fusion`; default: :func:`~memnets.retrieval.fusion.weighted`).
        depth: candidates of each ranking (at least k).
    """

    def __init__(
        self,
        store,
        scorer,
        fetch_factor: int,
        supersession=None,
        fusion: Callable[[Sequence[float], Sequence[float | None]], np.ndarray] = weighted,
        depth: int = DEPTH,
    ):
        super().__init__(store, scorer, fetch_factor, supersession)
        self.fusion, self.depth = fusion, depth

    def search(
        self,
        query: str,
        query_vector: np.ndarray,
        owner: str,
        k: int,
        filters: MemoryFilter | None,
        now: datetime,
    ) -> list[tuple[Memory, float]]:
        """The ``k`` best memories of ``owner`` for the query by the fused score, best first (the dense
        :meth:`Searcher.search` for a query without text and for an as-of read)."""
        if not query.strip() or (filters is not None and filters.time_travel):
            return super().search(query, query_vector, owner, k, filters, now)
        depth = max(k, self.depth)
        dense = super().search(query, query_vector, owner, depth, filters, now, read_links=False)
        found_by_words = self.store.lexical_search(query, depth, owner, filters=filters)
        lexical = {m.id: (m, s) for m, s in found_by_words if s >= LEXICAL_FLOOR}
        seen = {m.id for m, _ in dense}
        found = [m for m, _ in lexical.values() if m.id not in seen]
        # the chains of every candidate, the dense ones' too: a link through a memory that is no candidate (a
        # successor replaced since, or filtered out) is what keeps its stale fact below the current one
        added, links = self.successors([*(m for m, _ in dense), *found], owner, filters)
        extra = [*found, *added]
        candidates = [*dense, *zip(extra, self._dense_scores(extra, query, query_vector, owner, now))]
        fused = self.fusion(
            [s for _, s in candidates], [lexical[m.id][1] if m.id in lexical else None for m, _ in candidates]
        )
        order = np.argsort(-fused, kind="stable")
        hits = [(candidates[i][0], float(fused[i])) for i in order]
        return current_first(hits, self.linked(hits, links, owner, query_vector, filters))[:k]

    def _dense_scores(
        self, memories: Sequence[Memory], query: str, query_vector: np.ndarray, owner: str, now: datetime
    ) -> list[float]:
        """The dense scores of memories the dense ranking did not reach: as the Searcher would score them."""
        if not memories:
            return []
        if self.scorer is None:
            return self.cosines(memories, owner, query_vector)
        vectors = self._keep(memories, self.store.vectors([m.id for m in memories], owner))
        return score(self.scorer, memories, query, now, query_vector, vectors).tolist()


__all__ = ["DEPTH", "LEXICAL_FLOOR", "HybridSearcher", "hybrid_store"]
