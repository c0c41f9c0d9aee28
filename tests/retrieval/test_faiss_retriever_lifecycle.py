"""FaissRetriever's end of life: close() stops and waits for its upkeep and for calls in flight, later
calls fail clearly, and the exit closes the retrievers nobody closed (a process that ended with
upkeep inside FAISS crashed with SIGSEGV)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest
from paused_helpers import PausedBuild

import memnets.retrieval.faiss_retriever as module
from memnets.retrieval.faiss_retriever import FaissRetriever, RetrieverClosed

DIM = 16
ROOT = Path(__file__).resolve().parents[2]


def unit_vectors(n: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype("float32")
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def upkeep_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("faiss-upkeep")]


def test_close_stops_and_waits_for_the_upkeep_in_flight_and_later_calls_fail(caplog):
    retriever = PausedBuild(DIM, "hnsw", use_gpu=False, exact_below=0, compact_at=0.2)
    ids = [f"m{i}" for i in range(500)]
    retriever.add(ids, unit_vectors(500), "o")
    retriever.remove(ids[:100])  # 20% tombstones: a compaction starts in the background
    assert retriever.started.wait(30)
    with caplog.at_level("INFO", logger=module.__name__):
        assert retriever.close(timeout=0) is False  # told to stop; its build has not even begun
        assert retriever.closed and upkeep_threads()
        done: list[bool] = []
        closer = threading.Thread(target=lambda: done.append(retriever.close()))
        closer.start()
        closer.join(0.3)
        assert closer.is_alive()  # close() waits for the rebuild in flight
        retriever.go.set()
        closer.join(30)
    assert done == [True] and not upkeep_threads()
    dropped = [r.getMessage() for r in caplog.records if getattr(r, "upkeep", {}).get("event") == "dropped"]
    assert dropped == ["dropped the rebuild of 'o': the retriever was closed"]  # never swapped in
    assert retriever.wait() and retriever.close()  # both safe to call again
    calls = {
        "add": lambda: retriever.add(["x"], unit_vectors(1), "o"),
        "remove": lambda: retriever.remove(ids[200:201]),
        "search": lambda: retriever.search(unit_vectors(1), 3, "o"),
        "__len__": lambda: len(retriever),
        "ids": lambda: retriever.ids("o"),
        "compact": retriever.compact,
        "save": lambda: retriever.save("unused"),
    }
    for name, call in calls.items():
        with pytest.raises(RetrieverClosed, match=rf"FaissRetriever\.{name}: the retriever is closed"):
            call()
    assert not Path("unused").exists()


def test_close_waits_for_an_add_preparing_its_lists_outside_the_lock(monkeypatch):
    """A large add to an IVF owner runs FAISS before it takes the lock; close() waits for that too,
    and the add then fails as closed instead of writing into a closed retriever."""
    retriever = FaissRetriever(DIM, "ivf", use_gpu=False, exact_below=0, background=False)
    retriever.add([f"m{i}" for i in range(400)], unit_vectors(400), "o")
    inside, release, real_prepare = threading.Event(), threading.Event(), module.prepare_add

    def paused(state, batch):
        inside.set()
        assert release.wait(30)
        return real_prepare(state, batch)

    monkeypatch.setattr(module, "prepare_add", paused)
    errors: list[BaseException] = []

    def add() -> None:
        try:
            retriever.add([f"n{i}" for i in range(1100)], unit_vectors(1100, seed=1), "o")
        except RetrieverClosed as error:
            errors.append(error)

    adder = threading.Thread(target=add)
    adder.start()
    assert inside.wait(30)
    assert retriever.close(timeout=0.2) is False  # the preparation still runs FAISS
    release.set()
    assert retriever.close(timeout=30) is True
    adder.join(30)
    assert len(errors) == 1 and "FaissRetriever.add: the retriever is closed" in str(errors[0])


def test_the_exit_hook_closes_the_retrievers_nobody_closed(monkeypatch):
    live: weakref.WeakSet = weakref.WeakSet()
    monkeypatch.setattr(module, "_LIVE", live)
    forgotten = FaissRetriever(DIM, use_gpu=False)
    forgotten.add(["a"], unit_vectors(1), "o")
    closed = FaissRetriever(DIM, use_gpu=False)
    closed.close()
    assert set(live) == {forgotten}  # a closed retriever leaves the registry
    module._close_open_retrievers()
    assert forgotten.closed and not live


@pytest.mark.slow
def test_a_script_that_ends_during_upkeep_exits_cleanly_every_time():
    """The exit-time crash: tests/retrieval/upkeep_exit_helpers.py returns while four owners' rebuilds are in their
    k-means. Before the exit closed the retrievers, all four upkeep threads were still alive when the
    interpreter began to finalise (20 of 20 runs), and 2 of 72 runs died with SIGSEGV (139) on 2 busy
    cores; now none is left and every run exits with 0. About ten seconds a run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
    runs = []
    for seed in range(6):
        run = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "retrieval" / "upkeep_exit_helpers.py"), str(seed)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        runs.append((run.returncode, run.stdout.splitlines(), run.stderr[-2000:]))
    assert [code for code, _, _ in runs] == [0] * len(runs), runs
    for _, lines, _ in runs:
        assert lines[0].startswith("returning with 4 rebuilds started"), lines
        assert lines[-1].startswith("upkeep threads left at exit: 0 "), lines
