"""FaissRetriever: exactness against numpy, owner isolation, removal, persistence, input checks, GPU parity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memnets.retrieval.faiss_retriever import FaissRetriever, gpu_available

DIM = 16


def unit_vectors(n: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((n, dim)).astype("float32")
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def brute_force(queries: np.ndarray, vectors: np.ndarray, ids: list[str], k: int):
    scores = queries @ vectors.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return [[ids[j] for j in row] for row in order], np.take_along_axis(scores, order, axis=1)


def filled(index: str = "flat", owners: int = 3, per_owner: int = 60, **kwargs):
    """A retriever with `owners` owners of `per_owner` vectors each; returns it and {owner: (ids, vectors)}."""
    retriever = FaissRetriever(DIM, index, use_gpu=False, **kwargs)
    data = {}
    for o in range(owners):
        ids = [f"owner{o}/m{i}" for i in range(per_owner)]
        vectors = unit_vectors(per_owner, seed=o)
        retriever.add(ids, vectors, f"owner{o}")
        data[f"owner{o}"] = (ids, vectors)
    return retriever, data


def test_flat_search_equals_numpy_brute_force():
    retriever, data = filled()
    queries = unit_vectors(7, seed=99)
    for owner, (ids, vectors) in data.items():
        got_ids, got_scores = retriever.search(queries, 10, owner)
        want_ids, want_scores = brute_force(queries, vectors, ids, 10)
        assert got_ids == want_ids
        np.testing.assert_allclose(got_scores, want_scores, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("index", ["flat", "hnsw", "ivf", "auto", "HNSW16,Flat", "IVF4,Flat"])
def test_many_owners_never_leak_and_return_k(index):
    retriever, data = filled(index, owners=12, per_owner=40, exact_below=0)
    queries = unit_vectors(5, seed=123)
    for owner, (ids, _) in data.items():
        for k in (1, 10, 40, 100):
            got, scores = retriever.search(queries, k, owner)
            assert scores.shape == (5, min(k, 40))
            for row in got:
                assert len(row) == min(k, 40) and len(set(row)) == len(row)
                assert set(row) <= set(ids), f"{index}: search for {owner} returned another owner's memory"


@pytest.mark.parametrize("index", ["hnsw", "ivf"])
def test_approximate_index_is_close_to_exact(index):
    retriever, data = filled(index, owners=1, per_owner=400, exact_below=0)
    ids, vectors = data["owner0"]
    queries = unit_vectors(20, seed=5)
    got, _ = retriever.search(queries, 10, "owner0")
    want, _ = brute_force(queries, vectors, ids, 10)
    recall = np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got, want)])
    assert recall >= 0.8


def test_unknown_owner_gives_empty_result():
    retriever, _ = filled()
    ids, scores = retriever.search(unit_vectors(3), 5, "nobody")
    assert ids == [[], [], []] and scores.shape == (3, 0)


@pytest.mark.parametrize("index", ["flat", "hnsw", "ivf"])
def test_remove_then_search(index):
    retriever, data = filled(index, owners=2, per_owner=50, exact_below=0)
    ids, vectors = data["owner0"]
    queries = vectors[:5]  # each query's best match is itself
    assert [row[0] for row in retriever.search(queries, 3, "owner0")[0]] == ids[:5]
    assert retriever.remove(ids[:5]) == 5
    assert len(retriever) == 95 and retriever.count("owner0") == 45 and ids[0] not in retriever
    got, _ = retriever.search(queries, 45, "owner0")
    assert all(len(row) == 45 and not set(row) & set(ids[:5]) for row in got)
    want, _ = brute_force(queries, vectors[5:], ids[5:], 3)
    if index == "flat":
        assert [row[:3] for row in got] == want
    with pytest.raises(KeyError, match="unknown ids"):
        retriever.remove(["owner0/m0"])
    assert retriever.remove(["owner0/m0"], missing_ok=True) == 0
    retriever.add(ids[:1], vectors[:1], "owner0")  # a removed id may be added again
    assert retriever.search(vectors[:1], 1, "owner0")[0] == [[ids[0]]]


def test_removing_all_of_an_owner_forgets_the_owner():
    retriever, data = filled(owners=2, per_owner=5)
    retriever.remove(data["owner1"][0])
    assert retriever.owners == ["owner0"]
    assert retriever.search(unit_vectors(1), 3, "owner1")[0] == [[]]


@pytest.mark.parametrize("index", ["flat", "hnsw", "ivf", "HNSW16,Flat"])
def test_save_and_load_round_trip(tmp_path, index):
    retriever, data = filled(index, owners=3, per_owner=50, exact_below=0)
    retriever.remove(["owner1/m3", "owner2/m0"])
    queries = unit_vectors(6, seed=7)
    before = {owner: retriever.search(queries, 8, owner) for owner in data}
    retriever.save(tmp_path)
    assert not list(tmp_path.glob("*.pkl"))
    loaded = FaissRetriever.load(tmp_path, use_gpu=False)
    assert len(loaded) == len(retriever) and sorted(loaded.owners) == sorted(retriever.owners)
    assert loaded.ids("owner1") == retriever.ids("owner1")
    for owner, (ids, scores) in before.items():
        got_ids, got_scores = loaded.search(queries, 8, owner)
        assert got_ids == ids
        np.testing.assert_allclose(got_scores, scores, rtol=1e-5)
    loaded.add(["fresh"], unit_vectors(1, seed=42), "owner0")  # labels continue after the saved ones
    assert loaded.search(unit_vectors(1, seed=42), 1, "owner0")[0] == [["fresh"]]
    with pytest.raises(ValueError, match="already in the retriever"):
        loaded.add(["owner0/m1"], unit_vectors(1), "owner0")


def test_load_rejects_unknown_format_version(tmp_path):
    retriever, _ = filled(owners=1, per_owner=3)
    retriever.save(tmp_path)
    manifest = (tmp_path / "retriever.json").read_text().replace('"format_version": 1', '"format_version": 99')
    (tmp_path / "retriever.json").write_text(manifest)
    with pytest.raises(ValueError, match="format_version 99"):
        FaissRetriever.load(tmp_path)


def test_input_validation():
    retriever = FaissRetriever(DIM, use_gpu=False)
    good = unit_vectors(2)
    with pytest.raises(ValueError, match="dim 8"):
        retriever.add(["a", "b"], unit_vectors(2, dim=8), "o")
    with pytest.raises(ValueError, match="NaN or inf"):
        retriever.add(["a", "b"], np.where(np.eye(2, DIM, dtype=bool), np.nan, good), "o")
    with pytest.raises(ValueError, match="NaN or inf"):
        retriever.add(["a", "b"], np.where(np.eye(2, DIM, dtype=bool), np.inf, good), "o")
    with pytest.raises(ValueError, match="duplicate ids"):
        retriever.add(["a", "a"], good, "o")
    with pytest.raises(ValueError, match="2 ids but 1 vectors"):
        retriever.add(["a", "b"], good[:1], "o")
    with pytest.raises(ValueError, match="2-D"):
        retriever.add(["a"], good[0], "o")
    with pytest.raises(ValueError, match="owner"):
        retriever.add(["a", "b"], good, "")
    with pytest.raises(TypeError, match="not one string"):
        retriever.add("ab", good, "o")
    retriever.add(["a", "b"], good, "o")
    with pytest.raises(ValueError, match="already in the retriever"):
        retriever.add(["b"], good[:1], "other-owner")
    for bad_k in (0, -1, 1.5):
        with pytest.raises(ValueError, match="k must be"):
            retriever.search(good, bad_k, "o")
    with pytest.raises(ValueError, match="dim 8"):
        retriever.search(unit_vectors(1, dim=8), 1, "o")
    with pytest.raises(ValueError, match="factory string"):
        FaissRetriever(DIM, "NotAnIndex")
    assert len(retriever) == 2


def test_auto_switches_to_approximate_above_threshold():
    retriever, data = filled("auto", owners=1, per_owner=30, exact_below=20)
    ids, vectors = data["owner0"]
    got, _ = retriever.search(vectors[:3], 1, "owner0")
    assert got == [[i] for i in ids[:3]] and retriever._owners["owner0"].kind == "hnsw"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="FAISS has no GPU here")
@pytest.mark.parametrize("index", ["flat", "ivf"])
def test_gpu_gives_the_cpu_results(tmp_path, index):
    cpu, data = filled(index, owners=3, per_owner=300, exact_below=0)
    gpu = FaissRetriever(DIM, index, use_gpu=True, exact_below=0)
    for owner, (ids, vectors) in data.items():
        gpu.add(ids, vectors, owner)
    queries = unit_vectors(16, seed=3)
    for owner in data:
        cpu_ids, cpu_scores = cpu.search(queries, 10, owner)
        gpu_ids, gpu_scores = gpu.search(queries, 10, owner)
        np.testing.assert_allclose(gpu_scores, cpu_scores, rtol=1e-4, atol=1e-4)
        if index == "flat":
            assert gpu_ids == cpu_ids
        else:
            overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(cpu_ids, gpu_ids)])
            assert overlap >= 0.9
    gpu.remove(data["owner0"][0][:10])
    assert all(len(row) == 10 for row in gpu.search(queries, 10, "owner0")[0])
    gpu.save(tmp_path)
    reloaded = FaissRetriever.load(tmp_path, use_gpu=False)  # a GPU-saved retriever loads on CPU
    assert len(reloaded) == len(gpu)
    np.testing.assert_allclose(reloaded.search(queries, 5, "owner1")[1], gpu.search(queries, 5, "owner1")[1], rtol=1e-4, atol=1e-4)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 4), st.integers(1, 12)), min_size=1, max_size=12),
       st.integers(1, 30), st.sampled_from(["flat", "hnsw"]))
def test_random_adds_and_removes_match_a_brute_force_model(operations, k, index):
    """After any sequence of adds and removes over 5 owners, every owner's search equals numpy on
    exactly that owner's live vectors: nothing foreign, nothing removed, min(k, n) results."""
    retriever = FaissRetriever(DIM, index, use_gpu=False, exact_below=0)
    live: dict[str, dict[str, np.ndarray]] = {f"o{i}": {} for i in range(5)}
    counter = 0
    for op, owner_number, size in operations:
        owner = f"o{owner_number}"
        if op == "add":
            ids = [f"m{counter + i}" for i in range(size)]
            vectors = unit_vectors(size, seed=counter)
            counter += size
            retriever.add(ids, vectors, owner)
            live[owner].update(zip(ids, vectors))
        else:
            doomed = list(live[owner])[:size]
            retriever.remove(doomed)
            for memory_id in doomed:
                del live[owner][memory_id]
    queries = unit_vectors(3, seed=10_000)
    for owner, memories in live.items():
        got, scores = retriever.search(queries, k, owner)
        assert retriever.count(owner) == len(memories)
        assert all(len(row) == min(k, len(memories)) and set(row) <= set(memories) for row in got)
        if memories and index == "flat":
            want, want_scores = brute_force(queries, np.stack(list(memories.values())), list(memories), k)
            np.testing.assert_allclose(scores, want_scores, atol=1e-5)
