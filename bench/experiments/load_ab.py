"""Before/after load comparison: two servers, one from another checkout, loaded in turn in one run.

On a machine shared with other work the load benchmark's figures move with the machine's load more
than with a server change, so a "before" run and an "after" run taken minutes apart compare the
loads as much as the servers. This runs both in one process and in alternation: a server from
``--before`` (a checkout of memnets, put first on the child's ``PYTHONPATH``) and one from this
checkout, each on a store of its own filled alike (bench.experiments.load's fill), both started up
front; then ``--rounds`` rounds in the order before, after, after, before, ... of ``--clients``
closed-loop clients for ``--seconds`` against one server while the other idles, each followed by
the encoder's own limit at the batch that server formed (:func:`bench.experiments.load.with_limit`).
Printed and saved: every round's row (the load table's columns) and, per variant, the mean of
requests/s, searches/s, the ratio to the encoder's limit and the server's CPU per request, with the
after/before quotient of each.

    python -m bench.experiments.load_ab --before /path/to/old/checkout --stores embedded --out /tmp/ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np

from bench.experiments.load import (
    EncoderLimit,
    _postgres,
    fill,
    fill_data,
    load_average,
    print_table,
    process_cpu_s,
    run_clients,
    with_limit,
)
from memnets.server.run import passive_openmp
from memnets.server.testing import ServerProcess

VARIANTS = ("before", "after")
SUMMARY = ("throughput_rps", "searches_per_s", "ratio", "search_ratio", "server_cpu_ms_per_request")


def round_order(rounds: int) -> list[str]:
    """before, after, after, before, ...: each variant runs first in half the pairs (drift cancels)."""
    return [VARIANTS[(i + i // 2) % 2] for i in range(2 * rounds)]


def summary(rows: list[dict]) -> dict:
    """Per variant the mean of :data:`SUMMARY`'s columns, and the after/before quotient of each."""
    means = {
        variant: {
            name: round(float(np.mean([row[name] for row in rows if row["variant"] == variant])), 3) for name in SUMMARY
        }
        for variant in VARIANTS
    }
    means["after_over_before"] = {
        name: round(means["after"][name] / means["before"][name], 3) if means["before"][name] else None
        for name in SUMMARY
    }
    return means


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments.load_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a memnets checkout whose server is the 'before'")
    parser.add_argument("--stores", nargs="+", default=["embedded"], choices=["embedded", "postgres"])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15.0, help="per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per variant")
    parser.add_argument("--add-share", type=float, default=0.2)
    parser.add_argument("--limit-seconds", type=float, default=5.0)
    parser.add_argument("--out", default=None, help="save the figures as JSON (and a .md table beside it) here")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    before = Path(args.before).resolve()
    if not (before / "memnets" / "__init__.py").is_file():
        parser.error(f"--before: {args.before} holds no memnets package (memnets/__init__.py)")
    if not 1 <= args.rounds <= 10 or not 0 < args.seconds <= 120 or not 1 <= args.clients <= 200:
        parser.error("bounded runs only: --rounds 1..10, --seconds up to 120, --clients 1..200")
    passive_openmp()  # before torch loads, as bench.experiments.load does (its EncoderLimit)
    report = {"command": "python -m bench.experiments.load_ab " + " ".join(argv), "before": str(before), "runs": []}
    print(load_average())
    texts, vectors, queries = fill_data(args.memories, None)
    limit = EncoderLimit(None, queries)
    out = Path(args.out).resolve() if args.out else None
    work = Path(tempfile.mkdtemp(prefix="memnets-bench-load-ab-"))
    os.chdir(work)  # ``python -m`` puts the child's working folder first on its path, before PYTHONPATH
    pg = None
    try:
        for store in args.stores:
            servers = {}
            try:
                for variant in VARIANTS:
                    if store == "postgres":
                        pg = pg or _postgres(work)
                        location, options = pg[1], {"table": "ab" + uuid.uuid4().hex[:8]}
                    else:
                        location, options = str(work / f"memory-{variant}"), {}
                    fill(location, texts, vectors, args.users, options)
                    sets = [arg for name, value in options.items() for arg in ("--set", f"{name}={value}")]
                    env = {"PYTHONPATH": str(before)} if variant == "before" else None
                    servers[variant] = ServerProcess(location, *sets, env=env)
                for server in servers.values():
                    server.wait_ready(timeout=600)
                    run_clients(server.url, 1, 2.0, args.users, args.add_share, queries, 0)  # warm up, not counted
                for n, variant in enumerate(round_order(args.rounds)):
                    server = servers[variant]
                    row = {"store": f"{store} ({variant})", "variant": variant, "round": n // 2, "batching": True}
                    cpu = process_cpu_s(server.process.pid)
                    row.update(
                        run_clients(server.url, args.clients, args.seconds, args.users, args.add_share, queries, n)
                    )
                    cpu = process_cpu_s(server.process.pid) - cpu
                    row["server_cpu_ms_per_request"] = round(cpu * 1000 / max(row["requests"], 1), 2)
                    row["load"] = load_average().split("load average:")[-1].strip()
                    with_limit(row, limit, args.limit_seconds)
                    report["runs"].append(row)
                    print(json.dumps(row))
            finally:
                for server in servers.values():
                    server.stop()
            rows = [row for row in report["runs"] if row["store"].startswith(store)]
            report.setdefault("summary", {})[store] = summary(rows)
            print(store, json.dumps(report["summary"][store]))
    finally:
        if pg is not None:
            pg[0].cleanup()
        shutil.rmtree(work, ignore_errors=True)
    report["table"] = print_table(report["runs"])
    report["load_after"] = load_average()
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        summaries = "\n".join(f"{store}: {json.dumps(s)}" for store, s in report["summary"].items())
        out.with_suffix(".md").write_text(f"`{report['command']}`\n\n{report['table']}\n\n{summaries}\n")
        print(f"saved {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
