"""A search that hands back its results' stored vectors from the rows it read: a part of the store core.

A re-ranker (:class:`memnets.memory.search.Searcher`) scores a search's candidates from their stored
vectors. Every search already selects the vector with each record it decodes; reading the same rows
again by id for their vectors cost a second SQL round trip (a transaction of its own on PostgreSQL)
per query. So an engine's ranking (``_search``) returns :class:`Hit` results, each memory with its score
and the stored vector of the record it was decoded from (:meth:`~memnets.store.core.SqlStore._hit`),
and :meth:`SearchVectors.search_with_vectors` returns those vectors beside the results: the same
snapshot, no second read, nothing kept between calls.

:class:`SearchVectors` is a base class of :class:`~memnets.store.core.SqlStore`; ``_hits`` is the
core's checked search (:meth:`~memnets.store.core.SqlStore._hits`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from memnets.records import Memory
from memnets.store.filters import MemoryFilter


class Hit(NamedTuple):
    """One search result as the engines rank it: the memory, its score, its stored vector (float32 [dim])."""

    memory: Memory
    score: float
    vector: np.ndarray


class SearchVectors:
    """:meth:`search_with_vectors` over the core's ``_hits`` (see the module docstring)."""

    dim: int

    def _hits(self, vector, k: int, owner: str, filters: MemoryFilter | None, where: str) -> list[Hit]:
        raise NotImplementedError

    def search_with_vectors(
        self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None
    ) -> tuple[list[tuple[Memory, float]], np.ndarray]:
        """(:meth:`search`'s results, their stored vectors [n, dim] in the same order), the vectors taken from
        the records the search read."""
        hits = self._hits(vector, k, owner, filters, f"{type(self).__name__}.search_with_vectors")
        if not hits:
            return [], np.zeros((0, self.dim), np.float32)
        return [(hit.memory, hit.score) for hit in hits], np.stack([hit.vector for hit in hits]).astype(np.float32)
