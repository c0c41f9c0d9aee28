"""A FAISS vector index over memories, partitioned by owner, that forgets without rebuilding.

Every owner (agent or user) gets its own index, so a search ranks only that owner's memories:
filtering happens before ranking, never by fetching extra neighbours and dropping foreign ones.

Each owner holds ONE CPU index, and it is the only copy of the vectors (they can be read back from
it, exactly for the flat, IVF-Flat and HNSW kinds); which kind follows the owner's size: ``flat``
(exact) below ``exact_below`` memories, above it the retriever's ``index`` (``"auto"``: IVF-Flat,
for 50k to 10M memories on CPU and GPU; ``"hnsw"``: fast searches but a slow build, so chosen
explicitly where its build time is acceptable). The kinds themselves, and every operation on one
owner's index (build, train, add, remove, search parameters), are lock-free functions in
:mod:`memnets.retrieval.faiss_index`; this module holds the string ids, the lock, the journal of
writes made during a rebuild, the background upkeep and its end (``close``); its files are
:mod:`memnets.retrieval.faiss_files`'s.

Upkeep never runs in a search or a deletion: when an owner's tombstones pass ``compact_at`` of its
index, when it grows past ``exact_below`` (flat -> approximate), or when it grows
``retrain_growth`` (2) times past the size its IVF was trained at, a background thread copies the
live vectors (an IVF owner's a piece at a time, taking the lock per piece), builds the new index on
all cores but one (on 2 cores: one thread, so that searches keep a core), replays the adds and
removes journalled meanwhile and swaps it in atomically, with the lock held only for the last short
stretch of the replay (``background=False`` runs all of it at the end of the add or remove that
calls for it instead). ``compact()`` does the same on demand, ``wait()`` waits for upkeep in flight.
``close()`` stops the upkeep and waits for it; an ``atexit`` hook closes the retrievers nobody closed:
an upkeep thread inside FAISS at exit (Python stops it only when it next needs the GIL) runs on
while FAISS and OpenBLAS are unloaded under it, and the process dies with SIGSEGV.
A new owner's first batch builds its index synchronously. An IVF owner's nprobe follows a
self-check on its own vectors that every add keeps current (:mod:`.ivf_calibration`), and an add
that mostly fits none of its lists gets lists of its own in the add (:mod:`.ivf_growth`).

With a GPU (faiss-gpu), flat and IVF owners are searched on a GPU copy of the CPU index; HNSW owners on the CPU.

Vectors are compared by inner product; pass L2-normalised vectors (as MemoryEncoder returns) to get
cosine similarity. Memory ids are strings, unique across owners, mapped to int64 labels internally.
The retriever is thread-safe: one re-entrant lock guards every call (an add of many vectors to an
IVF owner finds their lists before taking it, and only inserts them under it).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import faiss
import numpy as np

from memnets.retrieval import faiss_files
from memnets.retrieval.faiss_index import (
    NAMED_KINDS,
    BuildStopped,
    OwnerIndex,
    append,
    build_index,
    copy_lists,
    delete,
    extend_gpu,
    gpu_available,
    index_bytes,
    live_contents,
    live_labels,
    omp_threads,
    owner_nprobe,
    prepare_add,
    replay,
    retrain_reason,
    search_index,
)
from memnets.retrieval.ivf_growth import lists_in_use

logger = logging.getLogger(__name__)

INDEX_KINDS = (*NAMED_KINDS, "auto")
# index="auto": owners below this size are searched exactly (flat), larger ones with IVF-Flat.
AUTO_EXACT_BELOW = 50_000
# a named approximate index ("hnsw", "ivf", a factory string) still searches tiny owners exactly.
APPROX_EXACT_BELOW = 1_000
SINGLE_THREAD_MAX_BATCH = 1  # batches up to this size are searched on one OpenMP thread (python -m bench.search)
# a rebuild replays the writes journalled during its build without the lock until at most this many
# vectors are left (or after REPLAY_PASSES passes), then those under the lock, and swaps
REPLAY_UNDER_LOCK = 2_048
REPLAY_PASSES = 4
# background rebuilds (k-means, adds) leave this many of FAISS's OpenMP threads to searches (the
# setting is per calling thread): on 2 cores the rebuild runs on one, the searches keep the other
UPKEEP_SPARE_THREADS = 1
ASSIGN_UNLOCKED_FROM = 1_024  # an add of this many vectors or more to an IVF owner finds their lists unlocked
COPY_PIECE = 8_192  # a rebuild copies an IVF owner's vectors this many at a time under the lock


class RetrieverClosed(RuntimeError):
    """A call on a :class:`FaissRetriever` after its ``close()``."""


# retrievers not closed, or closed with upkeep left running; a running upkeep thread holds its retriever
_LIVE: weakref.WeakSet[FaissRetriever] = weakref.WeakSet()


@atexit.register
def _close_open_retrievers() -> None:
    """At interpreter exit, close the retrievers nobody closed and wait for all upkeep, while its threads
    can still run: after ``atexit`` Python finalises, and then the process unloads FAISS and OpenBLAS
    under any upkeep thread still inside them."""
    for retriever in list(_LIVE):
        retriever.close()


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
        nprobe: IVF lists visited per query; None: each owner's own, sized by its self-check.
        compact_at: rebuild an owner's tombstoned index (HNSW) once tombstones pass this share of it.
        retrain_growth: retrain an owner's IVF once it holds this many times the vectors it was
            trained on, or sooner when its self-check asks for more lists than its lists were trained
            for (``retrain_reason``); and move a flat owner to its approximate kind past exact_below.
        background: run compaction and retraining in a background thread (True), or synchronously
            at the end of the add/remove that calls for them (False: deterministic, for scripts).

    ``close()`` (or ``with FaissRetriever(...) as retriever:``) stops its background upkeep and frees
    the indexes; the retrievers left open are closed at interpreter exit.
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
        retrain_growth: float = 2.0,
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
        self._owners: dict[str, OwnerIndex] = {}
        self._int_of: dict[str, int] = {}  # memory id -> int64 label
        self._str_of: dict[int, str] = {}  # int64 label -> memory id
        self._owner_of: dict[str, str] = {}  # memory id -> owner
        self._next_label = 0
        self._closed = threading.Event()  # set by close(); upkeep stops at its next step
        self._unlocked = 0  # calls running FAISS outside the lock (an add's preparation), for close()
        self._settled = threading.Condition(self._lock)  # notified when _unlocked drops
        _LIVE.add(self)

    # ------------------------------------------------------------------ lifecycle
    def close(self, timeout: float | None = None) -> bool:
        """Stop the background upkeep, wait for it and for calls in flight, and free the indexes; True
        when nothing of this retriever runs any more. Safe to call again (it waits again).

        A rebuild in flight is abandoned at its next step (a piece of its copy, its training, its add,
        a replay pass), never swapped in; the FAISS call running then finishes first (at most a
        retrain's k-means: seconds at 300k vectors). Later calls but ``wait()`` and ``close()``
        raise :class:`RetrieverClosed`. ``timeout``: seconds to wait at most (None: until done; 0:
        only tell the upkeep to stop); the exit waits for what is still running then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._closed.set()
            # a rebuild sees its owner gone and drops its result; an index in use elsewhere (an
            # upkeep's copy, an add's preparation) lives on until that reference goes
            for table in (self._owners, self._int_of, self._str_of, self._owner_of):
                table.clear()
        done = self.wait(timeout)
        with self._lock:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done = self._settled.wait_for(lambda: not self._unlocked, left) and done
        if done:
            _LIVE.discard(self)
        return done

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed.is_set()

    def __enter__(self) -> FaissRetriever:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _require_open(self, where: str) -> None:
        if self._closed.is_set():
            raise RetrieverClosed(f"FaissRetriever.{where}: the retriever is closed; make or load a new one")

    # ------------------------------------------------------------------ inspection
    def __len__(self) -> int:
        self._require_open("__len__")
        return len(self._int_of)

    def __contains__(self, memory_id: object) -> bool:
        self._require_open("__contains__")
        return memory_id in self._int_of

    @property
    def owners(self) -> list[str]:
        """Owners that hold at least one vector."""
        with self._lock:
            self._require_open("owners")
            return [owner for owner, state in self._owners.items() if state.live]

    def count(self, owner: str) -> int:
        """How many vectors the owner holds (0 for an unknown owner)."""
        self._require_open("count")
        state = self._owners.get(owner)
        return state.live if state else 0

    def ids(self, owner: str) -> list[str]:
        """The owner's memory ids in insertion order (after removals)."""
        with self._lock:
            self._require_open("ids")
            state = self._owners.get(owner)
            if state is None:
                return []
            return [self._str_of[label] for label in live_labels(state).tolist()]

    def kind(self, owner: str) -> str | None:
        """The kind of the owner's index now ("flat", "ivf", "hnsw", ... or None for no owner)."""
        self._require_open("kind")
        state = self._owners.get(owner)
        return state.kind if state else None

    def stats(self, owner: str) -> dict:
        """The owner's index: kind, live vectors, tombstones, trained size, IVF lists and bytes held.

        ``bytes`` counts what the index stores (vectors or codes, ids, graph links, IVF centroids
        and direct map), not allocator overhead; ``bytes / live`` is the memory per memory."""
        with self._lock:
            self._require_open("stats")
            state = self._owners.get(owner)
            if state is None:
                return {"kind": None, "live": 0, "tombstones": 0, "bytes": 0}
            out = {
                "kind": state.kind,
                "live": state.live,
                "tombstones": state.tombstones,
                "trained_size": state.trained_size,
                "bytes": index_bytes(state),
            }
            ivf = faiss.try_extract_index_ivf(state.index)
            if ivf is not None:
                out["nlist"] = lists_in_use(ivf)
                out["nprobe"] = self.nprobe or owner_nprobe(state)
            return out

    # ------------------------------------------------------------------ writes
    def add(self, ids: Sequence[str], vectors: np.ndarray, owner: str) -> None:
        """Add vectors [N, dim] under their memory ids for one owner.

        A new owner's index is built from this batch (flat, or trained here when the batch already
        passes ``exact_below``); later batches are appended to it in place (to an IVF, a batch of
        ``ASSIGN_UNLOCKED_FROM`` or more is assigned to its lists before the lock is taken).
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
        prepared = None  # a large batch for an IVF owner: its lists and self-check part found without the lock
        if len(ids) >= ASSIGN_UNLOCKED_FROM:
            with self._lock:
                self._require_open("add")
                assigned = self._owners.get(owner)
                self._unlocked += assigned is not None
            if assigned is not None:
                try:
                    prepared = prepare_add(assigned, vectors)
                finally:
                    with self._lock:
                        self._unlocked -= 1
                        self._settled.notify_all()
        with self._lock:
            self._require_open("add")
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
                append(state, vectors, labels, prepared)  # ignored if the owner's index was swapped meanwhile
                if state.journal is not None:
                    state.journal.append(("add", labels, vectors.copy()))  # the caller may reuse its array
                extend_gpu(state, vectors, labels)
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
            self._require_open("remove")
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
                removed += delete(state, labels)
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
            self._require_open("search")
            state = self._owners.get(owner)
            if state is None or state.live == 0 or n_queries == 0:
                return [[] for _ in range(n_queries)], np.zeros((n_queries, 0), dtype="float32")
            k = min(int(k), state.live)
            if n_queries <= SINGLE_THREAD_MAX_BATCH:
                with omp_threads(1):
                    scores, labels = search_index(
                        state,
                        vectors,
                        k,
                        nprobe=nprobe or self.nprobe,
                        ef_search=ef_search or self.ef_search,
                        use_gpu=self.use_gpu,
                    )
            else:
                scores, labels = search_index(
                    state,
                    vectors,
                    k,
                    nprobe=nprobe or self.nprobe,
                    ef_search=ef_search or self.ef_search,
                    use_gpu=self.use_gpu,
                )
            ids = [[self._str_of[int(label)] for label in row] for row in labels]
        return ids, scores.astype("float32", copy=False)

    def _wanted_kind(self, n: int) -> str:
        """Which index an owner of n vectors should have."""
        if self.index == "flat" or n < self.exact_below:
            return "flat"
        if self.index == "auto":
            return "ivf"
        return self.index

    def _build(self, kind: str, vectors: np.ndarray, labels: np.ndarray) -> OwnerIndex:
        """A new owner index of the given kind with this retriever's HNSW settings (BuildStopped once closed)."""
        return build_index(
            kind,
            vectors,
            labels,
            dim=self.dim,
            hnsw_m=self.hnsw_m,
            ef_construction=self.ef_construction,
            stop=self._closed,
        )

    def _maybe_upkeep(self, owner: str, state: OwnerIndex) -> None:
        """Start a rebuild when tombstones, growth or the owner's size call for one (never once closed)."""
        if self._closed.is_set() or owner in self._upkeep or state.journal is not None:
            return
        reason = None
        if state.tombstones and state.tombstones >= self.compact_at * state.index.ntotal:
            reason = f"{state.tombstones} tombstones of {state.index.ntotal}"
        elif self._wanted_kind(state.live) != state.kind and state.live >= self.exact_below:
            reason = f"{state.live} vectors: {state.kind} -> {self._wanted_kind(state.live)}"
        elif state.kind != "flat":
            reason = retrain_reason(state, self.retrain_growth)
        if reason is not None:
            self._start_upkeep(owner, reason)

    def _start_upkeep(self, owner: str, reason: str) -> None:
        if not self.background:
            self._rebuild(owner, reason)
            return
        # a daemon, so that an exit need not wait out a whole rebuild: the atexit hook stops it at its next step
        thread = threading.Thread(
            target=self._rebuild_in_background, args=(owner, reason), daemon=True, name=f"faiss-upkeep-{owner}"
        )
        self._upkeep[owner] = thread
        thread.start()

    def _rebuild_in_background(self, owner: str, reason: str) -> None:
        """The upkeep thread: a rebuild on all but ``UPKEEP_SPARE_THREADS`` of FAISS's default
        OpenMP threads (what a new thread gets: the core count or OMP_NUM_THREADS), at least one."""
        with omp_threads(max(1, faiss.omp_get_max_threads() - UPKEEP_SPARE_THREADS)):
            self._rebuild(owner, reason)

    def _rebuild(self, owner: str, reason: str) -> bool:
        """Rebuild one owner's index from its live vectors, then swap it in; True when swapped.

        The copy is taken under the lock (an IVF owner's in pieces of ``COPY_PIECE`` vectors, the
        lock taken per piece); the build runs without it while adds and removes go on and are
        journalled; the journal is replayed into the new index without the lock too, pass
        after pass, until what is left is at most ``REPLAY_UNDER_LOCK`` vectors: those are replayed
        and the index swapped under the lock, so searches wait for a short replay, not for every
        write made during the build. Its log records carry ``upkeep`` ("start"; "swapped" with the
        seconds of each phase and how many journalled writes were replayed under the lock and
        outside it; or "dropped"). ``close()`` stops it at its next step: the owner is gone then
        (its copy and replay see that), and the build raises BuildStopped."""
        started = time.perf_counter()
        try:
            with self._lock:
                state = self._owners.get(owner)
                if state is None or state.journal is not None:
                    return False
                logger.info(
                    "rebuilding the index of %r (%s)",
                    owner,
                    reason,
                    extra={"upkeep": {"event": "start", "owner": owner}},
                )
                state.journal = []
                if state.positional:
                    labels, vectors = live_contents(state)
                else:
                    labels, vectors = None, None
                    cutoff = self._next_label  # labels from here on are journalled adds
            if labels is None:
                labels, vectors = self._copy_in_pieces(owner, state, cutoff)
                if labels is None:
                    return False
            copied = time.perf_counter()
            try:
                fresh = self._build(self._wanted_kind(len(labels)), vectors, labels)
                del vectors
            except BuildStopped:
                logger.info(
                    "dropped the rebuild of %r: the retriever was closed",
                    owner,
                    extra={"upkeep": {"event": "dropped", "owner": owner}},
                )
                return False
            except Exception:
                logger.exception(
                    "rebuilding the index of %r failed; the current index stays",
                    owner,
                    extra={"upkeep": {"event": "dropped", "owner": owner}},
                )
                with self._lock:
                    state.journal = None
                return False
            built = time.perf_counter()
            replayed = outside = 0  # journal entries replayed so far; writes replayed without the lock
            for _ in range(REPLAY_PASSES):
                with self._lock:
                    pending = state.journal[replayed:]
                if self._closed.is_set() or sum(len(entry[1]) for entry in pending) <= REPLAY_UNDER_LOCK:
                    break
                outside += replay(fresh, pending)
                replayed += len(pending)
            with self._lock:
                if self._owners.get(owner) is not state:  # the owner was emptied meanwhile, or the retriever closed
                    logger.info(
                        "dropped the rebuild of %r: emptied or closed meanwhile",
                        owner,
                        extra={"upkeep": {"event": "dropped", "owner": owner}},
                    )
                    return False
                locked_start = time.perf_counter()
                under_lock = replay(fresh, state.journal[replayed:])
                self._owners[owner] = fresh
                state.journal = None
                swapped = time.perf_counter()
            phases = {
                "copy_s": copied - started,
                "build_s": built - copied,
                "replay_s": locked_start - built,
                "swap_s": swapped - locked_start,
            }
            logger.info(
                "swapped in the new %s index of %r (%d vectors, trained at %d; %d writes replayed outside the "
                "lock, %d under it; copy %.2f s, build %.2f s, replay %.2f s, swap %.2f s)",
                fresh.kind,
                owner,
                fresh.live,
                fresh.trained_size,
                outside,
                under_lock,
                *phases.values(),
                extra={
                    "upkeep": {
                        "event": "swapped",
                        "owner": owner,
                        "kind": fresh.kind,
                        "trained_size": fresh.trained_size,
                        "replayed": outside,
                        "replayed_under_lock": under_lock,
                        **phases,
                    }
                },
            )
        finally:
            with self._lock:
                if self._upkeep.get(owner) is threading.current_thread():
                    del self._upkeep[owner]
        with self._lock:  # the replayed journal may call for more (tombstones of removes made meanwhile)
            if self._owners.get(owner) is fresh:
                self._maybe_upkeep(owner, fresh)
        return True

    def _copy_in_pieces(self, owner: str, state: OwnerIndex, cutoff: int):
        """(labels ascending, vectors) of an IVF owner, copied COPY_PIECE vectors at a time under the
        lock, for a rebuild whose journal started when labels below ``cutoff`` had been handed out.

        Writes go on between pieces, and all of them are in the journal: a list copied after a
        remove lacks the removed vector, one copied before it has it and the replayed remove drops
        it; vectors of labels from ``cutoff`` on, whichever piece caught them, are left to the
        replayed adds. (None, None) when the owner was emptied meanwhile."""
        parts, start = [], 0
        while True:
            with self._lock:
                if self._owners.get(owner) is not state:
                    return None, None
                if start >= lists_in_use(faiss.extract_index_ivf(state.index)):
                    break
                start, labels, vectors = copy_lists(state, start, COPY_PIECE)
            parts.append((labels, vectors))
        labels = np.concatenate([labels for labels, _ in parts])
        vectors = np.concatenate([vectors for _, vectors in parts])
        del parts
        keep = np.flatnonzero(labels < cutoff)
        order = keep[np.argsort(labels[keep], kind="stable")]
        return labels[order], vectors[order]

    def compact(self, owner: str | None = None) -> int:
        """Rebuild the tombstoned (or outgrown) indexes of one owner or all, now, in this thread.

        Searches, adds and removes from other threads go on meanwhile. Returns how many owners'
        indexes were swapped."""
        with self._lock:
            self._require_open("compact")
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
        """Write the retriever to a folder: one FAISS file per owner and a JSON manifest (no pickle). No
        deleted vector reaches the disk (they were zeroed when deleted), and a crash never leaves the
        folder half-written (:mod:`memnets.retrieval.faiss_files`). One save at a time per folder."""
        return faiss_files.save(self, Path(directory))

    @classmethod
    def load(cls, directory: str | Path, use_gpu: bool | str = "auto", *, background: bool = True) -> FaissRetriever:
        """Read a folder written by ``save``; checks the format version, dims and id counts."""
        return faiss_files.load(cls, Path(directory), use_gpu, background)

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
