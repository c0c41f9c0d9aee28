"""A search that hands back its results' stored vectors from the rows it read: a part of the store core.

A re-ranker (:class:`memnets.memory.search.Searcher`) scores a search's candidates from their stored
vectors. Every search already selects the vector with each record it decodes (the core's one reader
of records, :meth:`~memnets.store.core.SqlStore._decode`); reading the same rows again by id for
their vectors cost a second SQL round trip (a transaction of its own on PostgreSQL) per query.
:meth:`SearchVectors.search_with_vectors` keeps the vector bytes of the records the search decodes,
on this thread, and returns them beside the results: the same snapshot, no second read.

:class:`SearchVectors` is a base class of :class:`~memnets.store.core.SqlStore`; the core calls
:meth:`SearchVectors._decoded` with every record's fields as it decodes it.
"""

from __future__ import annotations

import threading

import numpy as np

from memnets.records import Memory
from memnets.store.filters import MemoryFilter


class SearchVectors:
    """:meth:`search_with_vectors` over the core's ``search`` and ``_decode`` (see the module docstring)."""

    dim: int
    _kept = threading.local()  # .vectors: {memory id: float32 bytes} while this thread runs search_with_vectors

    def _decoded(self, fields: dict) -> None:
        """Keep a decoded record's vector (float32 bytes) while this thread runs :meth:`search_with_vectors`."""
        kept = getattr(self._kept, "vectors", None)
        if kept is not None:
            kept[fields["id"]] = fields["vector"]

    def search_with_vectors(
        self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None
    ) -> tuple[list[tuple[Memory, float]], np.ndarray]:
        """(:meth:`search`'s results, their stored vectors [n, dim] in the same order), the vectors taken from
        the records the search read."""
        self._kept.vectors = kept = {}
        try:
            found = self.search(vector, k, owner, filters=filters)
        finally:
            self._kept.vectors = None
        if not found:
            return found, np.zeros((0, self.dim), np.float32)
        return found, np.frombuffer(b"".join(kept[m.id] for m, _ in found), dtype="<f4").reshape(len(found), self.dim)
