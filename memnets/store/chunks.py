"""The further window vectors of long memories (:mod:`memnets.chunking`), as both stores keep and rank them.

A memory longer than the encoder's window has its main vector (the first window) and, in the
``chunks`` column of its current row, the vectors of its further windows: little-endian float32
``[m, dim]`` bytes, NULL for a memory that fits one window. Keeping them in the memory's own row
makes every path that writes or removes the row (replace, new version, delete, purge, expiry
sweep, erasure, re-embedding) take its chunks with it; an older version keeps its main vector only
(history is not searched). The bytes are bound into the row's seal with the main vector.

Search ranks chunk vectors exactly, next to the main-vector search: :func:`best_scores` gives each
memory's best chunk score, and :func:`merge` returns the k best memories once each at
``max(main score, best chunk score)``. That is exact when the main search is: a memory outside
the main top k has a main score of at most the k-th one, so it can only enter with a chunk score
above that. The cost grows with the owner's chunk vectors (a few per long memory), read per search.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from memnets.store.core_search import Hit
from memnets.store.errors import InvalidMemoryError


def check_chunks(chunks, n: int, dim: int, where: str) -> list[np.ndarray]:
    """``chunks`` (None, or one array [m_i, dim] or None per memory) as float32 arrays; InvalidMemoryError naming the bad one."""
    if chunks is None:
        return [np.zeros((0, dim), np.float32) for _ in range(n)]
    chunks = list(chunks)
    if len(chunks) != n:
        raise InvalidMemoryError(f"{where}: chunks must hold one array per memory ({n}), got {len(chunks)}")
    out = []
    for i, array in enumerate(chunks):
        try:
            array = np.zeros((0, dim)) if array is None else np.asarray(array, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidMemoryError(f"{where}: chunks[{i}] must be a numeric array [m, {dim}]") from None
        if array.size == 0:
            array = np.zeros((0, dim))
        if array.ndim != 2 or array.shape[1] != dim:
            raise InvalidMemoryError(f"{where}: chunks[{i}] must be an array [m, {dim}], got shape {array.shape}")
        if not np.isfinite(array).all() or np.abs(array).max(initial=0.0) > np.finfo(np.float32).max:
            raise InvalidMemoryError(f"{where}: chunks[{i}] contains NaN, inf or values beyond float32")
        out.append(array.astype(np.float32))
    return out


def to_blob(array: np.ndarray) -> bytes | None:
    """The stored form of a memory's chunk vectors: float32 bytes, None when it has none."""
    return np.asarray(array, dtype="<f4").tobytes() if len(array) else None


def from_blob(blob: bytes | None, dim: int) -> np.ndarray:
    """Chunk vectors [m, dim] from their stored form (None: [0, dim])."""
    if blob is None:
        return np.zeros((0, dim), np.float32)
    return np.frombuffer(bytes(blob), dtype="<f4").reshape(-1, dim)


def sealed_bytes(vector: bytes, chunks: bytes | None) -> bytes:
    """The vector bytes a row's seal binds: the main vector's, then its chunks' (rows without chunks: as before)."""
    return bytes(vector) + (bytes(chunks) if chunks else b"")


def best_scores(rows: Iterable[tuple[str, bytes]], query: np.ndarray, dim: int) -> dict[str, float]:
    """{memory id: its best chunk's inner product with ``query``} of (id, chunk bytes) rows (NULL: no chunks)."""
    return {memory_id: float((from_blob(blob, dim) @ query).max()) for memory_id, blob in rows if blob}


def entering(found: Sequence[Hit], best: dict[str, float], k: int) -> list[str]:
    """The ids of ``best`` that are not in the main search's ``found`` (best first) and whose chunk score
    could put them among the k: the memories :func:`merge` has to read."""
    present = {hit.memory.id for hit in found}
    floor = found[-1].score if len(found) >= k else -np.inf
    return [memory_id for memory_id, score in best.items() if memory_id not in present and score > floor]


def merge(
    found: Sequence[Hit],
    best: dict[str, float],
    k: int,
    fetch: Callable[[list[str]], list[Hit]],
) -> list[Hit]:
    """The k best hits of the main search ``found`` (best first) and the chunk scores ``best``, each
    memory once at its best score. ``fetch(ids)`` returns the hits of those of the ids (not in
    ``found``) that the search may return (current, unexpired, passing its filters); their scores are
    replaced by their windows'."""
    if not best:
        return list(found)
    scored = {hit.memory.id: hit for hit in found}
    wanted = entering(found, best, k)
    for hit in fetch(wanted) if wanted else []:
        scored[hit.memory.id] = hit._replace(score=best[hit.memory.id])
    merged = [hit._replace(score=max(hit.score, best.get(hit.memory.id, hit.score))) for hit in scored.values()]
    return sorted(merged, key=lambda hit: -hit.score)[:k]


__all__ = ["best_scores", "check_chunks", "entering", "from_blob", "merge", "sealed_bytes", "to_blob"]
