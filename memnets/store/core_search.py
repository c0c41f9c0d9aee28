"""A search that hands back its results' stored vectors from the rows it read: a part of the store core.

A re-ranker (:class:`memnets.memory.search.Searcher`) scores a search's candidates from their stored
vectors. Every search already selects the vector with each record it decodes; reading the same rows
again by id for their vectors cost a second SQL round trip (a transaction of its own on PostgreSQL)
per query. So an engine's ranking (``_search``) returns :class:`Hit` results, each memory with its score
and the stored vector of the record it was decoded from (:meth:`~memnets.store.core.SqlStore._hit`),
and ``search_with_vectors`` (:meth:`~memnets.store.core.SqlStore.search_with_vectors`, :func:`with_vectors`)
returns those vectors beside the results: the same snapshot, no second read, nothing kept between calls.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from memnets.records import Memory


class Hit(NamedTuple):
    """One search result as the engines rank it: the memory, its score, its stored vector (float32 [dim])."""

    memory: Memory
    score: float
    vector: np.ndarray


def with_vectors(hits: list[Hit], dim: int) -> tuple[list[tuple[Memory, float]], np.ndarray]:
    """(the (memory, score) results of ``hits``, their stored vectors [n, dim] in the same order): what
    ``search_with_vectors`` returns, the vectors taken from the records the search read."""
    if not hits:
        return [], np.zeros((0, dim), np.float32)
    return [(hit.memory, hit.score) for hit in hits], np.stack([hit.vector for hit in hits]).astype(np.float32)
