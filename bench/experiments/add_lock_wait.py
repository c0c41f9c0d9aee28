"""How long a search waits while a large add goes into an IVF owner (the retriever's lock).

An agent searches while another thread or request adds. FaissRetriever holds its lock while an add
updates an owner's index; a large add to an IVF owner works out its vectors' lists and the
self-check's neighbours among them before it takes the lock (``faiss_index.prepare_add``), so a
search waits only for the lists' update and the self-check's merge. This builds an IVF owner of
``--owner`` loose Gaussian vectors (bench.vector_sets), starts a thread that searches without pause,
adds ``--add`` more from the same distribution, and reports the add's seconds, the longest search
and the p99 during the add, and the searches done meanwhile.

Usage: ``python -m bench.experiments.add_lock_wait --out docs/results [--owner 200000 --add 100000]``.
"""

from __future__ import annotations

import threading
import time

from bench.common import latency_summary, parser, write_result
from bench.vector_sets import LOOSE_SPREAD, gaussian_clusters


def run(owner: int, add: int) -> dict:
    from memnets.retrieval.faiss_retriever import FaissRetriever

    vectors = gaussian_clusters(owner + add + 100, LOOSE_SPREAD, ordered=False, seed=0)
    retriever = FaissRetriever(
        vectors.shape[1], "ivf", use_gpu=False, exact_below=0
    )  # upkeep in the background, as a store runs it
    retriever.add([f"m{i}" for i in range(owner)], vectors[:owner], "owner")
    queries, waits, adding = vectors[-100:], [], threading.Event()
    done = threading.Event()

    def search_without_pause() -> None:
        n = 0
        while not done.is_set():
            start = time.perf_counter()
            retriever.search(queries[n % len(queries)][None], 10, "owner")
            if adding.is_set():
                waits.append(time.perf_counter() - start)
            n += 1

    searcher = threading.Thread(target=search_without_pause)
    searcher.start()
    time.sleep(0.5)
    adding.set()
    start = time.perf_counter()
    retriever.add([f"a{i}" for i in range(add)], vectors[owner : owner + add], "owner")
    add_s = time.perf_counter() - start
    done.set()
    searcher.join()
    return {
        "owner": owner,
        "add": add,
        "add_s": add_s,
        "searches_during_add": len(waits),
        "longest_search_ms": 1000 * max(waits, default=0.0),
        "search": latency_summary(waits),
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.add_lock_wait", __doc__)
    p.add_argument("--owner", type=int, default=200_000, help="vectors in the owner's index before the add")
    p.add_argument("--add", type=int, default=100_000, help="vectors in the one large add")
    args = p.parse_args(argv)
    owner, add = (20_000, 10_000) if args.quick else (args.owner, args.add)
    result = run(owner, add)
    print(
        f"add of {add:,} to {owner:,}: {result['add_s']:.2f} s; searches meanwhile {result['searches_during_add']}, "
        f"longest {result['longest_search_ms']:.0f} ms, p99 {result['search']['p99_ms']:.1f} ms"
    )
    write_result(args.out, "add_lock_wait", {"owner": owner, "add": add}, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
