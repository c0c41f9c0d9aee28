"""How many IVF lists: recall@10 and batch-1 p50 of an owner's index by list count and nprobe.

For each vector set of bench/vector_sets.py (``--sets``), ``--size`` vectors go into one IVF owner
built by the library's own ``faiss_index.build_index("ivf", ...)`` with ``IVF_LISTS_PER_SQRT`` set to
each of ``--per-sqrt`` in turn (the lists' k-means, the HNSW quantizer from 1,024 lists, the
self-check: everything but the list count as shipped). At each ``--nprobes`` it reports recall@10
against exact search over 300 queries of the set (``bench.common.recall_against``) and the batch-1
p50 on one thread (``bench.common.time_calls``), with the build's seconds and the nprobe the
self-check chose. The list count that memnets ships (``IVF_LISTS_PER_SQRT``) was chosen from it
(docs/history.md, "IVF lists: 4*sqrt(n) instead of 2*sqrt(n)").

Usage: ``python -m bench.experiments.ivf_lists --out docs/results`` (300k vectors, every set, 2, 4
and 8 lists per sqrt(n)); ``--quick``: 60k vectors, the loose set.
"""

from __future__ import annotations

import time

import faiss
import numpy as np

from bench.common import CACHE_DIR, K, brute_numpy, parser, real_embeddings, recall_against, time_calls, write_result
from bench.figures import table
from bench.vector_sets import VECTOR_SETS, vector_set

QUERIES = 300
LATENCY_CALLS = 200


def sweep(name: str, size: int, per_sqrt: list[float], nprobes: list[int]) -> list[dict]:
    """One row per (lists per sqrt(n), nprobe) on the named set."""
    from memnets.retrieval import faiss_index
    from memnets.retrieval.ivf_growth import lists_in_use

    real = real_embeddings(CACHE_DIR) if name == "real" else None
    vectors, queries_for = vector_set(name, size, QUERIES, real)
    queries = np.ascontiguousarray(queries_for(size), dtype=np.float32)
    truth = brute_numpy(vectors, queries)
    labels = np.arange(size, dtype=np.int64)
    shipped, rows = faiss_index.IVF_LISTS_PER_SQRT, []
    try:
        for lists_per_sqrt in per_sqrt:
            faiss_index.IVF_LISTS_PER_SQRT = lists_per_sqrt  # the one setting under test
            started = time.perf_counter()
            state = faiss_index.build_index("ivf", vectors, labels, dim=vectors.shape[1], hnsw_m=32, ef_construction=40)
            build_s = time.perf_counter() - started
            nlist = lists_in_use(faiss.extract_index_ivf(state.index))
            for nprobe in nprobes:

                def search(batch, state=state, nprobe=nprobe):
                    return faiss_index.search_index(state, batch, K, nprobe=nprobe, ef_search=64, use_gpu=False)

                found = search(queries)[1]
                rows.append(
                    {
                        "set": name,
                        "n": size,
                        "lists_per_sqrt": lists_per_sqrt,
                        "nlist": nlist,
                        "nprobe": nprobe,
                        "recall@10": round(recall_against(found, truth), 3),
                        "p50_ms": round(time_calls(search, queries, LATENCY_CALLS)["p50_ms"], 3),
                        "build_s": round(build_s, 1),
                        "self_check_nprobe": state.nprobe,
                    }
                )
                print(rows[-1], flush=True)
    finally:
        faiss_index.IVF_LISTS_PER_SQRT = shipped
    return rows


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.ivf_lists", __doc__)
    p.add_argument("--sets", default=",".join(VECTOR_SETS), help="comma-separated vector sets (bench/vector_sets.py)")
    p.add_argument("--size", type=int, default=300_000, help="vectors in the owner")
    p.add_argument("--per-sqrt", default="2,4,8", help="comma-separated lists per sqrt(n) to compare")
    p.add_argument("--nprobes", default="16,32,64,128", help="comma-separated probe counts")
    args = p.parse_args(argv)
    sets, size = (["loose"], 60_000) if args.quick else (args.sets.split(","), args.size)
    per_sqrt = [float(value) for value in args.per_sqrt.split(",")]
    nprobes = [int(value) for value in args.nprobes.split(",")]
    rows = [row for name in sets for row in sweep(name, size, per_sqrt, nprobes)]
    text = table(list(rows[0]), [list(row.values()) for row in rows])
    print(text)
    settings = {"sets": sets, "size": size, "per_sqrt": per_sqrt, "nprobes": nprobes, "queries": QUERIES}
    path = write_result(args.out, "ivf_lists", settings, {"rows": rows})
    path.with_suffix(".md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
