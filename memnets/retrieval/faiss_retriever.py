"""A FAISS vector index over memories, partitioned by owner.

Every owner (agent or user) gets its own index, so a search ranks only that owner's memories:
filtering happens before ranking, never by fetching extra neighbours and dropping foreign ones.

Each owner keeps an exact CPU *master* index (``IndexIDMap2(IndexFlatIP)``): it holds every
vector, serves exact inner-product search, removal and saving. Two things may be derived from it
lazily, at the first search after a change:

- an approximate index (HNSW or IVF, or any FAISS factory string) once the owner holds at least
  ``exact_below`` vectors; smaller owners are always searched exactly, because there is nothing to
  gain from approximating a few hundred dot products;
- a GPU copy (flat, or IVF) when FAISS was built with GPUs; it gives the same results as the CPU.

Vectors are compared by inner product; pass L2-normalised vectors (as MemoryEncoder returns) to get
cosine similarity. Memory ids are strings, unique across owners, mapped to int64 internally.
The object is not thread-safe; guard it with a lock if several threads share one.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

FORMAT_VERSION = 1
INDEX_KINDS = ("flat", "hnsw", "ivf", "auto")
MANIFEST = "retriever.json"
# index="auto": owners below this size are searched exactly (flat), larger ones approximately.
AUTO_EXACT_BELOW = 50_000
# a named approximate index ("hnsw", "ivf", a factory string) still searches tiny owners exactly.
APPROX_EXACT_BELOW = 1_000
GPU_MAX_K = 2048  # FAISS GPU kernels select at most this many neighbours


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


@dataclass
class _Owner:
    """One owner's indexes: the exact CPU master and the lazily built search index."""

    master: faiss.IndexIDMap2
    search_index: object | None = None  # approximate and/or GPU index, or None (search master)
    search_labels: np.ndarray | None = None  # GPU flat only: position -> int id
    built_size: int = 0  # owner size when the search index was (re)built
    stale: bool = True  # the search index must be rebuilt before the next search
    kind: str = "flat"  # what the search index is: "flat", "hnsw", "ivf" or a factory string
    extra: dict = field(default_factory=dict)

    @property
    def ntotal(self) -> int:
        return int(self.master.ntotal)

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """All (vectors [n, d], int ids [n]) in insertion order, read from the master."""
        n = self.ntotal
        vectors = self.master.index.reconstruct_n(0, n) if n else np.zeros((0, self.master.d), "float32")
        return vectors, faiss.vector_to_array(self.master.id_map).astype("int64")


class FaissRetriever:
    """Owner-partitioned FAISS inner-product search with string ids.

    Args:
        dim: vector dimension.
        index: "flat" (exact), "hnsw", "ivf", "auto" (exact below ``AUTO_EXACT_BELOW`` vectors per
            owner, HNSW on CPU / IVF on GPU above), or a FAISS factory string such as
            "HNSW32,Flat" or "IVF256,PQ32" (inner-product metric; trained on the owner's vectors).
        use_gpu: "auto" (GPU when FAISS has one), True (require one), or False.
        exact_below: owners with fewer vectors are searched exactly; default 50,000 for "auto",
            1,000 for the approximate kinds; 0 forces the approximate index for every owner.
        hnsw_m, ef_search, ef_construction: HNSW graph degree and beam widths (efSearch >= k always).
        nprobe: IVF lists visited per query (the number of lists is chosen from the owner's size).
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
        nprobe: int = 16,
    ) -> None:
        if not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ValueError(f"FaissRetriever: dim must be a positive int, got {dim!r}")
        if not isinstance(index, str) or not index:
            raise ValueError(f"FaissRetriever: index must be one of {INDEX_KINDS} or a FAISS factory string, got {index!r}")
        if index not in INDEX_KINDS:
            try:  # fail now, not at the first search, on a factory string FAISS cannot parse
                faiss.index_factory(int(dim), index, faiss.METRIC_INNER_PRODUCT)
            except RuntimeError as error:
                raise ValueError(f"FaissRetriever: index {index!r} is neither one of {INDEX_KINDS} "
                                 f"nor a valid FAISS factory string: {str(error).splitlines()[0]}") from None
        if use_gpu not in ("auto", True, False):
            raise ValueError(f"FaissRetriever: use_gpu must be 'auto', True or False, got {use_gpu!r}")
        if use_gpu is True and not gpu_available():
            raise RuntimeError("FaissRetriever: use_gpu=True but FAISS has no GPU support here "
                               "(install faiss-gpu and check faiss.get_num_gpus())")
        if exact_below is not None and exact_below < 0:
            raise ValueError(f"FaissRetriever: exact_below must be >= 0, got {exact_below!r}")
        self.dim = int(dim)
        self.index = index
        self.use_gpu = gpu_available() if use_gpu == "auto" else bool(use_gpu)
        if exact_below is None:
            exact_below = AUTO_EXACT_BELOW if index == "auto" else APPROX_EXACT_BELOW
        self.exact_below = int(exact_below)
        self.hnsw_m, self.ef_search, self.ef_construction, self.nprobe = hnsw_m, ef_search, ef_construction, nprobe
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
        return [owner for owner, state in self._owners.items() if state.ntotal]

    def count(self, owner: str) -> int:
        """How many vectors the owner holds (0 for an unknown owner)."""
        state = self._owners.get(owner)
        return state.ntotal if state else 0

    def ids(self, owner: str) -> list[str]:
        """The owner's memory ids in insertion order (after removals)."""
        state = self._owners.get(owner)
        if state is None:
            return []
        return [self._str_of[int(label)] for label in faiss.vector_to_array(state.master.id_map)]

    # ------------------------------------------------------------------ writes
    def add(self, ids: Sequence[str], vectors: np.ndarray, owner: str) -> None:
        """Add vectors [N, dim] under their memory ids for one owner.

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
        present = [i for i in ids if i in self._int_of]
        if present:
            raise ValueError(f"FaissRetriever.add: ids already in the retriever (remove them first): {present[:5]!r}")
        if not ids:
            return
        labels = np.arange(self._next_label, self._next_label + len(ids), dtype="int64")
        self._next_label += len(ids)
        state = self._owners.get(owner)
        if state is None:
            state = self._owners[owner] = _Owner(master=faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim)))
        state.master.add_with_ids(vectors, labels)
        for memory_id, label in zip(ids, labels.tolist()):
            self._int_of[memory_id] = label
            self._str_of[label] = memory_id
            self._owner_of[memory_id] = owner
        self._extend_search_index(state, vectors, labels)

    def remove(self, ids: Sequence[str], *, missing_ok: bool = False) -> int:
        """Remove memories by id (whatever their owner); returns how many were removed.

        Raises KeyError naming the unknown ids unless ``missing_ok``.
        """
        if isinstance(ids, str):
            raise TypeError("FaissRetriever.remove: ids must be a sequence of strings, not one string")
        ids = list(dict.fromkeys(ids))
        missing = [i for i in ids if i not in self._int_of]
        if missing and not missing_ok:
            raise KeyError(f"FaissRetriever.remove: unknown ids {missing[:5]!r}" + (" ..." if len(missing) > 5 else ""))
        by_owner: dict[str, list[str]] = {}
        for memory_id in ids:
            if memory_id in self._int_of:
                by_owner.setdefault(self._owner_of[memory_id], []).append(memory_id)
        removed = 0
        for owner, owner_ids in by_owner.items():
            state = self._owners[owner]
            labels = np.array([self._int_of[i] for i in owner_ids], dtype="int64")
            removed += int(state.master.remove_ids(faiss.IDSelectorBatch(labels)))
            state.stale = True  # HNSW cannot remove and GPU flat is positional: rebuild lazily
            for memory_id, label in zip(owner_ids, labels.tolist()):
                del self._int_of[memory_id], self._str_of[label], self._owner_of[memory_id]
            if state.ntotal == 0:
                del self._owners[owner]
        return removed

    # ------------------------------------------------------------------ search
    def search(self, vectors: np.ndarray, k: int, owner: str) -> tuple[list[list[str]], np.ndarray]:
        """The k best memories of ``owner`` for each query vector [B, dim], best first.

        Returns (ids [B][k'], scores float32 [B, k']) with k' = min(k, owner's size): an unknown
        owner gives B empty lists and a [B, 0] array. Scores are inner products.
        """
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ValueError(f"FaissRetriever.search: k must be an int >= 1, got {k!r}")
        vectors = self._check_vectors(vectors, "search")
        state = self._owners.get(owner)
        n_queries = vectors.shape[0]
        if state is None or state.ntotal == 0 or n_queries == 0:
            return [[] for _ in range(n_queries)], np.zeros((n_queries, 0), dtype="float32")
        k = min(int(k), state.ntotal)
        self._refresh(state)
        scores, labels = self._search_state(state, vectors, k)
        short = (labels < 0).any(axis=1)
        if short.any():  # an approximate index found fewer than k: answer those rows exactly
            scores[short], labels[short] = state.master.search(vectors[short], k)
        ids = [[self._str_of[int(label)] for label in row] for row in labels]
        return ids, scores.astype("float32", copy=False)

    def _search_state(self, state: _Owner, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        index = state.search_index
        if index is None or (self.use_gpu and k > GPU_MAX_K):
            return state.master.search(vectors, k)
        hnsw = state.extra.get("hnsw")
        if hnsw is not None:
            hnsw.hnsw.efSearch = max(self.ef_search, k)
        scores, positions = index.search(vectors, k)
        if state.search_labels is None:
            return scores, positions
        labels = np.where(positions >= 0, state.search_labels[np.clip(positions, 0, None)], -1)
        return scores, labels

    # ------------------------------------------------------------------ search index upkeep
    def _wanted_kind(self, n: int) -> str:
        """Which search index an owner of n vectors should have."""
        if self.index == "flat" or n < self.exact_below:
            return "flat"
        if self.index == "auto":
            return "ivf" if self.use_gpu else "hnsw"
        return self.index

    def _refresh(self, state: _Owner) -> None:
        """Rebuild the owner's search index if it is stale or no longer the right kind or size."""
        n = state.ntotal
        kind = self._wanted_kind(n)
        if kind == "ivf" and state.kind == "ivf" and n > 4 * max(state.built_size, 1):
            state.stale = True  # the clustering was trained on far fewer vectors: retrain
        if not state.stale and kind == state.kind:
            return
        state.kind, state.built_size, state.stale = kind, n, False
        state.search_index, state.search_labels, state.extra = None, None, {}
        if kind == "flat" and not self.use_gpu:
            return  # the master answers exactly
        vectors, labels = state.vectors()
        if kind == "flat":
            index = faiss.GpuIndexFlatIP(_gpu_resources(), self.dim)
            index.add(vectors)
            state.search_index, state.search_labels = index, labels
            return
        cpu_index = self._build_approximate(kind, vectors, state)
        cpu_index.add_with_ids(vectors, labels)
        if self.use_gpu and faiss.try_extract_index_ivf(cpu_index) is not None:
            state.search_index = faiss.index_cpu_to_gpu(_gpu_resources(), 0, cpu_index)
            state.extra["on_gpu"] = True
        else:
            state.search_index = cpu_index

    def _build_approximate(self, kind: str, vectors: np.ndarray, state: _Owner):
        """An empty, trained approximate index of the given kind that accepts add_with_ids."""
        n = vectors.shape[0]
        metric = faiss.METRIC_INNER_PRODUCT
        if kind == "hnsw":
            base = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, metric)
            base.hnsw.efConstruction = self.ef_construction
            state.extra["hnsw"] = base
            return faiss.IndexIDMap(base)
        if kind == "ivf":
            # about 4*sqrt(n) lists, but at least 39 training points per list as FAISS advises
            nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
            base = faiss.IndexIVFFlat(faiss.IndexFlatIP(self.dim), self.dim, nlist, metric)
        else:
            base = faiss.index_factory(self.dim, kind, metric)
        if not base.is_trained:
            try:
                base.train(vectors)
            except RuntimeError as error:
                raise ValueError(f"FaissRetriever: cannot train index {kind!r} on {n} vectors: "
                                 f"{str(error).strip().splitlines()[-1]}") from None
        ivf = faiss.try_extract_index_ivf(base)
        if ivf is not None:
            ivf.nprobe = min(self.nprobe, ivf.nlist)
            return base
        hnsw = _find_hnsw(base)
        if hnsw is not None:
            state.extra["hnsw"] = hnsw
        return faiss.IndexIDMap(base)

    def _extend_search_index(self, state: _Owner, vectors: np.ndarray, labels: np.ndarray) -> None:
        """Add new vectors to a built search index in place, or mark it for a rebuild."""
        if state.stale or state.search_index is None:
            return  # rebuilt at the next search, or the master (already extended) answers
        if state.search_labels is not None:  # GPU flat: positional labels
            state.search_index.add(vectors)
            state.search_labels = np.concatenate([state.search_labels, labels])
        else:
            state.search_index.add_with_ids(vectors, labels)

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path) -> Path:
        """Write the retriever to a folder: one FAISS file per owner and a JSON manifest (no pickle).

        Approximate CPU indexes are saved too, so loading does not rebuild an HNSW graph or retrain.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        owners = []
        for number, (owner, state) in enumerate(self._owners.items()):
            entry = {"owner": owner, "master": f"owner-{number}.faiss",
                     "ids": [self._str_of[int(label)] for label in faiss.vector_to_array(state.master.id_map)]}
            faiss.write_index(state.master, str(directory / entry["master"]))
            self._refresh(state)
            if state.search_index is not None and state.search_labels is None:
                index = state.search_index
                if state.extra.get("on_gpu"):
                    index = faiss.index_gpu_to_cpu(index)
                entry.update(search=f"owner-{number}.search.faiss", kind=state.kind, built_size=state.built_size)
                faiss.write_index(index, str(directory / entry["search"]))
            owners.append(entry)
        manifest = {
            "format_version": FORMAT_VERSION, "dim": self.dim, "index": self.index,
            "exact_below": self.exact_below, "hnsw_m": self.hnsw_m, "ef_search": self.ef_search,
            "ef_construction": self.ef_construction, "nprobe": self.nprobe, "owners": owners,
        }
        (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))
        return directory

    @classmethod
    def load(cls, directory: str | Path, use_gpu: bool | str = "auto") -> "FaissRetriever":
        """Read a folder written by ``save``; checks the format version, dims and id counts."""
        directory = Path(directory)
        path = directory / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"FaissRetriever.load: no {MANIFEST} in {directory}")
        manifest = json.loads(path.read_text())
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"FaissRetriever.load: {path} has format_version {manifest.get('format_version')!r}, "
                             f"this version reads {FORMAT_VERSION}")
        retriever = cls(manifest["dim"], manifest["index"], use_gpu, exact_below=manifest["exact_below"],
                        hnsw_m=manifest["hnsw_m"], ef_search=manifest["ef_search"],
                        ef_construction=manifest["ef_construction"], nprobe=manifest["nprobe"])
        for entry in manifest["owners"]:
            master_path = directory / entry["master"]
            master = faiss.read_index(str(master_path))
            if not isinstance(master, faiss.IndexIDMap2) or master.d != retriever.dim or master.ntotal != len(entry["ids"]):
                raise ValueError(f"FaissRetriever.load: {master_path} is a {type(master).__name__} of {master.ntotal} "
                                 f"vectors of dim {master.d}; the manifest expects an IndexIDMap2 of "
                                 f"{len(entry['ids'])} vectors of dim {retriever.dim}")
            labels = faiss.vector_to_array(master.id_map).astype("int64").tolist()
            state = retriever._owners[entry["owner"]] = _Owner(master=master)
            for memory_id, label in zip(entry["ids"], labels):
                if memory_id in retriever._int_of or label in retriever._str_of:
                    raise ValueError(f"FaissRetriever.load: id {memory_id!r} (label {label}) appears twice in {path}")
                retriever._int_of[memory_id], retriever._str_of[label] = label, memory_id
                retriever._owner_of[memory_id] = entry["owner"]
            retriever._next_label = max(retriever._next_label, max(labels, default=-1) + 1)
            if "search" in entry:  # reuse the saved approximate index (same labels) instead of rebuilding
                index = faiss.read_index(str(directory / entry["search"]))
                hnsw = _find_hnsw(index.index if isinstance(index, faiss.IndexIDMap) else index)
                if hnsw is not None:
                    state.extra["hnsw"] = hnsw
                if retriever.use_gpu and faiss.try_extract_index_ivf(index) is not None:
                    index = faiss.index_cpu_to_gpu(_gpu_resources(), 0, index)
                    state.extra["on_gpu"] = True
                state.search_index = index
                state.kind, state.built_size, state.stale = entry["kind"], entry["built_size"], False
        return retriever

    # ------------------------------------------------------------------ validation
    def _check_vectors(self, vectors, where: str) -> np.ndarray:
        array = np.asarray(vectors)
        if array.ndim != 2:
            raise ValueError(f"FaissRetriever.{where}: vectors must be a 2-D array [N, {self.dim}], "
                             f"got shape {array.shape} (reshape one vector with v[None, :])")
        if array.shape[1] != self.dim:
            raise ValueError(f"FaissRetriever.{where}: vectors have dim {array.shape[1]}, the retriever has dim {self.dim}")
        if not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"FaissRetriever.{where}: vectors must be numeric, got dtype {array.dtype}")
        array = np.ascontiguousarray(array, dtype="float32")
        if not np.isfinite(array).all():
            rows = np.flatnonzero(~np.isfinite(array).all(axis=1))
            raise ValueError(f"FaissRetriever.{where}: vectors contain NaN or inf (rows {rows[:5].tolist()})")
        return array


def _find_hnsw(index):
    """The HNSW index inside a factory-built index, if any (to set efSearch), else None."""
    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexHNSW):
        return index
    return None
