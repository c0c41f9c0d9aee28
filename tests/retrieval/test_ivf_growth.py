"""New IVF lists for adds that fit none of the trained ones (memnets.retrieval.ivf_growth): an add
from clusters the lists were not trained on gets lists of its own, so searches keep the default
nprobe and their recall right after the add; adds like the owner's own grow none; a grown index
saves, loads, removes, rebuilds, copies for a GPU and takes concurrent adds like any other."""

from __future__ import annotations

import threading

import faiss
import numpy as np
import pytest

from memnets.retrieval import ivf_growth
from memnets.retrieval.faiss_index import (
    append,
    build_index,
    default_nprobe,
    delete,
    ivf_lists,
    live_labels,
    prepare_add,
    replay,
    search_index,
)
from memnets.retrieval.faiss_retriever import FaissRetriever
from memnets.retrieval.ivf_growth import lists_in_use

DIM = 384


def clusters(n: int, count: int, seed: int, *, first: int = 0) -> np.ndarray:
    """n unit vectors around clusters ``first`` .. ``first + count - 1`` of one seeded set of
    Gaussian centres (member noise half the centres' spread)."""
    centres = np.random.default_rng(0).normal(0.0, 1.0 / np.sqrt(DIM), (first + count, DIM)).astype("float32")
    rng = np.random.default_rng(seed)
    members = first + rng.integers(0, count, n)
    vectors = centres[members] + rng.normal(0.0, 0.5 / np.sqrt(DIM), (n, DIM)).astype("float32")
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def near(vectors: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Queries: ``count`` stored vectors drawn at random, plus noise, renormalised."""
    rng = np.random.default_rng(seed)
    queries = vectors[rng.choice(len(vectors), count, replace=False)]
    queries = queries + rng.normal(0.0, 0.3 / np.sqrt(DIM), queries.shape).astype("float32")
    return queries / np.linalg.norm(queries, axis=1, keepdims=True)


def recall_at_10(retriever: FaissRetriever, vectors: np.ndarray, queries: np.ndarray) -> float:
    exact = faiss.IndexFlatIP(DIM)
    exact.add(vectors)
    _, truth = exact.search(queries, 10)
    found, _ = retriever.search(queries, 10, "o")
    return float(np.mean([len({int(i[1:]) for i in row} & set(best)) / 10 for row, best in zip(found, truth)]))


def grown(spare: int, monkeypatch) -> tuple[FaissRetriever, np.ndarray]:
    """An IVF owner trained on 4,000 vectors of 50 clusters, then given 4,000 of 50 other clusters."""
    monkeypatch.setattr(ivf_growth, "SPARE_LISTS_PER_LIST", spare)
    old, new = clusters(4_000, 50, seed=1), clusters(4_000, 50, seed=2, first=50)
    retriever = FaissRetriever(DIM, "ivf", use_gpu=False, exact_below=0, background=False, retrain_growth=10)
    retriever.add([f"m{i}" for i in range(4_000)], old, "o")
    retriever.add([f"m{i}" for i in range(4_000, 8_000)], new, "o")
    return retriever, np.concatenate([old, new])


def test_an_add_of_new_clusters_gets_lists_of_its_own(monkeypatch):
    """The new clusters' vectors go to new lists (about as full as the old ones), the self-check keeps
    the default nprobe, and that nprobe finds >= 0.95 of the exact top 10 right after the add; the
    same add without spare lists scatters over the old lists and needs more probes."""
    retriever, vectors = grown(ivf_growth.SPARE_LISTS_PER_LIST, monkeypatch)
    state = retriever._owners["o"]
    ivf = faiss.extract_index_ivf(state.index)
    assert retriever.stats("o")["trained_size"] == 4_000  # no rebuild: the lists grew in the add
    trained = ivf_lists(4_000)
    assert 80 <= lists_in_use(ivf) - trained <= 120, lists_in_use(ivf)
    in_new = sum(ivf.invlists.list_size(i) for i in range(trained, lists_in_use(ivf)))
    assert in_new >= 0.95 * 4_000
    assert retriever.stats("o")["nprobe"] == default_nprobe(lists_in_use(ivf)) == 16
    queries = near(vectors, 300, seed=3)
    assert recall_at_10(retriever, vectors, queries) >= 0.95

    without, _ = grown(0, monkeypatch)
    assert without.stats("o")["nlist"] == trained and without.stats("o")["nprobe"] > 16


def test_adds_like_the_owners_own_grow_no_lists():
    """Vectors from the clusters the lists were trained on fit them: no new list, however many."""
    retriever = FaissRetriever(DIM, "ivf", use_gpu=False, exact_below=0, background=False, retrain_growth=10)
    vectors = clusters(12_000, 100, seed=4)
    retriever.add([f"m{i}" for i in range(4_000)], vectors[:4_000], "o")
    for start, stop in ((4_000, 8_000), (8_000, 11_999), (11_999, 12_000)):
        retriever.add([f"m{i}" for i in range(start, stop)], vectors[start:stop], "o")
    assert retriever.stats("o")["nlist"] == 102 and retriever.stats("o")["live"] == 12_000


def test_a_grown_index_saves_loads_removes_and_keeps_growing(tmp_path, monkeypatch):
    retriever, vectors = grown(ivf_growth.SPARE_LISTS_PER_LIST, monkeypatch)
    queries = near(vectors, 100, seed=5)
    before = retriever.search(queries, 10, "o")[0]
    retriever.save(tmp_path / "index")
    loaded = FaissRetriever.load(tmp_path / "index", use_gpu=False, background=False)
    assert loaded.search(queries, 10, "o")[0] == before
    assert loaded.stats("o")["nlist"] == retriever.stats("o")["nlist"]
    assert loaded._owners["o"].fit_floor is not None  # taken again at load
    gone = [f"m{i}" for i in range(4_000, 4_100)]  # vectors in the grown lists
    loaded.remove(gone)
    found, _ = loaded.search(vectors[4_000:4_200], 1, "o")
    assert not {row[0] for row in found} & set(gone)
    assert [row[0] for row in found[100:]] == [f"m{i}" for i in range(4_100, 4_200)]
    lists = loaded.stats("o")["nlist"]
    more = clusters(4_000, 50, seed=6, first=100)
    loaded.add([f"n{i}" for i in range(4_000)], more, "o")
    assert loaded.stats("o")["nlist"] > lists
    found, _ = loaded.search(more[:50], 1, "o")
    assert [row[0] for row in found] == [f"n{i}" for i in range(50)]


def test_a_rebuild_of_a_grown_index_holds_every_vector(monkeypatch):
    retriever, vectors = grown(ivf_growth.SPARE_LISTS_PER_LIST, monkeypatch)
    retriever.compact("o")
    stats = retriever.stats("o")
    assert stats["trained_size"] == 8_000 and stats["nlist"] == ivf_lists(8_000) and stats["live"] == 8_000
    found, _ = retriever.search(vectors[::80], 1, "o")
    assert [row[0] for row in found] == [f"m{i}" for i in range(0, 8_000, 80)]


def test_the_gpu_copy_of_a_grown_index_drops_its_spare_lists_and_searches_the_same(monkeypatch):
    """A GPU copy wants a centroid for every list: it is made from a copy without the spare lists,
    which must search exactly as the index does (checked on the CPU: this machine has no GPU)."""
    retriever, vectors = grown(ivf_growth.SPARE_LISTS_PER_LIST, monkeypatch)
    index = retriever._owners["o"].index
    copy = ivf_growth.without_spare_lists(index)
    ivf, copied = faiss.extract_index_ivf(index), faiss.extract_index_ivf(copy)
    assert ivf_growth.spare_lists(ivf) > 0 and copied.nlist == lists_in_use(copied) == lists_in_use(ivf)
    queries = near(vectors, 50, seed=7)
    for nprobe in (4, 16, lists_in_use(ivf)):
        params = faiss.SearchParametersIVF(nprobe=nprobe)
        want, got = index.search(queries, 10, params=params), copy.search(queries, 10, params=params)
        np.testing.assert_array_equal(want[1], got[1])
    assert ivf_growth.without_spare_lists(copy) is copy


def test_a_prepared_add_is_prepared_again_when_the_lists_grew_since():
    """An add prepared without the lock, then overtaken by an add that grew the lists: its planned
    lists are stale (numbered from the old count), so append plans them again on the index as it is."""
    old, first_new, second_new = (clusters(4_000, 50, seed=s, first=f) for s, f in ((8, 0), (9, 50), (10, 100)))
    state = build_index("ivf", old, np.arange(4_000), dim=DIM, hnsw_m=32, ef_construction=40)
    prepared = prepare_add(state, second_new)
    assert prepared.growth.centroids is not None and prepared.growth.first == 102
    append(state, first_new, np.arange(4_000, 8_000))  # grows the lists from 102
    ivf = faiss.extract_index_ivf(state.index)
    grown_by_first = lists_in_use(ivf)
    append(state, second_new, np.arange(8_000, 12_000), prepared)
    assert ivf.invlists.compute_ntotal() == state.live == 12_000 and lists_in_use(ivf) > grown_by_first
    lists = [faiss.lo_listno(ivf.direct_map.get(label)) for label in range(8_000, 12_000)]
    assert np.mean(np.array(lists) >= grown_by_first) >= 0.95  # lists of their own, not the first add's
    _, found = search_index(state, second_new[:200], 1, nprobe=None, ef_search=16, use_gpu=False)
    assert (found[:, 0] == np.arange(8_000, 8_200)).all()


def test_concurrent_adds_that_grow_lists_and_searches_lose_nothing(monkeypatch):
    """Adds of new clusters from four threads (each large enough to be prepared without the lock)
    while a fifth searches: every vector is found by itself afterwards, and no call raised."""
    import memnets.retrieval.faiss_retriever as module

    monkeypatch.setattr(module, "ASSIGN_UNLOCKED_FROM", 500)
    retriever = FaissRetriever(DIM, "ivf", use_gpu=False, exact_below=0, background=False, retrain_growth=10)
    retriever.add([f"base{i}" for i in range(4_000)], clusters(4_000, 50, seed=11), "o")
    batches = {t: clusters(3_000, 30, seed=20 + t, first=50 + 30 * t) for t in range(4)}
    errors, done = [], threading.Event()

    def writer(t: int) -> None:
        try:
            for part in range(3):
                rows = slice(1_000 * part, 1_000 * (part + 1))
                retriever.add([f"t{t}/{i}" for i in range(rows.start, rows.stop)], batches[t][rows], "o")
        except Exception as error:  # noqa: BLE001 - collected and asserted on below
            errors.append(error)

    def reader() -> None:
        queries = clusters(20, 50, seed=12)
        while not done.is_set():
            try:
                retriever.search(queries, 10, "o")
            except Exception as error:  # noqa: BLE001
                errors.append(error)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    searcher = threading.Thread(target=reader)
    searcher.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    searcher.join()
    assert not errors
    assert retriever.stats("o")["live"] == 16_000 and retriever.stats("o")["nlist"] > 102
    for t, vectors in batches.items():
        found, _ = retriever.search(vectors[::30], 1, "o")
        assert [row[0] for row in found] == [f"t{t}/{i}" for i in range(0, 3_000, 30)]


@pytest.mark.parametrize("floor", [None, 2.0])
def test_plan_grows_nothing_without_a_floor_or_when_nothing_fits(floor):
    """No floor (a build's own add): nothing grows. A floor nothing reaches: every vector is a misfit,
    new lists are made, at most as many as there are spare lists."""
    state = build_index("ivf", clusters(4_000, 50, seed=13), np.arange(4_000), dim=DIM, hnsw_m=32, ef_construction=40)
    ivf = faiss.extract_index_ivf(state.index)
    vectors = clusters(2_000, 20, seed=14, first=200)
    growth = ivf_growth.plan(ivf, vectors, floor, threading.Lock(), per_list=40, min_points=39)
    if floor is None:
        assert growth.centroids is None and (growth.lists < 102).all()
    else:
        assert len(growth.centroids) == 2_000 // 40 and (growth.lists >= 102).all()
        assert (
            len(ivf_growth.plan(ivf, vectors, floor, threading.Lock(), per_list=1, min_points=1).centroids)
            == 102 * ivf_growth.SPARE_LISTS_PER_LIST
        )


def test_a_journal_of_small_adds_and_removes_replays_in_runs_to_the_same_vectors():
    """A rebuild replays its journal with runs of adds appended together (new lists planned once for
    a run): the index ends up holding exactly what applying each write in turn leaves."""
    old = clusters(4_000, 50, seed=15)
    new = clusters(5_000, 40, seed=16, first=50)
    entries = [("add", np.arange(4_000 + i, 4_500 + i), new[i : i + 500]) for i in range(0, 3_000, 500)]
    entries.append(("remove", np.arange(4_100, 4_300), None))
    entries += [("add", np.arange(4_000 + i, 4_500 + i), new[i : i + 500]) for i in range(3_000, 5_000, 500)]
    batched = build_index("ivf", old, np.arange(4_000), dim=DIM, hnsw_m=32, ef_construction=40)
    assert replay(batched, entries) == 5_200
    one_by_one = build_index("ivf", old, np.arange(4_000), dim=DIM, hnsw_m=32, ef_construction=40)
    for op, labels, vectors in entries:
        if op == "add":
            append(one_by_one, vectors, labels)
        else:
            delete(one_by_one, labels)
    assert (live_labels(batched) == live_labels(one_by_one)).all() and batched.live == 8_800
    assert not np.isin(np.arange(4_100, 4_300), live_labels(batched)).any()
    _, found = search_index(batched, new[3_000:3_100], 1, nprobe=None, ef_search=16, use_gpu=False)
    assert (found[:, 0] == np.arange(7_000, 7_100)).all()
