"""Servers of one checkout started with different `memnets serve http` flags, loaded in turn (A/B/C).

``bench.experiments.load --before`` compares two checkouts; this compares settings of one: each
``NAME=FLAGS`` variant (e.g. ``asyncio=--loop asyncio``) serves a store of its own filled
alike (``bench.experiments.load.fill``, ``--memories`` over 10 users), all are started up front, and
each is loaded in turn by ``--clients`` closed-loop clients for ``--seconds`` (20 % adds), ``--rounds``
times in the order A B C, C B A, ... (drift cancels). Per run: requests/s, the server's CPU per
request, its event loop's (the main thread's, from /proc: the HTTP protocol, routing and answers),
the mean encode batch; then each variant's means and their ratios to the first variant's.
On a shared machine only these ratios mean anything.

    python -m bench.experiments.server_flags --variants "asyncio=--loop asyncio" "uvloop=--loop uvloop" \\
        --rounds 3 --out docs/results/server_flags.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from bench.experiments.load import fill, fill_data, load_average, measure_level, run_clients
from memnets.server.testing import ServerProcess

FIGURES = ("throughput_rps", "server_cpu_ms_per_request", "loop_cpu_ms_per_request")


def variant(text: str) -> tuple[str, list[str]]:
    name, sep, flags = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"a variant is NAME=FLAGS, got {text!r}")
    return name, shlex.split(flags)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.server_flags", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--variants", type=variant, nargs="+", required=True, metavar="NAME=FLAGS")
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="save the runs and means as JSON here")
    args = parser.parse_args(argv)
    names = [name for name, _ in args.variants]
    if len(set(names)) != len(names):
        parser.error(f"--variants: names must differ, got {names}")
    if not 1 <= args.memories <= 1_000_000 or not 0 < args.seconds <= 120 or not 1 <= args.clients <= 200:
        parser.error("bounded runs only: --memories 1..1M, --seconds up to 120, 1..200 clients")
    if not 1 <= args.rounds <= 10:
        parser.error(f"--rounds must be in 1..10, got {args.rounds}")
    work = Path(tempfile.mkdtemp(prefix="memnets-bench-flags-"))
    texts, vectors, queries = fill_data(args.memories, None)
    servers: dict[str, ServerProcess] = {}
    report = {"variants": dict(args.variants), "load_before": load_average(), "runs": []}
    try:
        for name, flags in args.variants:
            location = str(work / f"memory-{uuid.uuid4().hex[:8]}")
            fill(location, texts, vectors, 10, {})
            servers[name] = ServerProcess(location, *flags)
        for server in servers.values():
            server.wait_ready(timeout=600)
            run_clients(server.url, 1, 2.0, 10, 0.2, queries, 0)  # not counted: a process's first requests are slow
        level = SimpleNamespace(seconds=args.seconds, users=10, add_share=0.2)
        order = [name for r in range(args.rounds) for name in (names if r % 2 == 0 else names[::-1])]
        for n, name in enumerate(order):
            row = {"variant": name, **measure_level(servers[name], args.clients, level, queries, seed=n)}
            report["runs"].append(row)
            print(json.dumps({key: row[key] for key in ("variant", *FIGURES, "mean_encode_batch", "errors", "load")}))
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    means = {
        name: {key: float(np.mean([r[key] for r in report["runs"] if r["variant"] == name])) for key in FIGURES}
        for name in names
    }
    report["means"] = {
        name: {
            **{k: round(v, 3) for k, v in m.items()},
            **{f"{k}_vs_{names[0]}": round(v / means[names[0]][k], 3) for k, v in m.items()},
        }
        for name, m in means.items()
    }
    report["load_after"] = load_average()
    print(json.dumps(report["means"], indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
