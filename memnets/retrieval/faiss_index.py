"""One owner's FAISS index: building, training, adding, removing and searching it, without locks.

These functions work on one :class:`OwnerIndex` (the index and its label bookkeeping) and never
take a lock: :class:`~memnets.retrieval.faiss_retriever.FaissRetriever` holds the ids, the lock,
the journal of writes made during a rebuild, the background upkeep and the files, and calls these
under its lock (or on a private copy, while rebuilding).

The kinds (which one an owner gets is the retriever's choice):

- ``flat`` (exact, ``IndexFlatIP``); a deletion removes the vector.
- ``ivf``: an inverted file (``IndexIVFFlat``) of about 4*sqrt(n) lists (spherical k-means on 32
  vectors per list, an HNSW graph over the centroids from 1,024 lists). Its float codes are the one
  copy of the vectors: exact scores, exact reconstruction for rebuilds. A deletion removes the ids
  from their inverted lists directly (a hash-table direct map makes that O(deleted)). An add that
  mostly fits none of its lists gets new lists of its own (:mod:`.ivf_growth`).
- ``ivf-sq8``: the same with 8-bit scalar-quantised codes, a quarter of the memory; scores are
  approximate (errors ~1e-3), reconstruction and so a retrain are lossy.
- ``hnsw`` (``IndexHNSWFlat``): HNSW cannot remove a node, so a deletion zeroes the vector and marks
  a tombstone; searches skip tombstones through an ``IDSelectorBitmap`` in the search parameters,
  and an exact scan of the live vectors answers any row still short of k.
- a FAISS factory string, trained on a sample of the owner's vectors.

With a GPU (faiss-gpu), flat and IVF owners are searched on a GPU copy of the CPU index (the CPU
index stays the source of truth; the copy is remade, not retrained, after a deletion).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import faiss
import numpy as np

from memnets.retrieval import ivf_calibration, ivf_growth
from memnets.retrieval.ivf_growth import lists_in_use

NAMED_KINDS = ("flat", "hnsw", "ivf", "ivf-sq8")
NAMED_IVF_KINDS = ("ivf", "ivf-sq8")  # the named kinds with a self-check and spare lists
IVF_TRAIN_PER_LIST = 32  # k-means of the IVF lists runs on a sample of this many vectors per list
IVF_TRAIN_SAMPLE = 65_536  # sample size for factory-string indexes (PQ codebooks and the like)
IVF_TRAIN_ITERATIONS = 5  # spherical k-means iterations: at 1M (2,000 lists then), 5 instead of 10 halve the
# training (77 -> 42 s under load ~7) at the same recall (0.988 at nprobe 16 on 300 queries); FAISS's default is 25
IVF_LISTS_PER_SQRT = 4  # lists per sqrt(n) (FAISS's advice: 4 to 16; see ivf_lists())
IVF_MIN_POINTS_PER_LIST = 39  # FAISS's advice: at least this many vectors per list
IVF_HNSW_QUANTIZER_FROM = 1024  # from this many lists, an HNSW graph over the centroids assigns vectors
HNSW_QUANTIZER_ADD_EF = 32  # its beam when adding: 2.2x faster than ef 64 (and than BLAS over 2,000
# centroids), the same list for 99.9% of vectors (measured on bench vectors, 2,000 centroids)
HNSW_QUANTIZER_EF = 64  # its beam when searching: max(this, 2 * nprobe)
STRAINED_GROWTH = 1.25  # an IVF grown by this share since training is retrained when its self-check needs
STRAINED_NPROBE = 2  # this many times the default nprobe (see retrain_reason)
MAX_SCAN_FACTOR = 8  # an IVF search scans at most this many times the vectors that a search at the default
# nprobe scans in an index freshly built at the owner's size (see _size_nprobe)
GPU_MAX_K = 2048  # FAISS GPU kernels select at most this many neighbours
REPLAY_ADD_BATCH = 65_536  # a rebuild replays journalled adds in runs of up to this many vectors


def ivf_lists(n: int) -> int:
    """IVF list count for n vectors: about ``IVF_LISTS_PER_SQRT`` * sqrt(n) (4,000 at 1M), with >= 39
    vectors per list.

    Finer lists scan fewer vectors per probe, which pays most where the self-check asks for many
    probes (lists trained before the owner grew: on loose Gaussian clusters grown to 300k in adds of
    100,000, 90 probes and 2.23 ms with 2*sqrt(n) lists, 19 probes and 0.37 ms with 4*sqrt(n)). Built
    at once at 300k (bench.experiments.ivf_lists), 16 probes find recall@10 0.979 at 0.34 ms (2*sqrt(n))
    and 0.999 at 0.23 ms (4*sqrt(n)) on loose clusters, 0.986 at 0.32 ms and 0.977 at 0.17 ms on
    LoCoMo's MiniLM vectors. k-means costs its sample (``IVF_TRAIN_PER_LIST`` per list) x lists per
    iteration, 4x the 2*sqrt(n) layout's: the 300k build takes 6.5-9.9 s on 2 cores (4.0-5.6 s before)."""
    return max(1, min(int(IVF_LISTS_PER_SQRT * math.sqrt(n)), n // IVF_MIN_POINTS_PER_LIST))


def default_nprobe(nlist: int) -> int:
    """Lists visited per query when no nprobe is given: 16, or nlist/128 for more than 2,048 lists.

    Chosen on realistic MiniLM vectors (bench/search.py): recall@10 0.976-0.980 against exact search
    for IVF-Flat at 10k, 100k and 1M memories (200, 632, 2,000 lists, when lists were 2*sqrt(n)),
    0.956-0.972 for IVF-SQ8. With 4*sqrt(n) lists, nlist/128 probes at 1M scan as many vectors as 16
    did then (31 lists of ~250)."""
    return min(nlist, max(16, nlist // 128))


def owner_nprobe(state: OwnerIndex) -> int:
    """Lists an IVF owner's searches visit unless told: its self-check's, else ``default_nprobe``."""
    return state.nprobe or default_nprobe(lists_in_use(faiss.extract_index_ivf(state.index)))


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
class OwnerIndex:
    """One owner's index and its bookkeeping (``journal`` is the retriever's, for its rebuilds).

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
    calibration: ivf_calibration.Calibration | None = None  # IVF kinds: the self-check that sizes nprobe
    nprobe: int | None = None  # IVF kinds: lists a search visits unless told (from the self-check)
    fit_floor: float | None = None  # named IVF kinds: below this best-centroid score a vector fits no list
    quantizer_lock: threading.Lock = field(default_factory=threading.Lock)  # an add's lock-free prepare
    # reads the coarse quantizer under it, and an add that grows lists changes the quantizer under it
    extra: dict = field(default_factory=dict)

    @property
    def positional(self) -> bool:
        return self.labels is not None

    @property
    def tombstones(self) -> int:
        return 0 if self.alive is None else int(self.index.ntotal - self.live)


class BuildStopped(Exception):
    """:func:`build_index` stopped between its steps because its ``stop`` event was set."""


def build_index(
    kind: str,
    vectors: np.ndarray,
    labels: np.ndarray,
    *,
    dim: int,
    hnsw_m: int,
    ef_construction: int,
    stop: threading.Event | None = None,
) -> OwnerIndex:
    """A new owner index of the given kind holding (vectors, labels); trains IVF/PQ kinds.

    Raises ValueError when FAISS cannot train the kind on these vectors (too few for its lists), and
    :class:`BuildStopped` when ``stop`` is set at the end of a step (the training, the add): a closed
    retriever's rebuild then waits only for the FAISS call in progress, not for the whole build."""
    n, metric = vectors.shape[0], faiss.METRIC_INNER_PRODUCT
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, metric)
        index.hnsw.efConstruction = ef_construction
    elif kind in NAMED_IVF_KINDS:
        nlist = ivf_lists(n)
        quantizer = "_HNSW32" if nlist >= IVF_HNSW_QUANTIZER_FROM else ""
        index = faiss.index_factory(dim, f"IVF{nlist}{quantizer},{'Flat' if kind == 'ivf' else 'SQ8'}", metric)
        # spherical k-means: unit centroids, so that the L2 assignment used while training an HNSW
        # quantizer agrees with the inner product used to search it
        index.cp.niter, index.cp.spherical, index.cp.min_points_per_centroid = IVF_TRAIN_ITERATIONS, True, 1
    else:
        index = faiss.index_factory(dim, kind, metric)
        hnsw = find_hnsw(index)
        if hnsw is not None:
            hnsw.hnsw.efConstruction = ef_construction
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
        _check_stop(stop)
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        if kind in NAMED_IVF_KINDS:
            ivf_growth.reserve_spare_lists(ivf, ivf_growth.SPARE_LISTS_PER_LIST * ivf.nlist)
        ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # O(1) removal and reconstruction by id
        quantizer_hnsw = find_hnsw(ivf.quantizer)
        if quantizer_hnsw is not None:
            quantizer_hnsw.hnsw.efSearch = HNSW_QUANTIZER_ADD_EF
        state = OwnerIndex(kind=kind, index=index)
    elif find_hnsw(index) is not None:
        state = OwnerIndex(kind=kind, index=index, labels=np.zeros(0, "int64"), alive=np.zeros(0, bool))
    else:
        state = OwnerIndex(kind=kind, index=index, labels=np.zeros(0, "int64"))
    append(state, vectors, labels)
    _check_stop(stop)
    state.trained_size = n
    calibrate(state)
    return state


def _check_stop(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise BuildStopped


def calibrate(state: OwnerIndex) -> None:
    """Start the self-check of a named IVF owner (built or loaded) and size its nprobe from it, and
    take its fit floor (:mod:`.ivf_growth`) from a sample of its vectors; other kinds keep neither
    (a factory string's codes, PQ and the like, make the list rank no recall bound)."""
    if state.kind not in NAMED_IVF_KINDS:
        return
    labels = live_labels(state)
    if not len(labels):
        return
    ivf = faiss.extract_index_ivf(state.index)
    state.calibration = ivf_calibration.start(
        ivf, labels, state.index.reconstruct_batch(labels[ivf_calibration.pick(len(labels))])
    )
    sample = np.random.default_rng(len(labels)).choice(
        len(labels), min(ivf_growth.FIT_SAMPLE, len(labels)), replace=False
    )
    state.fit_floor = ivf_growth.fit_floor(ivf, state.index.reconstruct_batch(labels[np.sort(sample)]))
    _size_nprobe(state)


def retrain_reason(state: OwnerIndex, retrain_growth: float) -> str | None:
    """Why an IVF owner's lists should be retrained now, or None: it holds ``retrain_growth`` times
    the vectors it was trained on; or it has grown by ``STRAINED_GROWTH`` since and its self-check
    needs ``STRAINED_NPROBE`` x the default nprobe (lists trained on other data, as when later adds
    come from new clusters: trained on all of it, the lists need fewer probes and so less time)."""
    ivf = faiss.try_extract_index_ivf(state.index)
    if ivf is None:
        return None
    if state.live > retrain_growth * max(state.trained_size, 1):
        return f"{state.live} vectors, trained at {state.trained_size}"
    if state.nprobe and state.live > STRAINED_GROWTH * state.trained_size:
        if state.nprobe >= STRAINED_NPROBE * default_nprobe(lists_in_use(ivf)):
            return f"{state.live} vectors, trained at {state.trained_size}; its self-check needs nprobe {state.nprobe}"
    return None


def _size_nprobe(state: OwnerIndex) -> None:
    """nprobe from the self-check: the smallest reaching its target recall, never below the default,
    and never scanning more than ``MAX_SCAN_FACTOR`` x the vectors that the default nprobe scans in an
    index built afresh at the owner's size. A bound in vectors, not in lists: lists trained at 100k
    hold 3x the vectors at 300k, where 8x the default nprobe cost 2.85 ms a search (loose clusters at
    noise 1.0, 128 probes of 237 vectors: docs/benchmarks.md)."""
    nlist = lists_in_use(faiss.extract_index_ivf(state.index))
    floor, fresh = default_nprobe(nlist), ivf_lists(max(state.live, 1))
    affordable = int(MAX_SCAN_FACTOR * default_nprobe(fresh) * nlist / fresh)  # probes of this index's lists
    state.nprobe = ivf_calibration.needed_nprobe(state.calibration, floor, min(nlist, max(floor, affordable)))


def search_index(
    state: OwnerIndex, vectors: np.ndarray, k: int, *, nprobe: int | None, ef_search: int, use_gpu: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, labels) [B, k] of the owner's k best vectors; every row full (an approximate index's
    short rows answered exactly). ``nprobe`` None: ``default_nprobe`` of the index's lists."""
    index, params = state.index, None
    ivf, hnsw = index_parts(state)
    if use_gpu and k <= GPU_MAX_K and hnsw is None:
        return _search_gpu(state, vectors, k, nprobe)
    if ivf is not None:
        nprobe = nprobe or owner_nprobe(state)
        params = ivf_params(ivf, nprobe) if state.tombstones else _kept_ivf_params(state, ivf, nprobe)
    elif hnsw is not None:
        # with tombstones, a wider beam keeps k live results within reach
        ef = max(int(ef_search), k * (2 if state.tombstones else 1))
        params = faiss.SearchParametersHNSW(efSearch=ef)
    if state.tombstones:
        if params is None:
            params = faiss.SearchParameters()
        params.sel = live_selector(state)
    scores, found = index.search(vectors, k, params=params)
    short = (found < 0).any(axis=1)
    if short.any():  # the visited lists / graph held fewer than k live vectors: scan them all
        scores[short], found[short] = exhaustive_search(state, vectors[short], k)
    if state.positional:
        found = state.labels[found]
    return scores, found


def index_parts(state: OwnerIndex) -> tuple:
    """(the IVF index inside the owner's index, or None; the HNSW index it is, or None), looked up once:
    an OwnerIndex keeps its index for life, and the SWIG down-casts of each search cost a third as
    much as a batch-1 search of 100k vectors itself, right after an encoder's run (cold caches)."""
    parts = state.extra.get("parts")
    if parts is None:
        parts = state.extra["parts"] = (faiss.try_extract_index_ivf(state.index), find_hnsw(state.index))
    return parts


def _kept_ivf_params(state: OwnerIndex, ivf, nprobe: int):
    """:func:`ivf_params` for ``nprobe``, kept for the owner's next search with the same nprobe (a search
    only reads them; one with tombstones, which sets a selector in them, makes its own)."""
    kept = state.extra.get("ivf_params")
    if kept is None or kept[0] != nprobe:
        kept = state.extra["ivf_params"] = (nprobe, ivf_params(ivf, nprobe))
    return kept[1]


def exhaustive_search(state: OwnerIndex, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Search every live vector of the owner (exact for flat codes): the fallback for short rows."""
    ivf = faiss.try_extract_index_ivf(state.index)
    if ivf is not None:
        return state.index.search(vectors, k, params=ivf_params(ivf, ivf.nlist))
    hnsw = find_hnsw(state.index)
    storage = faiss.downcast_index(hnsw.storage) if hnsw is not None else state.index
    params = faiss.SearchParameters(sel=live_selector(state)) if state.tombstones else None
    return storage.search(vectors, k, params=params)


def _search_gpu(state: OwnerIndex, vectors: np.ndarray, k: int, nprobe: int | None):
    """Search the owner's GPU copy (made from the CPU index when missing or stale)."""
    if state.gpu is None or state.gpu_stale:  # a copy of the CPU index, nothing retrained
        if faiss.try_extract_index_ivf(state.index) is not None:
            cpu = ivf_growth.without_spare_lists(state.index)
            state.gpu, state.extra["gpu_labels"] = faiss.index_cpu_to_gpu(_gpu_resources(), 0, cpu), None
        else:
            labels, data = live_contents(state)
            state.gpu = faiss.GpuIndexFlatIP(_gpu_resources(), state.index.d)
            state.gpu.add(data)
            state.extra["gpu_labels"] = labels
        state.gpu_stale = False
    ivf = faiss.try_extract_index_ivf(state.gpu)
    if ivf is not None:
        ivf.nprobe = min(int(nprobe or owner_nprobe(state)), ivf.nlist)
    scores, found = state.gpu.search(vectors, k)
    positions = state.extra.get("gpu_labels")
    if positions is not None:
        found = np.where(found >= 0, positions[np.clip(found, 0, None)], -1)
    short = (found < 0).any(axis=1)
    if short.any():
        exhaustive_scores, exhaustive = exhaustive_search(state, vectors[short], k)
        scores[short] = exhaustive_scores
        found[short] = state.labels[exhaustive] if state.positional else exhaustive
    return scores, found


def extend_gpu(state: OwnerIndex, vectors: np.ndarray, labels: np.ndarray) -> None:
    """Append new vectors to a current GPU copy (a stale one is remade at the next search)."""
    if state.gpu is None or state.gpu_stale:
        return
    positions = state.extra.get("gpu_labels")
    if positions is None:
        state.gpu.add_with_ids(vectors, labels)
    else:
        state.gpu.add(vectors)
        state.extra["gpu_labels"] = np.concatenate([positions, labels])


def find_hnsw(index):
    """The HNSW index inside an index, if any (to set efSearch and read its storage), else None."""
    index = faiss.downcast_index(index)
    return index if isinstance(index, faiss.IndexHNSW) else None


def ivf_params(ivf, nprobe: int):
    """SearchParametersIVF visiting nprobe lists; with an HNSW quantizer, a beam wide enough to find them."""
    params = faiss.SearchParametersIVF(nprobe=min(int(nprobe), ivf.nlist))
    if find_hnsw(ivf.quantizer) is not None:
        quantizer_params = faiss.SearchParametersHNSW(efSearch=max(HNSW_QUANTIZER_EF, 2 * params.nprobe))
        params.quantizer_params = quantizer_params
        params.referenced_objects = [quantizer_params]  # Python owns them: alive as long as params
    return params


@dataclass(frozen=True)
class PreparedAdd:
    """What an add to an IVF owner works out before the retriever takes its lock (:func:`prepare_add`),
    so that a large add holds up searches only while its vectors enter the lists: the IVF list of
    each vector (with any new lists, :mod:`.ivf_growth`) and the self-check's neighbours among them.
    Used only on the index it was made for, while its quantizer is as it was then."""

    index: object  # the owner's index when it was prepared (a rebuild meanwhile: not used)
    growth: ivf_growth.Growth
    among: ivf_calibration.Among | None


def prepare_add(state: OwnerIndex, vectors: np.ndarray) -> PreparedAdd | None:
    """For an owner whose index is an IVF itself (not wrapped in a transform), else None. Reads the
    coarse quantizer under the owner's quantizer lock and the self-check's queries, which an add
    replaces but never edits: safe without the retriever's lock."""
    index = faiss.downcast_index(state.index)
    if state.positional or not isinstance(index, faiss.IndexIVF):
        return None
    calibration = state.calibration
    growth = ivf_growth.plan(
        index,
        vectors,
        state.fit_floor,
        state.quantizer_lock,
        per_list=state.live / max(lists_in_use(index), 1),
        min_points=IVF_MIN_POINTS_PER_LIST,
    )
    among = None if calibration is None else ivf_calibration.neighbours_among(calibration, vectors)
    return PreparedAdd(index=state.index, growth=growth, among=among)


def append(state: OwnerIndex, vectors: np.ndarray, labels: np.ndarray, prepared: PreparedAdd | None = None) -> None:
    """Add vectors under their labels (ascending, above every label the owner holds); ``prepared``:
    :func:`prepare_add` of these vectors on this owner's index (prepared here when missing, or when
    the index or its lists changed since)."""
    if state.positional:
        state.index.add(vectors)
        state.labels = np.concatenate([state.labels, labels])
        if state.alive is not None:
            state.alive = np.concatenate([state.alive, np.ones(len(labels), bool)])
            state.selector = None
    elif (prepared := _current(state, vectors, prepared)) is not None:
        index, growth = faiss.downcast_index(state.index), prepared.growth
        if growth.centroids is not None:
            ivf_growth.grow(index, growth, state.quantizer_lock)
            if state.calibration is not None:
                ivf_calibration.add_lists(state.calibration, growth.centroids)
        index.add_core(len(labels), faiss.swig_ptr(vectors), faiss.swig_ptr(labels), faiss.swig_ptr(growth.lists))
    else:
        state.index.add_with_ids(vectors, labels)
    state.live += len(labels)
    if state.calibration is not None:
        among = None if prepared is None else prepared.among
        ivf_calibration.absorb(state.calibration, faiss.extract_index_ivf(state.index), vectors, labels, among)
        _size_nprobe(state)


def replay(state: OwnerIndex, entries: list) -> int:
    """Apply journalled writes (("add", labels, vectors) / ("remove", labels, None)), in order, to a
    rebuilt index; returns how many vectors they touched. Runs of adds are appended together, up to
    ``REPLAY_ADD_BATCH`` vectors: one assignment, one self-check update and any new lists planned
    for the run, not for each of many small adds."""
    count, run, in_run = 0, [], 0
    for position, (op, labels, vectors) in enumerate(entries):
        if op == "add":
            run.append((labels, vectors))
            in_run += len(labels)
            last = position + 1 == len(entries) or entries[position + 1][0] != "add"
            if last or in_run >= REPLAY_ADD_BATCH:
                append(state, np.concatenate([v for _, v in run]), np.concatenate([b for b, _ in run]))
                run, in_run = [], 0
        else:
            delete(state, labels)
        count += len(labels)
    return count


def _current(state: OwnerIndex, vectors: np.ndarray, prepared: PreparedAdd | None) -> PreparedAdd | None:
    """``prepared`` if it was made for the owner's index as it is now, else a new :func:`prepare_add`."""
    if prepared is not None and prepared.index is state.index:
        if prepared.growth.first == lists_in_use(faiss.extract_index_ivf(state.index)):
            return prepared
    return prepare_add(state, vectors)


def delete(state: OwnerIndex, labels: np.ndarray) -> int:
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
            storage = faiss.downcast_index(find_hnsw(state.index).storage)
            stored = faiss.rev_swig_ptr(storage.get_xb(), storage.ntotal * storage.d).reshape(storage.ntotal, storage.d)
            stored[positions] = 0.0  # the deleted vector leaves memory (and any later save) now
            state.alive[positions] = False
            state.selector = None
            removed = len(positions)
    state.live -= removed
    if state.calibration is not None:
        ivf_calibration.forget(state.calibration, labels)
        _size_nprobe(state)
    return removed


def live_selector(state: OwnerIndex):
    """An IDSelectorBitmap of the owner's live positions (cached until the next add or delete)."""
    if state.selector is None:
        bits = np.packbits(state.alive, bitorder="little")
        state.selector = faiss.IDSelectorBitmap(len(state.alive), faiss.swig_ptr(bits))
        state.extra["selector_bits"] = bits  # the selector reads this buffer: keep it alive
    return state.selector


def live_labels(state: OwnerIndex) -> np.ndarray:
    """The owner's live labels, ascending (= insertion order)."""
    if state.positional:
        return state.labels if state.alive is None else state.labels[state.alive]
    ivf = faiss.extract_index_ivf(state.index)
    invlists = ivf.invlists
    parts = [
        faiss.rev_swig_ptr(invlists.get_ids(i), invlists.list_size(i)).copy()
        for i in range(lists_in_use(ivf))
        if invlists.list_size(i)
    ]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, "int64")


def live_contents(state: OwnerIndex) -> tuple[np.ndarray, np.ndarray]:
    """(live labels ascending [n], their vectors [n, d], decoded from the index) as copies."""
    labels = live_labels(state)
    if state.positional:
        vectors = state.index.reconstruct_n(0, state.index.ntotal)
        return labels, vectors if state.alive is None else vectors[state.alive]
    return labels, state.index.reconstruct_batch(labels)


def copy_lists(state: OwnerIndex, start: int, max_vectors: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(next list, labels, vectors) of an IVF owner's whole lists from ``start`` on, as copies, up to
    about ``max_vectors`` vectors: a rebuild copies a large index in such pieces, taking the lock
    for one piece at a time, so that no search waits for a copy of the whole index."""
    ivf = faiss.extract_index_ivf(state.index)
    invlists, stop, count, parts = ivf.invlists, start, 0, []
    while stop < lists_in_use(ivf) and count < max_vectors:
        size = invlists.list_size(stop)
        if size:
            parts.append(faiss.rev_swig_ptr(invlists.get_ids(stop), size).copy())
            count += size
        stop += 1
    if not parts:
        return stop, np.zeros(0, "int64"), np.zeros((0, ivf.d), "float32")
    labels = np.concatenate(parts)
    return stop, labels, state.index.reconstruct_batch(labels)


def index_bytes(state: OwnerIndex) -> int:
    """Bytes the owner's index stores: codes, ids, graph links, centroids, direct map, labels."""
    index, total = state.index, 0
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        stored = ivf.invlists.compute_ntotal()
        total += stored * (ivf.code_size + 8)  # codes and ids in the inverted lists
        total += lists_in_use(ivf) * ivf.d * 4  # centroids
        total += stored * 32  # hash-table direct map: ~32 bytes per entry (an estimate: key, value, link, bucket)
        return total
    hnsw = find_hnsw(index)
    if hnsw is not None:
        total += hnsw.ntotal * hnsw.d * 4 + hnsw.hnsw.neighbors.size() * 4 + hnsw.hnsw.offsets.size() * 8
        total += hnsw.hnsw.levels.size() * 4
    else:
        total += index.sa_code_size() * index.ntotal if hasattr(index, "sa_code_size") else index.ntotal * index.d * 4
    total += state.labels.nbytes if state.labels is not None else 0
    total += state.alive.nbytes if state.alive is not None else 0
    return int(total)
