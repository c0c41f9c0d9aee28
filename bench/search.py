"""Vector search at scale: FaissRetriever exact and approximate (IVF, HNSW) against numpy and torch
brute force, on real MiniLM embeddings of LoCoMo scaled up with noise (see bench.common).

Per size and method: build time (add, which builds a new owner's index, and the first search),
memory (RSS delta of the process while building, and the bytes the index stores per memory), latency
at batch 1 (p50, p99 over real question vectors), throughput at batch 1024 (queries per second) and
recall@10 against exact search. The approximate kinds (IVF, IVF-SQ8, HNSW) are built with the
retriever's defaults for the size and swept over nprobe / efSearch through the per-search options;
the default setting is the main row. Then, on the same index, 1,000 memories (the queries' exact
best matches) are deleted and the first search after it is timed, with a check that none comes back.

``--growth`` runs bench.search_growth instead: the default index grown in adds of 1k, 100k or all
at once, recall and latency at each checkpoint right after the add and after ``wait()``, its rebuilds
and the searches made during them.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import time

import numpy as np

from bench.common import (
    DEFAULT_NOISE,
    K,
    add_vector_options,
    brute_numpy,
    memory_and_query_vectors,
    parser,
    recall_against,
    rss_mb,
    scaled,
    single_thread,
    time_calls,
    write_result,
)
from bench.vector_sets import VECTOR_SETS
from memnets.retrieval.faiss_index import ivf_lists

OWNER = "bench"
# the targets at 1M memories with the default settings (the report's search section checks them)
RECALL_TARGET = 0.95
P50_TARGET_MS = 2.0  # batch 1
BUILD_TARGET_S = 120.0  # add + first search
DELETE_TARGET_MS = 50.0  # the first search after deleting 1,000 memories
NPROBES = (4, 8, 16, 32, 64, 128)
SWEEP_STOP = 0.99  # a sweep stops at the first setting with this recall: larger ones only cost time
EF_SEARCHES = (16, 32, 64, 128, 256)
QUICK_NPROBES = (8, 16, 32)
QUICK_EF_SEARCHES = (16, 32, 64)
FULL_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000,)
HNSW_UNMEASURED_MAX = 100_000
KINDS = ("ivf", "ivf-sq8", "hnsw")  # "ivf" is what index="auto" picks from 50,000 memories per owner
DELETES = 1_000


def brute_torch(data, queries, k: int = K, chunk: int = 64) -> np.ndarray:
    """Exact top-k row indices [B, k] by inner product with torch.topk (data: a torch tensor)."""
    import torch

    queries = torch.from_numpy(queries)
    with torch.inference_mode():
        parts = [
            torch.topk(queries[start : start + chunk] @ data.T, k, dim=1).indices
            for start in range(0, len(queries), chunk)
        ]
    return torch.cat(parts).numpy()


def time_batch(search, batch: np.ndarray, repeats: int) -> tuple[dict, object]:
    """Queries per second of a whole-batch search (best of ``repeats``) and the last result."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = search(batch)
        best = min(best, time.perf_counter() - start)
    return {"batch": len(batch), "seconds": best, "qps": len(batch) / best}, result


def log(row: dict) -> None:
    """One line per measured row on stderr, so a log shows results even of an interrupted run."""
    setting = next((f" {k}={row[k]}" for k in ("nprobe", "efSearch") if k in row), "")
    print(
        f"[search] n={row['n']:,} {row['method']}{setting}: build {row['build_s']:.1f}s, p50 "
        f"{row['latency']['p50_ms']:.3f} ms, p99 {row['latency']['p99_ms']:.3f} ms, "
        f"{row['throughput']['qps']:.0f} q/s, recall@10 {row['recall@10']:.3f}",
        file=sys.stderr,
        flush=True,
    )


def deleted_ids(truth: list[list[str]], count: int) -> list[str]:
    """The ``count`` memories whose deletion hurts most: the exact best matches of the queries,
    first the top-1 of every query, then the top-2, and so on."""
    doomed: dict[str, None] = {}
    for rank in range(K):
        for row in truth:
            if len(doomed) < count:
                doomed.setdefault(row[rank])
    return list(doomed)


def delete_figures(retriever, doomed: list[str], queries: np.ndarray, batch: np.ndarray, latency_calls: int) -> dict:
    """Delete ``doomed`` in one call, then time the first batch-1 search after it (nothing rebuilt
    in between), batch-1 latency after it, and check that no deleted memory comes back and every
    row still has k results."""
    start = time.perf_counter()
    removed = retriever.remove(doomed)
    remove_s = time.perf_counter() - start
    with single_thread():
        start = time.perf_counter()
        retriever.search(queries[:1], K, OWNER)
        first_ms = (time.perf_counter() - start) * 1000
    latency = time_calls(lambda q: retriever.search(q, K, OWNER)[0], queries, latency_calls)
    found, _ = retriever.search(batch, K, OWNER)
    gone = set(doomed)
    out = {
        "deleted": removed,
        "remove_ms": remove_s * 1000,
        "first_search_ms": first_ms,
        "latency_after": latency,
        "deleted_returned": sum(len(gone.intersection(row)) for row in found),
        "short_rows": sum(len(row) < K for row in found),
        "tombstones": retriever.stats(OWNER)["tombstones"],
    }
    if out["tombstones"]:  # HNSW: the compaction that would run in the background, timed here on its own
        start = time.perf_counter()
        retriever.compact(OWNER)
        out["compact_s"] = time.perf_counter() - start
    return out


def bench_size(
    data: np.ndarray,
    queries: np.ndarray,
    batch: np.ndarray,
    *,
    latency_calls: int,
    exact_calls: int,
    build_hnsw: bool,
    repeats: int,
    nprobes=NPROBES,
    ef_searches=EF_SEARCHES,
    kinds=KINDS,
    deletes: int = DELETES,
) -> tuple[list[dict], list[str]]:
    """All methods at one size: rows of results and notes."""
    import torch

    from memnets.retrieval.faiss_retriever import FaissRetriever

    n = len(data)
    ids = [f"m{i}" for i in range(n)]
    rows, notes = [], []

    def build(index: str, **kwargs):
        gc.collect()
        before = rss_mb()
        start = time.perf_counter()
        retriever = FaissRetriever(data.shape[1], index=index, use_gpu=False, **kwargs)
        retriever.add(ids, data, OWNER)  # a new owner's first batch builds (and trains) its index
        retriever.search(batch[:1], K, OWNER)
        seconds = time.perf_counter() - start
        return retriever, seconds, rss_mb() - before

    def search_with(retriever, **options):
        return lambda q: retriever.search(q, K, OWNER, **options)[0]

    # exact FAISS: the ground truth for recall
    exact, seconds, memory = build("flat")
    row = {
        "method": "FaissRetriever flat (exact)",
        "n": n,
        "build_s": seconds,
        "memory_mb": memory,
        "index_bytes_per_memory": exact.stats(OWNER)["bytes"] / n,
        "latency": time_calls(search_with(exact), queries, exact_calls),
    }
    row["throughput"], truth = time_batch(search_with(exact), batch, 1 if n >= 500_000 else repeats)
    row["recall@10"] = 1.0
    rows.append(row)
    log(row)
    del exact
    print(f"[search] n={n} flat done", file=sys.stderr)

    # brute force over the same array (no build, no copy: memory is the array itself); at large n on a
    # quarter of the batch, which gives the same queries per second in a quarter of the time
    tensor = torch.from_numpy(data)
    brute_batch = batch if n < 500_000 else batch[: len(batch) // 4]
    for name, function in (
        ("numpy brute force", lambda q: brute_numpy(data, q)),
        ("torch brute force", lambda q: brute_torch(tensor, q)),
    ):
        row = {
            "method": name,
            "n": n,
            "build_s": 0.0,
            "memory_mb": data.nbytes / 2**20,
            "latency": time_calls(function, queries, exact_calls),
        }
        row["throughput"], found = time_batch(function, brute_batch, 1 if n >= 500_000 else repeats)
        row["recall@10"] = recall_against([[f"m{i}" for i in r] for r in found], truth[: len(brute_batch)])
        rows.append(row)
        log(row)
    print(f"[search] n={n} brute force done", file=sys.stderr)
    doomed = deleted_ids(truth, min(deletes, n // 10))

    # the approximate kinds with their defaults for this size, each swept over nprobe / efSearch, then
    # the same index after deleting the queries' best matches (HNSW skipped above its build budget)
    auto = FaissRetriever(data.shape[1], "auto", use_gpu=False)._wanted_kind(n)
    for kind in kinds:
        if kind == "hnsw" and not build_hnsw:
            continue
        retriever, seconds, memory = build(kind, exact_below=0)
        stats = retriever.stats(OWNER)
        if "nlist" in stats:
            method, knob, option = f"FaissRetriever {kind} (IVF{stats['nlist']})", "nprobe", "nprobe"
            values = sorted({p for p in nprobes if p <= stats["nlist"]} | {stats["nprobe"]})
            default = stats["nprobe"]
        else:
            method = f"FaissRetriever {kind} (M={retriever.hnsw_m}, efConstruction={retriever.ef_construction})"
            knob, option = "efSearch", "ef_search"
            values, default = sorted(set(ef_searches) | {retriever.ef_search}), retriever.ef_search
        swept = sweep(
            method,
            knob,
            values,
            lambda value, r=retriever, o=option: search_with(r, **{o: value}),
            n,
            seconds,
            memory,
            queries,
            batch,
            truth,
            latency_calls,
            repeats,
            default,
        )
        for row in swept:
            row["index_bytes_per_memory"] = stats["bytes"] / n
            row["auto_default"] = row["default"] and kind == auto  # what index="auto" does at this size
        default_row = next(row for row in swept if row["default"])
        default_row["delete"] = delete_figures(retriever, doomed, queries, batch, latency_calls)
        print(
            f"[search] n={n:,} {method} after deleting {len(doomed):,}: {default_row['delete']}",
            file=sys.stderr,
            flush=True,
        )
        rows.extend(swept)
        del retriever
        gc.collect()
        print(f"[search] n={n} {kind} done", file=sys.stderr)
    return rows, notes


def sweep(
    method, knob, values, searcher, n, build_s, memory_mb, queries, batch, truth, latency_calls, repeats, default
) -> list[dict]:
    """One row per knob value (until recall reaches SWEEP_STOP; the default is always measured); the
    smallest value meeting RECALL_TARGET is marked chosen, the retriever's default marked default."""
    rows = []
    for value in values:
        if rows and rows[-1]["recall@10"] >= SWEEP_STOP and value > default:
            break
        search = searcher(value)
        throughput, found = time_batch(search, batch, repeats)
        rows.append(
            {
                "method": method,
                "n": n,
                knob: value,
                "build_s": build_s,
                "memory_mb": memory_mb,
                "latency": time_calls(search, queries, latency_calls),
                "throughput": throughput,
                "recall@10": recall_against(found, truth),
                "chosen": False,
                "default": value == default,
            }
        )
        log(rows[-1])
    good = [row for row in rows if row["recall@10"] >= RECALL_TARGET]
    (good[0] if good else rows[-1])["chosen"] = True
    return rows


def run(
    base: np.ndarray,
    queries: np.ndarray,
    sizes,
    *,
    noise: float = DEFAULT_NOISE,
    latency_calls: int = 300,
    exact_calls: int = 100,
    exact_budget_s: float = 20.0,
    hnsw_budget_s: float = 120.0,
    repeats: int = 2,
    batch_size: int = 1024,
    nprobes=NPROBES,
    ef_searches=EF_SEARCHES,
    kinds=KINDS,
    deletes: int = DELETES,
) -> tuple[dict, list[str]]:
    """Benchmark every size; exact methods get fewer batch-1 calls at large n (about exact_budget_s each);
    HNSW is skipped at a size where its build, extrapolated from the previous size, would pass hnsw_budget_s."""
    batch = queries[np.arange(batch_size) % len(queries)]
    rows, notes, last_hnsw = [], [], None
    for n in sizes:
        data = scaled(base, n, noise=noise)
        # an exact search reads every vector (~n*d*4 bytes at ~2 GB/s); keep its batch-1 calls within the budget
        calls = int(min(exact_calls, max(20, exact_budget_s / max(n * data.shape[1] * 4 / 2e9, 1e-6))))
        if last_hnsw is None:  # nothing to extrapolate from: build only where it is surely affordable
            build_hnsw = n <= HNSW_UNMEASURED_MAX
            if not build_hnsw:
                notes.append(
                    f"HNSW skipped at n={n:,}: no smaller size measured its build time "
                    f"(built without one only up to {HNSW_UNMEASURED_MAX:,})"
                )
        else:
            predicted = last_hnsw["build_s"] * (n / last_hnsw["n"]) * 1.2
            build_hnsw = predicted <= hnsw_budget_s
            if not build_hnsw:
                notes.append(
                    f"HNSW skipped at n={n:,}: its build, extrapolated from {last_hnsw['build_s']:.0f} s at "
                    f"n={last_hnsw['n']:,}, would take about {predicted / 60:.0f} min on this machine "
                    f"(budget {hnsw_budget_s:.0f} s)"
                )
        size_rows, size_notes = bench_size(
            data,
            queries,
            batch,
            latency_calls=latency_calls,
            exact_calls=calls,
            build_hnsw=build_hnsw,
            repeats=repeats,
            nprobes=nprobes,
            ef_searches=ef_searches,
            kinds=kinds,
            deletes=deletes,
        )
        last_hnsw = next((r for r in size_rows if r["method"].startswith("FaissRetriever hnsw")), last_hnsw)
        notes.append(f"load at n={n:,}: {' / '.join(f'{x:.2f}' for x in os.getloadavg())} (1 / 5 / 15 min)")
        rows += size_rows
        notes += size_notes
        del data
        gc.collect()
    return {"k": K, "recall_target": RECALL_TARGET, "rows": rows}, notes


def main(argv: list[str] | None = None) -> int:
    p = parser("search", __doc__)
    p.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=None,
        help="comma-separated memory counts (default 10k,100k,1M; --quick: 10k)",
    )
    p.add_argument(
        "--hnsw-budget",
        type=float,
        default=120.0,
        help="skip HNSW where its extrapolated build time passes this many seconds (default 120)",
    )
    p.add_argument(
        "--kinds",
        type=lambda s: tuple(s.split(",")),
        default=KINDS,
        help=f"approximate FaissRetriever kinds to measure (default {','.join(KINDS)})",
    )
    p.add_argument(
        "--deletes",
        type=int,
        default=DELETES,
        help=f"memories deleted before the after-delete figures (default {DELETES:,}; at most n/10)",
    )
    p.add_argument(
        "--growth",
        action="store_true",
        help="the growth mode instead (bench.search_growth): recall and latency of the default index as it "
        "grows through --sizes (default 10k,100k,300k,1M; --quick: 10k,60k) in adds of --adds",
    )
    p.add_argument(
        "--adds",
        type=lambda s: tuple(0 if x == "all" else int(x) for x in s.split(",")),
        default=None,
        help="growth mode: comma-separated add sizes, 'all' for everything at once (default 1000,100000,all; "
        "--quick: 1000,10000,all)",
    )
    p.add_argument(
        "--sets",
        type=lambda s: tuple(s.split(",")),
        default=VECTOR_SETS,
        help=f"growth mode: comma-separated vector sets (default {','.join(VECTOR_SETS)}; bench/vector_sets.py)",
    )
    p.add_argument(
        "--exact-below",
        type=int,
        default=None,
        help="growth mode: the retriever's flat -> IVF switch (default its own, AUTO_EXACT_BELOW = 50,000)",
    )
    add_vector_options(p)
    args = p.parse_args(argv)
    if args.growth:
        return growth_main(args)
    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    nprobes, ef_searches = (QUICK_NPROBES, QUICK_EF_SEARCHES) if args.quick else (NPROBES, EF_SEARCHES)
    base, queries = memory_and_query_vectors(args)
    settings = {
        "sizes": list(sizes),
        "random_vectors": args.random,
        "k": K,
        "noise_std": DEFAULT_NOISE,
        "real_memories": len(base),
        "query_vectors": len(queries),
        "batch": 1024,
        "hnsw_budget_s": args.hnsw_budget,
        "ivf_lists": {n: ivf_lists(n) for n in sizes},
        "nprobes": list(nprobes),
        "kinds": list(args.kinds),
        "deletes": args.deletes,
        "ef_searches": list(ef_searches),
        "latency_threads": 1,
        "throughput_threads": __import__("faiss").omp_get_max_threads(),
    }
    results, notes = run(
        base,
        queries,
        sizes,
        hnsw_budget_s=args.hnsw_budget,
        latency_calls=100 if args.quick else 200,
        nprobes=nprobes,
        ef_searches=ef_searches,
        kinds=args.kinds,
        deletes=args.deletes,
    )
    notes.insert(
        0,
        "batch-1 latency is measured on one thread (torch, BLAS, FAISS OpenMP), throughput at batch "
        "1024 on all cores; memory MB is the RSS growth while building, index B/memory what the "
        "index stores per memory (FaissRetriever keeps one copy: the index itself)",
    )
    notes.insert(
        1,
        f"after delete: {args.deletes:,} memories (at most n/10), the exact best matches of the queries, "
        "removed in one call; then the first batch-1 search (nothing rebuilt in between), batch-1 p50, "
        "and a batch search checked for deleted ids and rows short of k. HNSW keeps tombstones; its "
        "compaction (a background rebuild in use) is timed on its own",
    )
    notes.insert(
        0,
        f"memories: {len(base):,} real MiniLM vectors (LoCoMo turns + observation facts); larger sizes "
        f"repeat them with Gaussian noise (std {DEFAULT_NOISE} per dimension) and renormalise, so each real "
        f"memory has near-duplicates. Queries: the {len(queries):,} LoCoMo questions.",
    )
    write_result(args.out, "search", settings, results, notes)
    return 0


def growth_main(args) -> int:
    """``--growth``: run bench.search_growth, print its tables, save ``search_growth.json`` and the
    tables as ``search_growth.md``."""
    from bench import search_growth

    checkpoints = args.sizes or (search_growth.QUICK_CHECKPOINTS if args.quick else search_growth.CHECKPOINTS)
    adds = args.adds or (search_growth.QUICK_ADDS if args.quick else search_growth.ADDS)
    bad = [a for a in adds if a < 0]
    if bad:
        raise SystemExit(f"python -m bench.search: --adds must be sizes >= 1 or 'all', got {bad}")
    results, notes = search_growth.run_growth(
        memory_and_query_vectors(args), checkpoints, adds, sets=args.sets, exact_below=args.exact_below
    )
    settings = {
        "sets": list(args.sets),
        "random_vectors": args.random,
        "exact_below": args.exact_below,
        "checkpoints": list(checkpoints),
        "adds": list(adds),
        "k": K,
        "noise_std": DEFAULT_NOISE,
        "recall_queries": search_growth.RECALL_QUERIES,
        "latency_calls": search_growth.LATENCY_CALLS,
        "agent_interval_s": search_growth.AGENT_INTERVAL_S,
        "throughput_threads": __import__("faiss").omp_get_max_threads(),
    }
    path = write_result(args.out, "search_growth", settings, results, notes)
    tables = f"{search_growth.growth_table(results)}\n\n{search_growth.rebuild_table(results)}\n"
    print(tables)
    path.with_suffix(".md").write_text(tables)
    print(f"written {path} and {path.with_suffix('.md').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
