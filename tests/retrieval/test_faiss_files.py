"""FaissRetriever's files: a save interrupted at any point leaves the last one whole."""

from __future__ import annotations

import os

import numpy as np
import pytest

from memnets.retrieval import faiss_files
from memnets.retrieval.faiss_retriever import FaissRetriever
from memnets.safefiles import write_atomically

DIM = 16


def unit_vectors(n: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype("float32")
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_save_interrupted_before_its_manifest_leaves_the_last_save_whole(tmp_path, monkeypatch):
    retriever = FaissRetriever(DIM, "hnsw", use_gpu=False, exact_below=0, background=False)
    retriever.add([f"m{i}" for i in range(50)], unit_vectors(50), "o")
    retriever.save(tmp_path)
    first = sorted(os.listdir(tmp_path))
    retriever.add([f"n{i}" for i in range(50)], unit_vectors(50, seed=1), "p")

    def killed(path, data):
        raise OSError("killed before the manifest was replaced")

    monkeypatch.setattr(faiss_files, "write_atomically", killed)
    with pytest.raises(OSError, match="killed"):
        retriever.save(tmp_path)
    loaded = FaissRetriever.load(tmp_path, use_gpu=False)  # the first save, whole
    assert loaded.owners == ["o"] and len(loaded) == 50
    monkeypatch.setattr(faiss_files, "write_atomically", write_atomically)
    retriever.save(tmp_path)  # the next save removes the first one's files and the orphans
    assert set(first) & set(os.listdir(tmp_path)) == {"retriever.json"}
    assert len(os.listdir(tmp_path)) == 3
    assert sorted(FaissRetriever.load(tmp_path, use_gpu=False).owners) == ["o", "p"]


def test_write_atomically_leaves_the_old_file_or_the_new_one(tmp_path, monkeypatch):
    target = tmp_path / "file.json"
    write_atomically(target, b"old")

    def killed(*args):
        raise OSError("killed before the rename")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(OSError, match="killed"):
        write_atomically(target, b"new")
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["file.json"]
    monkeypatch.undo()
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["file.json"]
