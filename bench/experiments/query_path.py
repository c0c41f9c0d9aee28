"""One query end to end through ``memnets.open`` (SQLite + FAISS) at 100k memories: p50 / p99 and its parts.

Per encoder backend (``--backends``, default torch and int8), one user's store is filled with
``--memories`` memories through the store, with vectors of that backend's encoder: the first
``--base`` LoCoMo memory texts (turns and observation facts) encoded by it, repeated with noise to
the size (:func:`bench.common.scaled`). The store records that encoder's identity, so
``memnets.open(pack=...)`` opens it as its own. The timed call is the public one, one question at a
time as an agent asks: ``AgentMemory.search(question, user=..., k=5)`` with the pack's
LearnedScorer (the store's ``fetch_factor * k`` candidates re-scored). Queries are LoCoMo questions.

Then the same questions once more, part by part, each part timed alone in the order search runs
them: ``tokenise`` (``encoder.tokenize``), ``encode`` (``encoder.encode``: the tokeniser included,
so the model's share is ``encode - tokenise``), ``index`` (the store's FAISS retriever alone, for
the candidates), ``store read`` (``Archive.search`` minus ``index``: its checks and the SQLite read
and decode of the candidates), ``vectors`` (``Archive.vectors`` of the candidates) and ``score``
(``LearnedScorer.score``). The parts' p50s add up to about the end-to-end p50.

Threads: ``--threads`` (default 2, the cores of the machine the target is for) for torch, ONNX
Runtime (its sessions take torch's thread count when they are made) and BLAS/OpenMP (FAISS).

Usage: ``python -m bench.experiments.query_path --pack checkpoints/pack`` (100k memories, 300 queries);
``--quick``: 5,000 memories, 30 queries.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import (
    DEFAULT_NOISE,
    bulk_load,
    latency_summary,
    locomo_texts,
    parser,
    scaled,
    user_name,
    write_result,
)

K = 5
PARTS = ("tokenise", "encode", "index", "store_read", "vectors", "score")


def fill(directory: Path, encoder, texts: list[str], memories: int, noise: float) -> float:
    """A store at ``directory`` bound to ``encoder``, with ``memories`` memories of one user whose
    vectors are ``encoder``'s of ``texts``, scaled up; returns the seconds the fill took."""
    from memnets.memory.writes import embed
    from memnets.store import open_store
    from memnets.store.identity import bind_encoder

    vectors = scaled(embed(encoder, texts), memories, noise=noise)
    store = open_store(directory, encoder.dim)
    try:
        bind_encoder(store, encoder)
        return bulk_load(store, vectors, texts, users=1, per_user=memories)
    finally:
        store.close()


def timed(call, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = call(*args, **kwargs)
    return time.perf_counter() - start, result


def parts(memory, question: str, user: str) -> dict[str, float]:
    """Seconds of each part of one search (see the module docstring), run as search runs them."""
    from memnets.memory.writes import embed
    from memnets.timeutil import now

    encoder, store, fetch = memory.encoder, memory.store, memory.config.fetch_factor * K
    seconds = {"tokenise": timed(encoder.tokenize, [question], "query")[0]}
    seconds["encode"], vectors = timed(embed, encoder, [question], "query")
    vector = vectors[0]
    seconds["index"] = timed(store._retriever.search, vector[None, :], fetch, user)[0]  # the FAISS search alone
    search_s, candidates = timed(store.search, vector, fetch, user)
    seconds["store_read"] = max(0.0, search_s - seconds["index"])
    found = [m for m, _ in candidates]
    seconds["vectors"], memory_vectors = timed(store.vectors, [m.id for m in found], user)
    seconds["score"] = timed(
        memory.scorer.score, found, question, now(), query_vector=vector, memory_vectors=memory_vectors
    )[0]
    return seconds


def run_backend(
    pack_path: Path, backend: str, directory: Path, *, memories: int, base: int, queries: list[str], noise: float
) -> dict:
    """Fill a store for ``backend``'s encoder, then time ``queries`` end to end and part by part."""
    import memnets
    from memnets.pack import load_pack

    pack = load_pack(pack_path, backend=backend)
    texts = locomo_texts()[0][:base]
    fill_s = fill(directory, pack.encoder, texts, memories, noise)
    user = user_name(0)
    with memnets.open(directory, pack=pack) as memory:
        if memory.scorer is None:
            raise SystemExit(f"{pack_path}: the pack has no scorer weights; the query path needs its LearnedScorer")
        for question in queries[:5]:  # warm-up: the index is built or loaded, caches filled
            memory.search(question, user=user, k=K)
        end_to_end = []
        for question in queries:
            seconds, hits = timed(memory.search, question, user=user, k=K)
            if len(hits) != K:
                raise RuntimeError(f"search returned {len(hits)} hits, expected {K}")
            end_to_end.append(seconds)
        split = [parts(memory, question, user) for question in queries]
        index_kind = type(memory.store._retriever).__name__
    print(f"[query_path] {backend}: end-to-end p50 {1000 * np.median(end_to_end):.2f} ms", file=sys.stderr)
    return {
        "fill_s": fill_s,
        "fingerprint": pack.encoder.fingerprint,
        "retriever": index_kind,
        "end_to_end": latency_summary(end_to_end),
        "parts": {name: latency_summary([row[name] for row in split]) for name in PARTS},
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.query_path", __doc__)
    p.add_argument(
        "--pack", type=Path, default=Path("checkpoints/pack"), help="a memory pack (default checkpoints/pack)"
    )
    p.add_argument("--backends", default="torch,int8", help="encoder backends, comma-separated (default torch,int8)")
    p.add_argument("--memories", type=int, default=None, help="memories in the store (default 100000; --quick 5000)")
    p.add_argument("--base", type=int, default=2048, help="distinct LoCoMo texts encoded for the fill (default 2048)")
    p.add_argument("--queries", type=int, default=None, help="questions timed (default 300; --quick 30)")
    p.add_argument("--threads", type=int, default=2, help="torch / ONNX Runtime / BLAS threads (default 2)")
    args = p.parse_args(argv)
    if not (args.pack / "manifest.json").is_file():
        p.error(f"--pack: {args.pack} is not a memory pack (no manifest.json)")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    memories = args.memories or (5_000 if args.quick else 100_000)
    count = args.queries or (30 if args.quick else 300)
    questions = locomo_texts()[1]
    queries = [questions[i % len(questions)] for i in range(count)]

    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(args.threads)
    results = {}
    with threadpool_limits(args.threads):
        for backend in backends:
            directory = Path(tempfile.mkdtemp(prefix=f"memnets-bench-query-{backend}-"))
            try:
                results[backend] = run_backend(
                    args.pack,
                    backend,
                    directory,
                    memories=memories,
                    base=args.base,
                    queries=queries,
                    noise=DEFAULT_NOISE,
                )
            finally:
                shutil.rmtree(directory, ignore_errors=True)
    settings = {
        "pack": str(args.pack),
        "memories": memories,
        "base_texts": args.base,
        "queries": count,
        "k": K,
        "threads": args.threads,
        "noise": DEFAULT_NOISE,
        "store": "SQLite + FAISS (memnets.open, the store's default index for the size)",
    }
    notes = [
        "end_to_end: AgentMemory.search(question, k=5) with the pack's LearnedScorer, one question per call",
        "parts: each part timed alone; encode includes tokenise; store_read = Archive.search - index",
    ]
    path = write_result(args.out, "query_path", settings, results, notes)
    print(f"wrote {path}")
    for backend, result in results.items():
        row = ", ".join(f"{name} {result['parts'][name]['p50_ms']:.2f}" for name in PARTS)
        e2e = result["end_to_end"]
        print(f"{backend}: end to end p50 {e2e['p50_ms']:.2f} ms, p99 {e2e['p99_ms']:.2f} ms; parts p50 ms: {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
