"""The folder of a :class:`~memnets.retrieval.faiss_retriever.FaissRetriever`: one FAISS file per owner
and a JSON manifest (no pickle), written so that a crash never leaves it half-written.

``FaissRetriever.save`` and ``FaissRetriever.load`` call :func:`save` and :func:`load`, which read
and fill the retriever's maps (under its lock when saving). A save's FAISS files get names of
their own (``owner-<n>-<save>.faiss``) and are flushed to disk; then the manifest that names them
replaces the old one atomically (:func:`memnets.safefiles.write_atomically`): the commit. Only
after it are the previous save's files deleted, with any that a killed save left. So a crash at
any moment, of the process or of the machine, leaves the folder as the last save that finished.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import faiss
import numpy as np

from memnets.retrieval.faiss_index import OwnerIndex, calibrate, find_hnsw, live_labels
from memnets.safefiles import flush_to_disk, write_atomically

if TYPE_CHECKING:
    from memnets.retrieval.faiss_retriever import FaissRetriever

FORMAT_VERSION = 2
MANIFEST = "retriever.json"
OWNER_FILES = "owner-*.faiss"  # the FAISS files a save writes


def save(retriever: FaissRetriever, directory: Path) -> Path:
    """Write ``retriever`` into ``directory`` (see the module docstring); returns ``directory``."""
    save_id = uuid.uuid4().hex[:12]
    with retriever._lock:
        retriever._require_open("save")
        directory.mkdir(parents=True, exist_ok=True)
        owners = []
        for number, (owner, state) in enumerate(retriever._owners.items()):
            live = live_labels(state)
            entry = {
                "owner": owner,
                "file": f"owner-{number}-{save_id}.faiss",
                "kind": state.kind,
                "trained_size": state.trained_size,
                "ids": [retriever._str_of[label] for label in live.tolist()],
                "labels": live.tolist(),
            }
            if state.positional:
                entry["positions"] = state.labels.tolist()  # label per position, tombstones included
            faiss.write_index(state.index, str(directory / entry["file"]))
            owners.append(entry)
        manifest = {
            "format_version": FORMAT_VERSION,
            "dim": retriever.dim,
            "index": retriever.index,
            "exact_below": retriever.exact_below,
            "hnsw_m": retriever.hnsw_m,
            "ef_search": retriever.ef_search,
            "ef_construction": retriever.ef_construction,
            "nprobe": retriever.nprobe,
            "compact_at": retriever.compact_at,
            "retrain_growth": retriever.retrain_growth,
            "next_label": retriever._next_label,
            "owners": owners,
        }
    written = {entry["file"] for entry in owners}
    for name in written:  # flushed outside the lock: searches need not wait for the disk
        flush_to_disk(directory / name)
    write_atomically(directory / MANIFEST, json.dumps(manifest).encode())
    for stale in [*directory.glob(OWNER_FILES), *directory.glob(f".{MANIFEST}.*.tmp")]:
        if stale.name not in written:  # the previous save's files, and any a killed save left
            stale.unlink(missing_ok=True)
    return directory


def load(
    retriever_class: type[FaissRetriever], directory: Path, use_gpu: bool | str, background: bool
) -> FaissRetriever:
    """A ``retriever_class`` read from a folder written by :func:`save`; checks the format version, dims
    and id counts."""
    path = directory / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"FaissRetriever.load: no {MANIFEST} in {directory}")
    manifest = json.loads(path.read_text())
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"FaissRetriever.load: {path} has format_version {manifest.get('format_version')!r}, "
            f"this version reads {FORMAT_VERSION}"
        )
    retriever = retriever_class(
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
        state = OwnerIndex(kind=entry["kind"], index=index, live=len(ids), trained_size=int(entry["trained_size"]))
        if positions is not None:
            state.labels = positions
            alive = np.isin(positions, labels)
            if find_hnsw(index) is not None:
                state.alive = alive
            if int(alive.sum()) != len(labels):
                raise ValueError(f"FaissRetriever.load: {path} lists labels of {entry['owner']!r} that its index lacks")
        elif (ivf := faiss.try_extract_index_ivf(index)) is not None:
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
            calibrate(state)
        for memory_id, label in zip(ids, labels.tolist()):
            if memory_id in retriever._int_of or label in retriever._str_of or label >= retriever._next_label:
                raise ValueError(
                    f"FaissRetriever.load: id {memory_id!r} (label {label}) is repeated or out of range in {path}"
                )
            retriever._int_of[memory_id], retriever._str_of[label] = label, memory_id
            retriever._owner_of[memory_id] = entry["owner"]
        retriever._owners[entry["owner"]] = state
    return retriever
