"""The one re-rank rule of archive search: fetch ``fetch_factor * k`` nearest, read their vectors, score them.

``AgentMemory.search`` (with a pack's scorer) and ``MemoryManager``'s RECALL both find memories this
way: the store's inner-product search narrows a user's memories to ``fetch_factor * k`` candidates
(filtered before ranking), and a :class:`~memnets.scoring.Scorer` (recency, relevance, importance)
scores them from their stored vectors. What each caller does with the scores differs: the API keeps
the top ``k``; the manager leaves out what it already holds and diversifies with MMR. Without a pack,
``AgentMemory.search`` ranks by cosine alone (a hand-set recency + importance mix retrieves far worse
on LoCoMo, docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import numpy as np

from memnets.memory.supersession import below_successors
from memnets.records import Memory
from memnets.store.filters import MemoryFilter
from memnets.store.protocol import SearchVectors, supports


class SearchHit(NamedTuple):
    """One search result: the memory and its score (cosine, or the pack's learned score), higher first."""

    memory: Memory
    score: float


def score(scorer, memories: Sequence[Memory], query: str, now: datetime, query_vector, vectors) -> np.ndarray:
    """``scorer``'s scores of ``memories`` (with their ``vectors`` [n, dim]) for the query: float64 [n]."""
    scores = scorer.score(memories, query, now, query_vector=query_vector, memory_vectors=vectors)
    return np.asarray(scores, dtype=np.float64).reshape(len(memories))


class Searcher:
    """Archive search of one store re-ranked by ``scorer`` (None: the store's cosine, as it ranks).

    Args:
        store: the memory store searched.
        scorer: a :class:`~memnets.scoring.Scorer`, or None for the store's own ranking.
        fetch_factor: candidates fetched per result wanted, for the scorer to choose from.
    """

    def __init__(self, store, scorer, fetch_factor: int):
        self.store, self.scorer, self.fetch_factor = store, scorer, fetch_factor

    def fetch(
        self, query_vector: np.ndarray, k: int, owner: str, filters: MemoryFilter | None = None
    ) -> list[tuple[Memory, float]]:
        """The ``fetch_factor * k`` nearest current memories of ``owner`` passing ``filters``, nearest first."""
        return self.store.search(query_vector, self.fetch_factor * k, owner, filters=filters)

    def candidates(
        self, query_vector: np.ndarray, k: int, owner: str, filters: MemoryFilter | None = None
    ) -> tuple[list[Memory], np.ndarray]:
        """:meth:`fetch`'s memories with their stored vectors [n, dim]: from the search's own read where the
        store returns them (:class:`~memnets.store.protocol.SearchVectors`), else read by id after it."""
        if supports(self.store, SearchVectors):
            found, vectors = self.store.search_with_vectors(query_vector, self.fetch_factor * k, owner, filters=filters)
            return [m for m, _ in found], vectors
        memories = [m for m, _ in self.fetch(query_vector, k, owner, filters)]
        return memories, self.store.vectors([m.id for m in memories], owner)

    def search(
        self,
        query: str,
        query_vector: np.ndarray,
        owner: str,
        k: int,
        filters: MemoryFilter | None,
        now: datetime,
    ) -> list[tuple[Memory, float]]:
        """The ``k`` best memories of ``owner`` for the query with their scores, best first (ties: nearer first);
        a memory another one invalidated just below that one (:func:`~memnets.memory.supersession.below_successors`)."""
        if self.scorer is None:
            return below_successors(
                [(m, float(s)) for m, s in self.store.search(query_vector, k, owner, filters=filters)]
            )
        memories, vectors = self.candidates(query_vector, k, owner, filters)
        if not memories:
            return []
        scores = score(self.scorer, memories, query, now, query_vector, vectors)
        order = np.argsort(-scores, kind="stable")[:k]
        return below_successors([(memories[i], float(scores[i])) for i in order])


__all__ = ["SearchHit", "Searcher", "score"]
