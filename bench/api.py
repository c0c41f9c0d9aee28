"""``memnets.open`` with many users: latency of ``add`` and ``search`` at 10k memories per user, 10 users.

All users share one embedded store (SQLite + FAISS, 100k memories in all). The memories are
bulk-loaded through the store (``upsert`` in batches) with pre-computed vectors: real MiniLM vectors
of LoCoMo, scaled up with noise (bench.common). The timed calls then go through the public API,
``AgentMemory.add`` and ``AgentMemory.search``, with an encoder that looks those pre-computed vectors
up, so they measure everything but the encoder: argument checks, importance, the near-duplicate
check (a k=5 search of the user's memories), the write (one SQLite transaction with fsync) and the
index update for add; the owner-scoped search and decoding for search (also with a kind filter and
with a metadata filter, which the store applies before ranking). The encoder's own cost, one text
per call as ``add`` and ``search`` pay it, is measured separately with the untrained backbone.
Calls rotate over the users; every latency is measured on one thread (bench.common.single_thread).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

from bench.common import (
    BULK_START,
    DEFAULT_NOISE,
    add_vector_options,
    bulk_load,
    encoder_from,
    latency_summary,
    locomo_texts,
    memory_and_query_vectors,
    parser,
    rss_mb,
    scaled,
    single_thread,
    user_name,
    write_result,
)

FULL = {"users": 10, "per_user": 10_000, "adds": 200, "searches": 300, "encodes": 50}
QUICK = {"users": 3, "per_user": 1_000, "adds": 30, "searches": 60, "encodes": 10}
K = 5


class LookupEncoder:
    """Returns pre-computed vectors for known texts: the API's path without the encoder's cost."""

    def __init__(self, dim: int, tokenizer=None, fingerprint: str = "bench-lookup"):
        self.dim, self.tokenizer = dim, tokenizer
        self.fingerprint = f"{fingerprint}:{dim}"  # the store binds the encoder that filled it (TextEncoder)
        self.table: dict[tuple[str, str], np.ndarray] = {}

    def encode(self, texts, kind: str = "memory"):
        return np.stack([self.table[(kind, text)] for text in texts])


def run(
    sizes: dict,
    directory: Path,
    *,
    base: np.ndarray,
    query_base: np.ndarray,
    memory_texts: list[str],
    query_texts: list[str],
    backbone,
    noise: float = DEFAULT_NOISE,
) -> dict:
    """Load, then time adds and searches through AgentMemory, and ``backbone``'s cost per text.

    ``base``/``query_base``: unit vectors of ``memory_texts``/``query_texts``, scaled up with ``noise``
    to the sizes (at d=384 the default noise leaves a copy at cosine ~0.93 from its original, below the
    near-duplicate threshold, so every timed add stores a new memory).
    """
    from memnets.api import AgentMemory
    from memnets.store import open_store

    users, per_user = sizes["users"], sizes["per_user"]
    total = users * per_user
    vectors = scaled(base, total + sizes["adds"], noise=noise)
    encoder = LookupEncoder(base.shape[1])
    add_texts = [f"{memory_texts[i % len(memory_texts)]} (new {i})" for i in range(sizes["adds"])]
    for i, text in enumerate(add_texts):
        encoder.table[("memory", text)] = vectors[total + i]
    queries = [query_texts[i % len(query_texts)] for i in range(sizes["searches"])]
    for i, text in enumerate(queries):
        encoder.table[("query", text)] = query_base[i % len(query_base)]

    rss_before = rss_mb()
    store = open_store(directory, base.shape[1])
    ingest_s = bulk_load(store, vectors, memory_texts, users, per_user)
    memory = AgentMemory(store, encoder, owns_store=True)
    memory.search(queries[0], user=user_name(0), k=K)  # the index is caught up before timing
    timings: dict[str, list[float]] = {"add": [], "search": [], "search_kind": [], "search_metadata": []}
    with single_thread():
        for i, text in enumerate(add_texts):
            start = time.perf_counter()
            memory.add(text, user=user_name(i % users), t=BULK_START + timedelta(days=400, minutes=i))
            timings["add"].append(time.perf_counter() - start)
        for name, filters in (
            ("search", None),
            ("search_kind", {"kind": "plan"}),
            ("search_metadata", {"metadata": {"topic": 3}}),
        ):
            for i, query in enumerate(queries):
                start = time.perf_counter()
                hits = memory.search(query, user=user_name(i % users), k=K, filters=filters)
                timings[name].append(time.perf_counter() - start)
                assert len(hits) == K
    counts = {user_name(u): store.count(user_name(u)) for u in range(users)}
    rss_after = rss_mb()
    memory.close()

    encode = {"memory": [], "query": []}
    with single_thread():
        backbone.encode(["warm up"], kind="memory")
        for i in range(sizes["encodes"]):
            for kind, texts in (("memory", memory_texts), ("query", query_texts)):
                start = time.perf_counter()
                backbone.encode([texts[i % len(texts)]], kind=kind)
                encode[kind].append(time.perf_counter() - start)
    return {
        "users": users,
        "per_user": per_user,
        "memories": total,
        "k": K,
        "ingest_s": ingest_s,
        "ingest_per_s": total / ingest_s,
        "rss_mb": rss_after - rss_before,
        "counts_after": counts,
        **{name: latency_summary(values) for name, values in timings.items()},
        "encode_memory": latency_summary(encode["memory"]),
        "encode_query": latency_summary(encode["query"]),
    }


def parse_sizes(value: str) -> dict:
    """``users=2,per_user=250``: sizes of FULL to change (the others keep their --quick or full value)."""
    sizes = {}
    for part in filter(None, value.split(",")):
        key, _, number = part.partition("=")
        if key.strip() not in FULL or not number.strip().isdigit() or int(number) < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: expected KEY=N with N >= 1 and KEY one of {', '.join(FULL)}")
        sizes[key.strip()] = int(number)
    return sizes


def main(argv=None) -> None:
    p = parser("api", __doc__.splitlines()[0])
    p.add_argument("--sizes", type=parse_sizes, default={}, help=f"KEY=N,...: change sizes of {FULL}")
    p.add_argument(
        "--noise",
        type=float,
        default=DEFAULT_NOISE,
        help=f"std of the noise of scaled copies (default {DEFAULT_NOISE}; with --random of a small dimension, "
        "larger, so that copies stay below the near-duplicate threshold)",
    )
    add_vector_options(p)
    args = p.parse_args(argv)
    sizes = (QUICK if args.quick else FULL) | args.sizes
    directory = Path(tempfile.mkdtemp(prefix="memnets-bench-api-"))
    backbone = encoder_from(args)
    memory_texts, query_texts = locomo_texts()
    base, query_base = memory_and_query_vectors(args, backbone.dim)
    try:
        result = run(
            sizes,
            directory,
            base=base,
            query_base=query_base,
            memory_texts=memory_texts,
            query_texts=query_texts,
            backbone=backbone,
            noise=args.noise,
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    notes = [
        "add and search exclude the encoder (pre-computed vectors); encode_* is the untrained backbone on one "
        "text, one thread: add costs add + encode_memory, search costs search + encode_query",
        "add includes the near-duplicate check (a k=5 search) and an fsync'ed SQLite transaction",
        "search_metadata filters on a metadata field (1 memory in 10 matches), search_kind on kind (1 in 50)",
    ]
    settings = {**sizes, "index": "flat", "noise": args.noise, "random_vectors": args.random}
    path = write_result(args.out, "api", settings, result, notes)
    print(f"wrote {path}")
    for name in ("add", "search", "search_kind", "search_metadata", "encode_memory", "encode_query"):
        print(f"{name}: p50 {result[name]['p50_ms']:.2f} ms, p99 {result[name]['p99_ms']:.2f} ms")


if __name__ == "__main__":
    main()
