"""A script that ends while the FaissRetriever's background upkeep is inside FAISS: the exit-time crash.

Run as ``python tests/retrieval/upkeep_exit_helpers.py SEED [--owners N] [--size N] [--step N] [--linger S]``:
each owner gets ``size`` clustered 384-d unit vectors in adds of ``step`` (``exact_below`` a little
under ``size``, so that the last add starts a flat -> IVF rebuild in the background), a few batch-1
searches and deletions; once every owner's rebuild has started it waits ``linger`` seconds (the
rebuild is then in its k-means) and returns, closing nothing. Before retrievers were closed at exit
(``FaissRetriever.close`` from an ``atexit`` hook), the upkeep threads ran on in FAISS while the
process unloaded FAISS and OpenBLAS, and some of these runs died with SIGSEGV (exit code 139).

Its last ``atexit`` hook (registered before memnets is imported, so run after memnets' own) prints
how many upkeep threads are still alive as the interpreter starts to finalise: the crash's premise,
seen in every run, where the crash itself comes in a few percent of them. The slow test of
tests/retrieval/test_faiss_retriever_lifecycle.py runs it in a loop and wants 0 threads and exit code 0.
"""

from __future__ import annotations

import argparse
import atexit
import faulthandler
import logging
import sys
import threading
import time

import numpy as np

DIM = 384
CLUSTERS = 64


def report_upkeep_left(returned: list[float]) -> None:
    """Print the upkeep threads alive now (run as the last atexit hook) and the seconds since main returned."""
    left = [thread.name for thread in threading.enumerate() if thread.name.startswith("faiss-upkeep")]
    waited = time.monotonic() - returned[0] if returned else float("nan")
    print(f"upkeep threads left at exit: {len(left)} ({waited:.2f} s after returning)", flush=True)


class Started(logging.Handler):
    """Counts the retriever's upkeep "start" log records."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self.changed = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "upkeep", {}).get("event") == "start":
            self.count += 1
            self.changed.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed", type=int)
    parser.add_argument("--owners", type=int, default=4)
    parser.add_argument("--size", type=int, default=40_000, help="vectors per owner")
    parser.add_argument("--step", type=int, default=10_000, help="vectors per add")
    parser.add_argument("--linger", type=float, default=0.2, help="seconds between the rebuilds' start and return")
    args = parser.parse_args(argv)
    faulthandler.enable()
    returned: list[float] = []
    atexit.register(report_upkeep_left, returned)
    from memnets.retrieval import faiss_retriever
    from memnets.retrieval.faiss_retriever import FaissRetriever

    started = Started()
    faiss_retriever.logger.addHandler(started)
    faiss_retriever.logger.setLevel(logging.INFO)
    rng = np.random.default_rng(args.seed)
    centres = rng.standard_normal((CLUSTERS, DIM)).astype("float32")
    retriever = FaissRetriever(DIM, "auto", use_gpu=False, exact_below=args.size - args.step // 2)
    owners = [f"owner-{number}" for number in range(args.owners)]
    data = {}
    for owner in owners:
        vectors = centres[rng.integers(0, CLUSTERS, args.size)]
        vectors += 0.5 * rng.standard_normal(vectors.shape).astype("float32")
        data[owner] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for start in range(0, args.size, args.step):  # the owners in turn, so that their rebuilds overlap
        for owner in owners:
            ids = [f"{owner}/{i}" for i in range(start, start + args.step)]
            retriever.add(ids, data[owner][start : start + args.step], owner)
    for owner in owners:
        for row in range(20):
            retriever.search(data[owner][row : row + 1], 10, owner)
        retriever.remove([f"{owner}/{i}" for i in range(0, 99)])
        retriever.search(data[owner][200:201], 10, owner)
    deadline = time.monotonic() + 60
    while started.count < args.owners and time.monotonic() < deadline:
        started.changed.wait(0.05)
        started.changed.clear()
    time.sleep(args.linger)
    print(f"returning with {started.count} rebuilds started, {len(retriever)} vectors", flush=True)
    returned.append(time.monotonic())
    return 0


if __name__ == "__main__":
    sys.exit(main())
