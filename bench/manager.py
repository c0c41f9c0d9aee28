"""MemoryManager cost as its archive grows: time per observe and per query (RECALL) at 1k .. 1M
archived memories.

The archive is filled through the Archive API in batches with pre-computed vectors (real MiniLM
vectors of LoCoMo, scaled up with noise as in bench.search; contents are LoCoMo texts), so only
the timed observe / query calls run the encoder (the untrained backbone). Before each growth step
the archive is reopened with an index sized for the step's target (flat at 1k, "IVF<lists>,Flat"
above, lists as in bench.search), trained on the memories already there and extended in place
while the step's memories are ingested.
"""

from __future__ import annotations

import gc
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.common import (
    DEFAULT_NOISE,
    add_vector_options,
    encoder_from,
    latency_summary,
    locomo_texts,
    memory_and_query_vectors,
    parser,
    rss_mb,
    scaled,
    write_result,
)
from memnets.retrieval.faiss_index import ivf_lists

OWNER = "bench"
FULL_SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
INGEST_BATCH = 10_000
START = datetime(2023, 1, 1, tzinfo=UTC)


def index_kind(n: int) -> str:
    """The archive index for n memories: exact while small, IVF with the library's list count beyond."""
    return "flat" if n <= 1_000 else f"IVF{ivf_lists(n)},Flat"


def bulk_memories(start: int, stop: int, texts: list[str]):
    """Memory records start..stop-1 with LoCoMo texts, one minute apart."""
    from memnets.records import Memory

    return [
        Memory(
            id=f"bulk-{i}",
            owner=OWNER,
            t=START + timedelta(minutes=i),
            content=texts[i % len(texts)],
            importance=0.5,
            kind="observation",
        )
        for i in range(start, stop)
    ]


def run(
    vectors: np.ndarray,
    texts: list[str],
    queries: list[str],
    query_vectors: np.ndarray,
    sizes,
    directory: Path,
    *,
    calls: int = 20,
    encoder=None,
) -> list[dict]:
    """One row per size: ingest time, reopen time, and latency of observe, query and the bare search."""
    from memnets.memory.manager import MemoryManager
    from memnets.nn.encoder import MemoryEncoder
    from memnets.store.archive import Archive

    encoder = encoder or MemoryEncoder.from_pretrained()
    rows, have = [], 0
    for n in sizes:
        kind = index_kind(n)
        start = time.perf_counter()
        archive = Archive(directory, vectors.shape[1], index=kind)
        archive.search(query_vectors[0], 10, OWNER) if have else None  # trains the new index on what is there
        reopen_s = time.perf_counter() - start
        rss_before = rss_mb()
        start = time.perf_counter()
        for first in range(have, n, INGEST_BATCH):
            last = min(n, first + INGEST_BATCH)
            archive.upsert(bulk_memories(first, last, texts), vectors[first:last])
        ingest_s = time.perf_counter() - start
        archive.search(query_vectors[0], 10, OWNER)  # builds the index if it was not built yet
        have = n
        manager = MemoryManager(encoder, archive, owner=OWNER, resume=False, state_path=None)
        now = START + timedelta(minutes=n + 1)
        observe, query, recall, search = [], [], [], []
        for i in range(calls):
            begin = time.perf_counter()
            manager.observe(texts[(7 * i) % len(texts)], t=now + timedelta(seconds=i))
            observe.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            manager.recall(queries[i % len(queries)], now=now + timedelta(seconds=i))
            query.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            manager.recall(
                queries[(i + calls) % len(queries)],
                now=now + timedelta(seconds=i),
                query_vector=query_vectors[(i + calls) % len(query_vectors)],
            )
            recall.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            archive.search(query_vectors[i % len(query_vectors)], 15, OWNER)
            search.append(time.perf_counter() - begin)
        rows.append(
            {
                "n": n,
                "index": kind,
                "archive_count": archive.count(OWNER),
                "reopen_s": reopen_s,
                "ingest_s": ingest_s,
                "ingested": n - rows[-1]["n"] if rows else n,
                "rss_delta_mb": rss_mb() - rss_before,
                "observe": latency_summary(observe),
                "query": latency_summary(query),
                "recall_pre_encoded": latency_summary(recall),
                "archive_search": latency_summary(search),
            }
        )
        print(
            f"[manager] n={n}: observe p50 {rows[-1]['observe']['p50_ms']:.1f} ms, query p50 "
            f"{rows[-1]['query']['p50_ms']:.1f} ms, ingest {ingest_s:.1f}s",
            file=sys.stderr,
        )
        archive.close()
        del manager, archive
        gc.collect()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = parser("manager", __doc__)
    p.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=None,
        help="archive sizes (default 1k,10k,100k,1M; --quick: 1k,10k)",
    )
    p.add_argument("--calls", type=int, default=None, help="timed observe/query calls per size (default 12; --quick 6)")
    add_vector_options(p)
    args = p.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    calls = args.calls or (6 if args.quick else 12)
    encoder = encoder_from(args)
    base, query_vectors = memory_and_query_vectors(args, encoder.dim)
    memory_texts, questions = locomo_texts()
    vectors = scaled(base, max(sizes), noise=DEFAULT_NOISE)
    directory = Path(tempfile.mkdtemp(prefix="memnets-bench-archive-"))
    try:
        rows = run(vectors, memory_texts, questions, query_vectors, sizes, directory, calls=calls, encoder=encoder)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    ratio = None
    if len(rows) >= 2:
        ratio = rows[-1]["query"]["p50_ms"] / rows[0]["query"]["p50_ms"]
    growth = [
        {
            "from": a["n"],
            "to": b["n"],
            "size_x": b["n"] / a["n"],
            "query_p50_x": b["query"]["p50_ms"] / a["query"]["p50_ms"],
            "recall_pre_encoded_p50_x": b["recall_pre_encoded"]["p50_ms"] / a["recall_pre_encoded"]["p50_ms"],
            "search_p50_x": b["archive_search"]["p50_ms"] / a["archive_search"]["p50_ms"],
        }
        for a, b in zip(rows, rows[1:])
    ]
    write_result(
        args.out,
        "manager",
        {
            "sizes": list(sizes),
            "calls": calls,
            "ingest_batch": INGEST_BATCH,
            "encoder": args.encoder or "untrained all-MiniLM-L6-v2",
            "random_vectors": args.random,
            "manager": "MemoryManager defaults (heuristic importance/gate/scorer, k=5, fetch_factor=3)",
            "noise_std": DEFAULT_NOISE,
            "archive_key": None,
        },
        {"rows": rows, "growth": growth, "query_p50_ratio_last_over_first": ratio},
        [
            f"bulk memories are inserted with Archive.add in batches of {INGEST_BATCH} with pre-computed vectors "
            "(real LoCoMo MiniLM vectors, repeated with Gaussian noise beyond the real set)",
            "query = MemoryManager.recall(question) (encode + archive search + rescoring + MMR + touch); "
            "recall pre-encoded = the same with the question's vector given (no encoder); "
            "observe = MemoryManager.observe(text) (encode + importance + write); archive search = "
            "Archive.search(vector, 15) alone",
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
