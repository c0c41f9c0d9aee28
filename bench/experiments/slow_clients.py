"""Slow clients against `memnets serve http`: 1,000 half-sent requests at a 1,024 file-descriptor
limit, and a legitimate client's latency meanwhile, with the server's slow-client limits off
(before: no header or body timeout, no connection limit) and on (the defaults).

The server runs as a real process with RLIMIT_NOFILE 1,024 (soft; its own files take about 20 of
them). An attacker opens ``--attackers`` connections (1,000, then 1,100: enough to take the rest),
each sending half a request head and then nothing, and holds them.
Then a legitimate client sends a search on a new connection every 0.2 s for ``--seconds`` seconds
(5 s timeout each). Reported per mode: the client's p50/p99 latency and its errors, and how many
of the attacker's connections the server had closed by the end.

    python -m bench.experiments.slow_clients --out docs/results   # ~2 minutes: 4 server starts
"""

from __future__ import annotations

import resource
import socket
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from bench.common import latency_summary, parser, write_result
from memnets.server.testing import ServerProcess

FD_LIMIT = 1024
HALF_HEAD = b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
MODES = {
    "before (limits off)": ["--header-timeout", "0", "--body-timeout", "0", "--max-connections", "0"],
    "after (defaults)": [],
}


def start_server(folder: Path, args: list[str]) -> ServerProcess:
    """A server process whose file-descriptor limit is FD_LIMIT (it inherits this process's, set around its start)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, hard))
    try:
        process = ServerProcess(folder / "memory", *args, log=folder / "server.log")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return process.wait_ready()


def attack(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that each sent half a request head (those the kernel let connect)."""
    held = []
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            sock.sendall(HALF_HEAD)
            held.append(sock)
        except OSError:
            break
    return held


def closed_by_server(held: list[socket.socket]) -> int:
    """How many of ``held`` the server has closed (a read returns end of file at once)."""
    closed = 0
    for sock in held:
        sock.setblocking(False)
        try:
            closed += sock.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def legitimate_client(url: str, seconds: float) -> tuple[list[float], Counter]:
    """A search on a new connection every 0.2 s for ``seconds``: the latencies of answers, the errors by kind."""
    latencies, errors = [], Counter()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        try:
            with httpx.Client(base_url=url, timeout=5) as client:
                answer = client.post("/v1/search", json={"user": "ann", "query": "where does ann walk her dog?"})
            if answer.status_code == 200:
                latencies.append(time.perf_counter() - started)
            else:
                errors[f"HTTP {answer.status_code}"] += 1
        except httpx.HTTPError as error:
            errors[type(error).__name__] += 1
        time.sleep(max(0.0, 0.2 - (time.perf_counter() - started)))
    return latencies, errors


def run(mode_args: list[str], attackers: int, seconds: float, encoder: str | None) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        args = [*mode_args, *(["--encoder", encoder] if encoder else [])]
        with start_server(Path(folder), args) as server:
            httpx.post(f"{server.url}/v1/memories", json={"user": "ann", "text": "ann walks her beagle in the park"})
            held = attack(server.port, attackers)
            latencies, errors = legitimate_client(server.url, seconds)
            closed = closed_by_server(held)
            for sock in held:
                sock.close()
    answered = latency_summary(latencies) if latencies else {"calls": 0}
    return {
        "attacker_connections": len(held),
        "closed_by_server": closed,
        "client": answered,
        "client_errors": dict(errors),
        "client_requests": len(latencies) + sum(errors.values()),
    }


def main(argv: list[str] | None = None) -> None:
    p = parser("slow_clients", __doc__.splitlines()[0])
    p.add_argument(
        "--attackers", type=int, nargs="+", default=[1000, 1100], help="half-sent connections (default: 1000 1100)"
    )
    p.add_argument("--seconds", type=float, default=10.0, help="how long the legitimate client runs per run")
    p.add_argument("--encoder", default=None, help="an encoder folder (default: the bundled all-MiniLM-L6-v2)")
    args = p.parse_args(argv)
    seconds = 5.0 if args.quick else args.seconds
    results = {}
    for attackers in args.attackers:
        for mode, mode_args in MODES.items():
            name = f"{attackers} half-sent, {mode}"
            results[name] = found = run(mode_args, attackers, seconds, args.encoder)
            client = found["client"]
            print(
                f"{name:38s} held {found['attacker_connections']:5d}, closed by the server "
                f"{found['closed_by_server']:5d}; client: {client['calls']:3d} answered of "
                f"{found['client_requests']:3d}, p50 {client.get('p50_ms', float('nan')):7.1f} ms, "
                f"p99 {client.get('p99_ms', float('nan')):7.1f} ms, errors {found['client_errors']}"
            )
    settings = {"fd_limit": FD_LIMIT, "attackers": args.attackers, "seconds": seconds, "encoder": args.encoder}
    notes = [
        "the attacker opens its connections once and holds them (it does not reconnect when one is closed)",
        "after: --header-timeout 10, --body-timeout 30, --max-connections half the descriptor limit (512)",
    ]
    path = write_result(args.out, "slow_clients", settings, results, notes)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
