"""A FAISS vector index over memories, partitioned by owner, that forgets without rebuilding.

Every owner (agent or user) gets its own index, so a search ranks only that owner's memories:
filtering happens before ranking, never by fetching extra neighbours and dropping foreign ones.

Each owner holds ONE CPU index, and it is the only copy of the vectors (they can be read back from
it, exactly for the flat, IVF-Flat and HNSW kinds); which kind follows the owner's size:

- ``flat`` (exact, ``IndexFlatIP``) below ``exact_below`` memories; a deletion removes the vector.
- ``ivf`` above it (what ``index="auto"`` picks, for 50k to 10M memories on CPU and GPU): an
  inverted file (``IndexIVFFlat``) of about 2*sqrt(n) lists (spherical k-means on 32 vectors per
  list, an HNSW graph over the centroids from 1,024 lists). Its float codes are the one copy of
  the vectors: exact scores, exact reconstruction for rebuilds. A deletion removes the ids from
  their inverted lists directly (a hash-table direct map makes that O(deleted)).
- ``ivf-sq8``: the same with 8-bit scalar-quantised codes, a quarter of the memory; scores are
  approximate (errors ~1e-3, recall@10 a little lower: bench/search.py), reconstruction and so a
  retrain are lossy (the exact vectors live in the store, the Archive's SQLite table).
- ``hnsw`` (``IndexHNSWFlat``): fast searches but a slow build, so chosen explicitly where its
  build time is acceptable (tens of thousands of memories on a few cores). HNSW cannot remove a
  node, so a deletion zeroes the vector and marks a tombstone; searches skip tombstones through
  an ``IDSelectorBitmap`` in the search parameters (the graph search keeps going until k live
  results are found), and an exact scan of the live vectors answers any row still short of k.

Upkeep never runs in a search or a deletion: when an owner's tombstones pass ``compact_at`` of its
index, when it grows past ``exact_below`` (flat -> approximate), or when it grows
``retrain_growth`` times past the size its IVF was trained at, a background thread copies the live
vectors, builds the new index, then, under the lock, replays the adds and removes that happened
meanwhile and swaps it in atomically (``background=False`` runs it at the end of the add or
remove that calls for it instead). ``compact()`` does the same on demand, ``wait()`` waits for
upkeep in flight. A new owner's first batch builds its index synchronously (a bulk load).
Batch-1 searches run on one OpenMP thread (scoped to the call, the setting restored after it).

With a GPU (faiss-gpu), flat and IVF owners are searched on a GPU copy of the CPU index (the CPU
index stays the source of truth; the copy is remade, not retrained, at the first search after a
deletion); HNSW owners are searched on the CPU.

Vectors are compared by inner product; pass L2-normalised vectors (as MemoryEncoder returns) to get
cosine similarity. Memory ids are strings, unique across owners, mapped to int64 labels internally.
The retriever is thread-safe: one re-entrant lock guards every call.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

logger = logging.getLogger(__name__)

FORMAT_VERSION = 2
NAMED_KINDS = ("flat", "hnsw", "ivf", "ivf-sq8")
INDEX_KINDS = (*NAMED_KINDS, "auto")
MANIFEST = "retriever.json"
# index="auto": owners below this size are searched exactly (flat), larger ones with IVF-Flat.
AUTO_EXACT_BELOW = 50_000
# a named approximate index ("hnsw", "ivf", a factory string) still searches tiny owners exactly.
APPROX_EXACT_BELOW = 1_000
IVF_TRAIN_PER_LIST = 32  # k-means of the IVF lists runs on a sample of this many vectors per list
IVF_TRAIN_SAMPLE = 65_536  # sample size for factory-string indexes (PQ codebooks and the like)
IVF_TRAIN_ITERATIONS = 5  # spherical k-means iterations: at 1M, 5 instead of 10 halve the training (77 -> 42 s
# under load ~7) at the same recall (0.988 at nprobe 16 on 300 bench queries); FAISS's default is 25
IVF_MIN_POINTS_PER_LIST = 39  # FAISS's advice: at least this many vectors per list
IVF_HNSW_QUANTIZER_FROM = 1024  # from this many lists, an HNSW graph over the centroids assigns vectors
HNSW_QUANTIZER_ADD_EF = 32  # its beam when adding: 2.2x faster than ef 64 (and than BLAS over 2,000
# centroids), the same list for 99.9% of vectors (measured on bench vectors, 2,000 centroids)
HNSW_QUANTIZER_EF = 64  # its beam when searching: max(this, 2 * nprobe)
GPU_MAX_K = 2048  # FAISS GPU kernels select at most this many neighbours
SINGLE_THREAD_MAX_BATCH = 1  # batches up to this size are searched on one OpenMP thread


def ivf_lists(n: int) -> int:
    """IVF list count for n vectors: about 2*sqrt(n) (2,000 at 1M), with >= 39 vectors per list.

    k-means costs sample x lists per iteration and is most of the build on a few cores; 2*sqrt(n)
    lists keep a 1M build near a minute while 16 probes still scan under 1% of the vectors."""
    return max(1, min(int(2 * math.sqrt(n)), n // IVF_MIN_POINTS_PER_LIST))


def default_nprobe(nlist: int) -> int:
    """Lists visited per query when no nprobe is given: 16, or nlist/128 for more than 2,048 lists.

    Chosen on realistic MiniLM vectors (bench/search.py): recall@10 0.976-0.980 against exact search
    for IVF-Flat at 10k, 100k and 1M memories (200, 632, 2,000 lists), 0.956-0.972 for IVF-SQ8."""
    return min(nlist, max(16, nlist // 128))


def gpu_available() -> bool:
    """Whether this FAISS build has GPU support and sees at least one GPU."""
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


_GPU_RESOURCES = None


def _gpu_resources():
    """One StandardGpuResources for the process (it owns scratch memory; sharing it is the norm)."""
    global _GPU_RESOURCES
    if _GPU_RESOURCES is None:
        _GPU_RESOURCES = faiss.StandardGpuResources()
    return _GPU_RESOURCES


@contextmanager
def omp_threads(n: int) -> Iterator[None]:
    """FAISS's OpenMP pool limited to n threads in the calling thread, restored on exit.

    A batch-1 search is fastest on one thread: waking a second OpenMP thread costs more than the
    search, and on a loaded machine it waits for its core."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


@dataclass
class _Owner:
    """One owner's index and its bookkeeping.

    Positional kinds (flat, hnsw) number vectors 0..ntotal-1 and keep ``labels`` (position -> int
    label, ascending, because labels are handed out in increasing order and appended); HNSW keeps
    ``alive`` (position -> not deleted) for its tombstones. IVF kinds store the labels themselves.
    """

    kind: str  # "flat", "hnsw", "ivf", "ivf-sq8" or a factory string
    index: faiss.Index
    live: int = 0  # vectors not deleted
    trained_size: int = 0  # live vectors when the index was built (IVF: trained)
    labels: np.ndarray | None = None  # positional kinds: position -> label
    alive: np.ndarray | None = None  # tombstoned kinds: position -> live
    selector: object | None = None  # cached IDSelectorBitmap over ``alive`` (None: rebuild or none needed)
    journal: list | None = None  # while a rebuild is in flight: ("add", labels, vectors) / ("remove", labels)
    gpu: object | None = None  # GPU copy, or None
    gpu_stale: bool = True
    extra: dict = field(default_factory=dict)

    @property
    def positional(self) -> bool:
        return self.labels is not None

    @property
    def tombstones(self) -> int:
        return 0 if self.alive is None else int(self.index.ntotal - self.live)


class FaissRetriever:
    """Owner-partitioned FAISS inner-product search with string ids.

    Args:
        dim: vector dimension.
        index: "flat" (exact), "ivf", "ivf-sq8", "hnsw", "auto" (exact below ``AUTO_EXACT_BELOW``
            vectors per owner, IVF-Flat above), or a FAISS factory string such as "HNSW32,Flat" or
            "IVF256,PQ32" (inner-product metric; trained on the owner's vectors).
        use_gpu: "auto" (GPU when FAISS has one), True (require one), or False.
        exact_below: owners with fewer vectors are searched exactly; default 50,000 for "auto",
            1,000 for the approximate kinds; 0 forces the approximate index for every owner.
        hnsw_m, ef_search, ef_construction: HNSW graph degree and beam widths (efSearch >= k always).
        nprobe: IVF lists visited per query; None picks ``default_nprobe(nlist)``.
        compact_at: rebuild an owner's tombstoned index (HNSW) once tombstones pass this share of it.
        retrain_growth: retrain an owner's IVF once it holds this many times the vectors it was
            trained on (and move a flat owner to its approximate kind once it passes exact_below).
        background: run compaction and retraining in a background thread (True), or synchronously
            at the end of the add/remove that calls for them (False: deterministic, for scripts).
    """

    def __init__(
        self,
        dim: int,
        index: str = "flat",
        use_gpu: bool | str = "auto",
        *,
        exact_below: int | None = None,
        hnsw_m: int = 32,
        ef_search: int = 128,
        ef_construction: int = 200,
        nprobe: int | None = None,
        compact_at: float = 0.2,
        retrain_growth: float = 4.0,
        background: bool = True,
    ) -> None:
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"FaissRetriever: dim must be a positive int, got {dim!r}")
        if not isinstance(index, str) or not index:
            raise ValueError(
                f"FaissRetriever: index must be one of {INDEX_KINDS} or a FAISS factory string, got {index!r}"
            )
        if index not in INDEX_KINDS:
            try:  # fail now, not at the first add, on a factory string FAISS cannot parse
                faiss.index_factory(int(dim), index, faiss.METRIC_INNER_PRODUCT)
            except RuntimeError as error:
                raise ValueError(
                    f"FaissRetriever: index {index!r} is neither one of {INDEX_KINDS} "
                    f"nor a valid FAISS factory string: {str(error).splitlines()[0]}"
                ) from None
        if use_gpu not in ("auto", True, False):
            raise ValueError(f"FaissRetriever: use_gpu must be 'auto', True or False, got {use_gpu!r}")
        if use_gpu is True and not gpu_available():
            raise RuntimeError(
                "FaissRetriever: use_gpu=True but FAISS has no GPU support here "
                "(install faiss-gpu and check faiss.get_num_gpus())"
            )
        if exact_below is not None and (not isinstance(exact_below, (int, np.integer)) or exact_below < 0):
            raise ValueError(f"FaissRetriever: exact_below must be an int >= 0, got {exact_below!r}")
        for name, value in (("hnsw_m", hnsw_m), ("ef_search", ef_search), ("ef_construction", ef_construction)):
            _check_positive_int(value, name, "FaissRetriever")
        if nprobe is not None:
            _check_positive_int(nprobe, "nprobe", "FaissRetriever")
        if not isinstance(compact_at, (int, float)) or not 0 < compact_at <= 1:
            raise ValueError(f"FaissRetriever: compact_at must be a share in (0, 1], got {compact_at!r}")
        if not isinstance(retrain_growth, (int, float)) or retrain_growth <= 1:
            raise ValueError(f"FaissRetriever: retrain_growth must be a number > 1, got {retrain_growth!r}")
        self.dim = int(dim)
        self.index = index
        self.use_gpu = gpu_available() if use_gpu == "auto" else bool(use_gpu)
        if exact_below is None:
            exact_below = AUTO_EXACT_BELOW if index == "auto" else APPROX_EXACT_BELOW
        self.exact_below = int(exact_below)
        self.hnsw_m, self.ef_search, self.ef_construction, self.nprobe = hnsw_m, ef_search, ef_construction, nprobe
        self.compact_at, self.retrain_growth, self.background = float(compact_at), float(retrain_growth), background
        self._lock = threading.RLock()
        self._upkeep: dict[str, threading.Thread] = {}  # owner -> rebuild in flight
        self._owners: dict[str, _Owner] = {}
        self._int_of: dict[str, int] = {}  # memory id -> int64 label
        self._str_of: dict[int, str] = {}  # int64 label -> memory id
        self._owner_of: dict[str, str] = {}  # memory id -> owner
        self._next_label = 0

    # ------------------------------------------------------------------ inspection
    def __len__(self) -> int:
        return len(self._int_of)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._int_of

    @property
    def owners(self) -> list[str]:
        """Owners that hold at least one vector."""
        with self._lock:
            return [owner for owner, state in self._owners.items() if state.live]

    def count(self, owner: str) -> int:
        """How many vectors the owner holds (0 for an unknown owner)."""
        state = self._owners.get(owner)
        return state.live if state else 0

    def ids(self, owner: str) -> list[str]:
        """The owner's memory ids in insertion order (after removals)."""
        with self._lock:
            state = self._owners.get(owner)
            if state is None:
                return []
            return [self._str_of[label] for label in _live_labels(state).tolist()]

    def kind(self, owner: str) -> str | None:
        """The kind of the owner's index now ("flat", "ivf", "hnsw", ... or None for no owner)."""
        state = self._owners.get(owner)
        return state.kind if state else None

    def stats(self, owner: str) -> dict:
        """The owner's index: kind, live vectors, tombstones, trained size, IVF lists and bytes held.

        ``bytes`` counts what the index stores (vectors or codes, ids, graph links, IVF centroids
        and direct map), not allocator overhead; ``bytes / live`` is the memory per memory."""
        with self._lock:
            state = self._owners.get(owner)
            if state is None:
                return {"kind": None, "live": 0, "tombstones": 0, "bytes": 0}
            out = {
                "kind": state.kind,
                "live": state.live,
                "tombstones": state.tombstones,
                "trained_size": state.trained_size,
                "bytes": _index_bytes(state),
            }
            ivf = faiss.try_extract_index_ivf(state.index)
            if ivf is not None:
                out["nlist"] = int(ivf.nlist)
                out["nprobe"] = self.nprobe or default_nprobe(int(ivf.nlist))
            return out

    # ------------------------------------------------------------------ writes
    def add(self, ids: Sequence[str], vectors: np.ndarray, owner: str) -> None:
        """Add vectors [N, dim] under their memory ids for one owner.

        A new owner's index is built from this batch (flat, or trained here when the batch already
        passes ``exact_below``); later batches are appended to it in place.
        Raises ValueError for a length mismatch, a wrong dimension, NaN/inf values, an empty or
        non-string id, an id repeated in the batch or already in the retriever (under any owner).
        """
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"FaissRetriever.add: owner must be a non-empty string, got {owner!r}")
        if isinstance(ids, str):
            raise TypeError("FaissRetriever.add: ids must be a sequence of strings, not one string")
        ids = list(ids)
        vectors = self._check_vectors(vectors, "add")
        if len(ids) != vectors.shape[0]:
            raise ValueError(f"FaissRetriever.add: got {len(ids)} ids but {vectors.shape[0]} vectors")
        bad = [i for i in ids if not isinstance(i, str) or not i]
        if bad:
            raise ValueError(f"FaissRetriever.add: ids must be non-empty strings, got {bad[:5]!r}")
        repeated = sorted(i for i, count in Counter(ids).items() if count > 1)
        if repeated:
            raise ValueError(f"FaissRetriever.add: duplicate ids in the batch: {repeated[:5]!r}")
        with self._lock:
            present = [i for i in ids if i in self._int_of]
            if present:
                raise ValueError(
                    f"FaissRetriever.add: ids already in the retriever (remove them first): {present[:5]!r}"
                )
            if not ids:
                return
            labels = np.arange(self._next_label, self._next_label + len(ids), dtype="int64")
            state = self._owners.get(owner)
            if state is None:
                state = self._build(self._wanted_kind(len(ids)), vectors, labels)
                self._owners[owner] = state
            else:
                _append(state, vectors, labels)
                if state.journal is not None:
                    state.journal.append(("add", labels, vectors.copy()))  # the caller may reuse its array
                self._extend_gpu(state, vectors, labels)
            self._next_label += len(ids)
            for memory_id, label in zip(ids, labels.tolist()):
                self._int_of[memory_id] = label
                self._str_of[label] = memory_id
                self._owner_of[memory_id] = owner
            self._maybe_upkeep(owner, state)

    def remove(self, ids: Sequence[str], *, missing_ok: bool = False) -> int:
        """Remove memories by id (whatever their owner); returns how many were removed.

        Flat and IVF indexes drop the vectors at once; HNSW zeroes them and tombstones their
        nodes (searches skip them; compaction drops them later, off the request path).
        Raises KeyError naming the unknown ids unless ``missing_ok``.
        """
        if isinstance(ids, str):
            raise TypeError("FaissRetriever.remove: ids must be a sequence of strings, not one string")
        ids = list(dict.fromkeys(ids))
        with self._lock:
            missing = [i for i in ids if i not in self._int_of]
            if missing and not missing_ok:
                raise KeyError(
                    f"FaissRetriever.remove: unknown ids {missing[:5]!r}" + (" ..." if len(missing) > 5 else "")
                )
            by_owner: dict[str, list[str]] = {}
            for memory_id in ids:
                if memory_id in self._int_of:
                    by_owner.setdefault(self._owner_of[memory_id], []).append(memory_id)
            removed = 0
            for owner, owner_ids in by_owner.items():
                state = self._owners[owner]
                labels = np.array(sorted(self._int_of[i] for i in owner_ids), dtype="int64")
                removed += _delete(state, labels)
                if state.journal is not None:
                    state.journal.append(("remove", labels, None))
                state.gpu_stale = True
                for memory_id in owner_ids:
                    label = self._int_of.pop(memory_id)
                    del self._str_of[label], self._owner_of[memory_id]
                if state.live == 0:
                    del self._owners[owner]  # an upkeep in flight sees the owner gone and drops its result
                else:
                    self._maybe_upkeep(owner, state)
            return removed

    # ------------------------------------------------------------------ search
    def search(
        self, vectors: np.ndarray, k: int, owner: str, *, nprobe: int | None = None, ef_search: int | None = None
    ) -> tuple[list[list[str]], np.ndarray]:
        """The k best memories of ``owner`` for each query vector [B, dim], best first.

        ``nprobe`` (IVF lists visited) and ``ef_search`` (HNSW beam width) override the
        retriever's settings for this call. Returns (ids [B][k'], scores float32 [B, k']) with
        k' = min(k, owner's size): an unknown owner gives B empty lists and a [B, 0] array.
        Scores are inner products. Deleted memories are never returned.
        """
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ValueError(f"FaissRetriever.search: k must be an int >= 1, got {k!r}")
        if nprobe is not None:
            _check_positive_int(nprobe, "nprobe", "FaissRetriever.search")
        if ef_search is not None:
            _check_positive_int(ef_search, "ef_search", "FaissRetriever.search")
        vectors = self._check_vectors(vectors, "search")
        n_queries = vectors.shape[0]
        with self._lock:
            state = self._owners.get(owner)
            if state is None or state.live == 0 or n_queries == 0:
                return [[] for _ in range(n_queries)], np.zeros((n_queries, 0), dtype="float32")
            k = min(int(k), state.live)
            if n_queries <= SINGLE_THREAD_MAX_BATCH:
                with omp_threads(1):
                    scores, labels = self._search_state(state, vectors, k, nprobe, ef_search)
            else:
                scores, labels = self._search_state(state, vectors, k, nprobe, ef_search)
            ids = [[self._str_of[int(label)] for label in row] for row in labels]
        return ids, scores.astype("float32", copy=False)

    def _search_state(
        self, state: _Owner, vectors: np.ndarray, k: int, nprobe: int | None, ef_search: int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, labels) [B, k]; every row full (an approximate index's short rows answered exactly)."""
        index, params = state.index, None
        hnsw = _find_hnsw(index)
        if self.use_gpu and k <= GPU_MAX_K and hnsw is None:
            return self._search_gpu(state, vectors, k, nprobe)
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            params = _ivf_params(ivf, nprobe or self.nprobe or default_nprobe(ivf.nlist))
        elif hnsw is not None:
            # with tombstones, a wider beam keeps k live results within reach
            ef = max(int(ef_search or self.ef_search), k * (2 if state.tombstones else 1))
            params = faiss.SearchParametersHNSW(efSearch=ef)
        if state.tombstones:
            if params is None:
                params = faiss.SearchParameters()
            params.sel = _selector(state)
        scores, found = index.search(vectors, k, params=params)
        short = (found < 0).any(axis=1)
        if short.any():  # the visited lists / graph held fewer than k live vectors: scan them all
            scores[short], found[short] = self._exhaustive(state, vectors[short], k)
        if state.positional:
            found = state.labels[found]
        return scores, found

    def _exhaustive(self, state: _Owner, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Search every live vector of the owner (exact for flat codes): the fallback for short rows."""
        ivf = faiss.try_extract_index_ivf(state.index)
        if ivf is not None:
            return state.index.search(vectors, k, params=_ivf_params(ivf, ivf.nlist))
        hnsw = _find_hnsw(state.index)
        storage = faiss.downcast_index(hnsw.storage) if hnsw is not None else state.index
        params = faiss.SearchParameters(sel=_selector(state)) if state.tombstones else None
        return storage.search(vectors, k, params=params)

    def _search_gpu(self, state: _Owner, vectors: np.ndarray, k: int, nprobe: int | None):
        """Search the owner's GPU copy (made from the CPU index when missing or stale)."""
        if state.gpu is None or state.gpu_stale:  # a copy of the CPU index, nothing retrained
            if faiss.try_extract_index_ivf(state.index) is not None:
                state.gpu, state.extra["gpu_labels"] = faiss.index_cpu_to_gpu(_gpu_resources(), 0, state.index), None
            else:
                labels, data = _live_contents(state)
                state.gpu = faiss.GpuIndexFlatIP(_gpu_resources(), self.dim)
                state.gpu.add(data)
                state.extra["gpu_labels"] = labels
            state.gpu_stale = False
        ivf = faiss.try_extract_index_ivf(state.gpu)
        if ivf is not None:
            ivf.nprobe = min(int(nprobe or self.nprobe or default_nprobe(ivf.nlist)), ivf.nlist)
        scores, found = state.gpu.search(vectors, k)
        positions = state.extra.get("gpu_labels")
        if positions is not None:
            found = np.where(found >= 0, positions[np.clip(found, 0, None)], -1)
        short = (found < 0).any(axis=1)
        if short.any():
            exhaustive_scores, exhaustive = self._exhaustive(state, vectors[short], k)
            scores[short] = exhaustive_scores
            found[short] = state.labels[exhaustive] if state.positional else exhaustive
        return scores, found

    def _extend_gpu(self, state: _Owner, vectors: np.ndarray, labels: np.ndarray) -> None:
        """Append new vectors to a current GPU copy (a stale one is remade at the next search)."""
        if state.gpu is None or state.gpu_stale:
            return
        positions = state.extra.get("gpu_labels")
        if positions is None:
            state.gpu.add_with_ids(vectors, labels)
        else:
            state.gpu.add(vectors)
            state.extra["gpu_labels"] = np.concatenate([positions, labels])

    # ------------------------------------------------------------------ building and upkeep
    def _wanted_kind(self, n: int) -> str:
        """Which index an owner of n vectors should have."""
        if self.index == "flat" or n < self.exact_below:
            return "flat"
        if self.index == "auto":
            return "ivf"
        return self.index

    def _build(self, kind: str, vectors: np.ndarray, labels: np.ndarray) -> _Owner:
        """A new owner state of the given kind holding (vectors, labels); trains IVF/PQ kinds."""
        n, metric = vectors.shape[0], faiss.METRIC_INNER_PRODUCT
        if kind == "flat":
            index = faiss.IndexFlatIP(self.dim)
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, metric)
            index.hnsw.efConstruction = self.ef_construction
        elif kind in ("ivf", "ivf-sq8"):
            nlist = ivf_lists(n)
            quantizer = "_HNSW32" if nlist >= IVF_HNSW_QUANTIZER_FROM else ""
            index = faiss.index_factory(self.dim, f"IVF{nlist}{quantizer},{'Flat' if kind == 'ivf' else 'SQ8'}", metric)
            # spherical k-means: unit centroids, so that the L2 assignment used while training an HNSW
            # quantizer agrees with the inner product used to search it
            index.cp.niter, index.cp.spherical, index.cp.min_points_per_centroid = IVF_TRAIN_ITERATIONS, True, 1
        else:
            index = faiss.index_factory(self.dim, kind, metric)
            hnsw = _find_hnsw(index)
            if hnsw is not None:
                hnsw.hnsw.efConstruction = self.ef_construction
        if not index.is_trained:
            sample, ivf = vectors, faiss.try_extract_index_ivf(index)
            size = IVF_TRAIN_PER_LIST * ivf.nlist if ivf is not None and kind in NAMED_KINDS else IVF_TRAIN_SAMPLE
            if n > size:
                sample = vectors[np.sort(np.random.default_rng(n).choice(n, size, replace=False))]
            try:
                index.train(sample)
            except RuntimeError as error:
                raise ValueError(
                    f"FaissRetriever: cannot train index {kind!r} on {n} vectors: {str(error).strip().splitlines()[-1]}"
                ) from None
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # O(1) removal and reconstruction by id
            quantizer_hnsw = _find_hnsw(ivf.quantizer)
            if quantizer_hnsw is not None:
                quantizer_hnsw.hnsw.efSearch = HNSW_QUANTIZER_ADD_EF
            state = _Owner(kind=kind, index=index)
        elif _find_hnsw(index) is not None:
            state = _Owner(kind=kind, index=index, labels=np.zeros(0, "int64"), alive=np.zeros(0, bool))
        else:
            state = _Owner(kind=kind, index=index, labels=np.zeros(0, "int64"))
        _append(state, vectors, labels)
        state.trained_size = n
        return state

    def _maybe_upkeep(self, owner: str, state: _Owner) -> None:
        """Start a rebuild when tombstones, growth or the owner's size call for one."""
        if owner in self._upkeep or state.journal is not None:
            return
        reason = None
        if state.tombstones and state.tombstones >= self.compact_at * state.index.ntotal:
            reason = f"{state.tombstones} tombstones of {state.index.ntotal}"
        elif self._wanted_kind(state.live) != state.kind and state.live >= self.exact_below:
            reason = f"{state.live} vectors: {state.kind} -> {self._wanted_kind(state.live)}"
        elif (
            state.kind != "flat"
            and state.live > self.retrain_growth * max(state.trained_size, 1)
            and faiss.try_extract_index_ivf(state.index) is not None
        ):
            reason = f"{state.live} vectors, trained at {state.trained_size}"
        if reason is not None:
            self._start_upkeep(owner, reason)

    def _start_upkeep(self, owner: str, reason: str) -> None:
        if not self.background:
            self._rebuild(owner, reason)
            return
        thread = threading.Thread(target=self._rebuild, args=(owner, reason), daemon=True, name=f"faiss-upkeep-{owner}")
        self._upkeep[owner] = thread
        thread.start()

    def _rebuild(self, owner: str, reason: str) -> bool:
        """Rebuild one owner's index from its live vectors, then swap it in; True when swapped.

        The copy is taken and the swap made under the lock; the build between them runs without it,
        while adds and removes go on and are journalled, then replayed into the new index."""
        try:
            with self._lock:
                state = self._owners.get(owner)
                if state is None or state.journal is not None:
                    return False
                labels, vectors = _live_contents(state)
                state.journal = []
            logger.info("rebuilding the index of %r (%s)", owner, reason)
            try:
                fresh = self._build(self._wanted_kind(len(labels)), vectors, labels)
                del vectors
            except Exception:
                logger.exception("rebuilding the index of %r failed; the current index stays", owner)
                with self._lock:
                    state.journal = None
                return False
            with self._lock:
                if self._owners.get(owner) is not state:  # the owner was emptied meanwhile
                    return False
                for op, op_labels, op_vectors in state.journal:
                    if op == "add":
                        _append(fresh, op_vectors, op_labels)
                    else:
                        _delete(fresh, op_labels)
                self._owners[owner] = fresh
                state.journal = None
                logger.info("swapped in the new %s index of %r (%d vectors)", fresh.kind, owner, fresh.live)
        finally:
            with self._lock:
                if self._upkeep.get(owner) is threading.current_thread():
                    del self._upkeep[owner]
        with self._lock:  # the replayed journal may call for more (tombstones of removes made meanwhile)
            if self._owners.get(owner) is fresh:
                self._maybe_upkeep(owner, fresh)
        return True

    def compact(self, owner: str | None = None) -> int:
        """Rebuild the tombstoned (or outgrown) indexes of one owner or all, now, in this thread.

        Searches, adds and removes from other threads go on meanwhile. Returns how many owners'
        indexes were swapped."""
        with self._lock:
            owners = [owner] if owner is not None else [o for o, s in self._owners.items() if s.tombstones]
        self.wait()
        return sum(self._rebuild(name, "compact()") for name in owners)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for background upkeep in flight; True when none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:  # a finished rebuild may start another one
            with self._lock:
                threads = list(self._upkeep.values())
            if not threads:
                return True
            for thread in threads:
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if deadline is not None and time.monotonic() >= deadline:
                with self._lock:
                    return not self._upkeep

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path) -> Path:
        """Write the retriever to a folder: one FAISS file per owner and a JSON manifest (no pickle).

        The files are ``retriever.json`` and ``owner-<n>.faiss``. Tombstoned vectors were zeroed
        when deleted, so no deleted vector reaches the disk."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with self._lock:
            owners = []
            for number, (owner, state) in enumerate(self._owners.items()):
                live = _live_labels(state)
                entry = {
                    "owner": owner,
                    "file": f"owner-{number}.faiss",
                    "kind": state.kind,
                    "trained_size": state.trained_size,
                    "ids": [self._str_of[label] for label in live.tolist()],
                    "labels": live.tolist(),
                }
                if state.positional:
                    entry["positions"] = state.labels.tolist()  # label per position, tombstones included
                faiss.write_index(state.index, str(directory / entry["file"]))
                owners.append(entry)
            manifest = {
                "format_version": FORMAT_VERSION,
                "dim": self.dim,
                "index": self.index,
                "exact_below": self.exact_below,
                "hnsw_m": self.hnsw_m,
                "ef_search": self.ef_search,
                "ef_construction": self.ef_construction,
                "nprobe": self.nprobe,
                "compact_at": self.compact_at,
                "retrain_growth": self.retrain_growth,
                "next_label": self._next_label,
                "owners": owners,
            }
        (directory / MANIFEST).write_text(json.dumps(manifest))
        return directory

    @classmethod
    def load(cls, directory: str | Path, use_gpu: bool | str = "auto", *, background: bool = True) -> FaissRetriever:
        """Read a folder written by ``save``; checks the format version, dims and id counts."""
        directory = Path(directory)
        path = directory / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"FaissRetriever.load: no {MANIFEST} in {directory}")
        manifest = json.loads(path.read_text())
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"FaissRetriever.load: {path} has format_version {manifest.get('format_version')!r}, "
                f"this version reads {FORMAT_VERSION}"
            )
        retriever = cls(
            manifest["dim"],
            manifest["index"],
            use_gpu,
            exact_below=manifest["exact_below"],
            hnsw_m=manifest["hnsw_m"],
            ef_search=manifest["ef_search"],
            ef_construction=manifest["ef_construction"],
            nprobe=manifest["nprobe"],
            compact_at=manifest["compact_at"],
            retrain_growth=manifest["retrain_growth"],
            background=background,
        )
        retriever._next_label = int(manifest["next_label"])
        for entry in manifest["owners"]:
            index_path = directory / entry["file"]
            index = faiss.read_index(str(index_path))
            ids, labels = entry["ids"], np.asarray(entry["labels"], dtype="int64")
            positions = np.asarray(entry["positions"], dtype="int64") if "positions" in entry else None
            expected = len(positions) if positions is not None else len(ids)
            if index.d != retriever.dim or index.ntotal != expected or len(labels) != len(ids):
                raise ValueError(
                    f"FaissRetriever.load: {index_path} holds {index.ntotal} vectors of dim {index.d}; "
                    f"the manifest expects {expected} of dim {retriever.dim}"
                )
            state = _Owner(kind=entry["kind"], index=index, live=len(ids), trained_size=int(entry["trained_size"]))
            if positions is not None:
                state.labels = positions
                alive = np.isin(positions, labels)
                if _find_hnsw(index) is not None:
                    state.alive = alive
                if int(alive.sum()) != len(labels):
                    raise ValueError(
                        f"FaissRetriever.load: {path} lists labels of {entry['owner']!r} that its index lacks"
                    )
            elif (ivf := faiss.try_extract_index_ivf(index)) is not None:
                ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
            for memory_id, label in zip(ids, labels.tolist()):
                if memory_id in retriever._int_of or label in retriever._str_of or label >= retriever._next_label:
                    raise ValueError(
                        f"FaissRetriever.load: id {memory_id!r} (label {label}) is repeated or out of range in {path}"
                    )
                retriever._int_of[memory_id], retriever._str_of[label] = label, memory_id
                retriever._owner_of[memory_id] = entry["owner"]
            retriever._owners[entry["owner"]] = state
        return retriever

    # ------------------------------------------------------------------ validation
    def _check_vectors(self, vectors, where: str) -> np.ndarray:
        array = np.asarray(vectors)
        if array.ndim != 2:
            raise ValueError(
                f"FaissRetriever.{where}: vectors must be a 2-D array [N, {self.dim}], "
                f"got shape {array.shape} (reshape one vector with v[None, :])"
            )
        if array.shape[1] != self.dim:
            raise ValueError(
                f"FaissRetriever.{where}: vectors have dim {array.shape[1]}, the retriever has dim {self.dim}"
            )
        if not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"FaissRetriever.{where}: vectors must be numeric, got dtype {array.dtype}")
        array = np.ascontiguousarray(array, dtype="float32")
        if not np.isfinite(array).all():
            rows = np.flatnonzero(~np.isfinite(array).all(axis=1))
            raise ValueError(f"FaissRetriever.{where}: vectors contain NaN or inf (rows {rows[:5].tolist()})")
        return array


# ---------------------------------------------------------------------- index helpers
def _check_positive_int(value, name: str, where: str) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{where}: {name} must be an int >= 1, got {value!r}")


def _find_hnsw(index):
    """The HNSW index inside an index, if any (to set efSearch and read its storage), else None."""
    index = faiss.downcast_index(index)
    return index if isinstance(index, faiss.IndexHNSW) else None


def _ivf_params(ivf, nprobe: int):
    """SearchParametersIVF visiting nprobe lists; with an HNSW quantizer, a beam wide enough to find them."""
    params = faiss.SearchParametersIVF(nprobe=min(int(nprobe), ivf.nlist))
    if _find_hnsw(ivf.quantizer) is not None:
        quantizer_params = faiss.SearchParametersHNSW(efSearch=max(HNSW_QUANTIZER_EF, 2 * params.nprobe))
        params.quantizer_params = quantizer_params
        params.referenced_objects = [quantizer_params]  # Python owns them: alive as long as params
    return params


def _append(state: _Owner, vectors: np.ndarray, labels: np.ndarray) -> None:
    """Add vectors under their labels (ascending, above every label the owner holds)."""
    if state.positional:
        state.index.add(vectors)
        state.labels = np.concatenate([state.labels, labels])
        if state.alive is not None:
            state.alive = np.concatenate([state.alive, np.ones(len(labels), bool)])
            state.selector = None
    else:
        state.index.add_with_ids(vectors, labels)
    state.live += len(labels)


def _delete(state: _Owner, labels: np.ndarray) -> int:
    """Delete labels (sorted) from an owner's index: removed outright, or zeroed and tombstoned (HNSW)."""
    if not state.positional:
        removed = int(state.index.remove_ids(faiss.IDSelectorArray(labels)))
    else:
        positions = np.searchsorted(state.labels, labels)
        positions = positions[
            (positions < len(state.labels)) & (state.labels[np.clip(positions, 0, len(state.labels) - 1)] == labels)
        ]
        if state.alive is None:
            removed = int(state.index.remove_ids(faiss.IDSelectorArray(positions.astype("int64"))))
            state.labels = np.delete(state.labels, positions)
        else:
            positions = positions[state.alive[positions]]
            storage = faiss.downcast_index(_find_hnsw(state.index).storage)
            stored = faiss.rev_swig_ptr(storage.get_xb(), storage.ntotal * storage.d).reshape(storage.ntotal, storage.d)
            stored[positions] = 0.0  # the deleted vector leaves memory (and any later save) now
            state.alive[positions] = False
            state.selector = None
            removed = len(positions)
    state.live -= removed
    return removed


def _selector(state: _Owner):
    """An IDSelectorBitmap of the owner's live positions (cached until the next add or delete)."""
    if state.selector is None:
        bits = np.packbits(state.alive, bitorder="little")
        state.selector = faiss.IDSelectorBitmap(len(state.alive), faiss.swig_ptr(bits))
        state.extra["selector_bits"] = bits  # the selector reads this buffer: keep it alive
    return state.selector


def _live_labels(state: _Owner) -> np.ndarray:
    """The owner's live labels, ascending (= insertion order)."""
    if state.positional:
        return state.labels if state.alive is None else state.labels[state.alive]
    invlists = faiss.extract_index_ivf(state.index).invlists
    parts = [
        faiss.rev_swig_ptr(invlists.get_ids(i), invlists.list_size(i)).copy()
        for i in range(invlists.nlist)
        if invlists.list_size(i)
    ]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, "int64")


def _live_contents(state: _Owner) -> tuple[np.ndarray, np.ndarray]:
    """(live labels ascending [n], their vectors [n, d], decoded from the index) as copies."""
    labels = _live_labels(state)
    if state.positional:
        vectors = state.index.reconstruct_n(0, state.index.ntotal)
        return labels, vectors if state.alive is None else vectors[state.alive]
    return labels, state.index.reconstruct_batch(labels)


def _index_bytes(state: _Owner) -> int:
    """Bytes the owner's index stores: codes, ids, graph links, centroids, direct map, labels."""
    index, total = state.index, 0
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        stored = ivf.invlists.compute_ntotal()
        total += stored * (ivf.code_size + 8)  # codes and ids in the inverted lists
        total += ivf.nlist * ivf.d * 4  # centroids
        total += stored * 32  # hash-table direct map: ~32 bytes per entry (an estimate: key, value, link, bucket)
        return total
    hnsw = _find_hnsw(index)
    if hnsw is not None:
        total += hnsw.ntotal * hnsw.d * 4 + hnsw.hnsw.neighbors.size() * 4 + hnsw.hnsw.offsets.size() * 8
        total += hnsw.hnsw.levels.size() * 4
    else:
        total += index.sa_code_size() * index.ntotal if hasattr(index, "sa_code_size") else index.ntotal * index.d * 4
    total += state.labels.nbytes if state.labels is not None else 0
    total += state.alive.nbytes if state.alive is not None else 0
    return int(total)
