"""A real ``memnets serve http`` process on 127.0.0.1, and the fault runs made with it.

For test code and benchmarks, never imported by ``import memnets`` (like :mod:`memnets.store.testing`):
the server tests (tests/server/) start servers with :class:`ServerProcess`, and
bench/experiments/load.py serves its load from one.

- :class:`ServerProcess`: start, wait until ready, stop (SIGTERM) or kill (SIGKILL) a server.
- :func:`kill_run`: writers add memories while the server is SIGKILLed; the server is started again
  on the same memory and every add that got a 2xx is looked up (acknowledged, present, lost).
- :func:`postgres_restart_run`: writers add and search while the PostgreSQL server under the memory
  is stopped and started again; every answer is counted by status (200, 503 with Retry-After, any
  other), the slowest answer (each request should be answered within about the store's
  connect_timeout, never cut off by the client's timeout), the time until the server answers 200
  again without being restarted, and the acknowledged adds looked up afterwards.

Both fault runs return a dict of counts; tests/server/test_server_faults.py runs them small and asserts
nothing was lost and nothing but 200 and 503 came back; ``python -m bench.experiments.load --parts
faults`` runs them larger and saves them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx

# the folder holding this memnets package, first on a server's path: the child runs the parent's code
PACKAGE_PARENT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the system picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_ready(client, seconds: float = 10.0) -> None:
    """Wait until an in-process app (a ``TestClient`` of ``create_app``'s app) answers ``/readyz`` 200:
    its memory opens in a background thread. TimeoutError after ``seconds``."""
    deadline = time.monotonic() + seconds
    while client.get("/readyz").status_code != 200:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the app was not ready within {seconds} s")
        time.sleep(0.05)


class ServerProcess:
    """``python -m memnets serve http LOCATION ARGS`` in a child process, its output in ``log``."""

    def __init__(self, location, *args: str, env: dict | None = None, log: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (
            Path(log) if log is not None else Path(os.environ.get("TMPDIR", "/tmp")) / f"memnets-server-{self.port}.log"
        )
        environment = {**os.environ, "PYTHONPATH": str(PACKAGE_PARENT), **(env or {})}
        self._out = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memnets", "serve", "http", str(location), "--port", str(self.port), *args],
            env=environment,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 120.0, token: str | None = None) -> ServerProcess:
        """Block until /readyz answers 200 (the encoder loaded, the store answering)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/readyz", headers=headers, timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"the server was not ready within {timeout} s:\n{self.output()}")

    def wait_workers(self, count: int, timeout: float = 240.0) -> set[str]:
        """Block until ``count`` distinct workers of a ``--workers`` server have answered /readyz with 200,
        each request on a connection of its own (each worker loads its own encoder and store: the first
        one ready is not the last); their X-Memnets-Worker names."""
        ready: set[str] = set()
        deadline = time.monotonic() + timeout
        while len(ready) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only workers {sorted(ready)} of {count} were ready after {timeout} s")
            answer = httpx.get(f"{self.url}/readyz", headers={"Connection": "close"}, timeout=30)
            if answer.status_code == 200:
                ready.add(answer.headers["x-memnets-worker"])
            else:
                time.sleep(0.2)
        return ready

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL the server and its workers (its own process group): no shutdown code runs."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self._out.close()

    def stop(self) -> None:
        """SIGTERM (uvicorn's clean shutdown: the memory is closed), SIGKILL after 30 s."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self._out.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class _Writers:
    """``n`` threads adding (and, with ``search``, searching) until stopped; what was acknowledged, the
    answers by status and the slowest one (a request the client gave up on after ``timeout`` s is "no answer")."""

    def __init__(
        self,
        url: str,
        n: int,
        *,
        user: str,
        search: bool = False,
        headers: dict | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.url, self.user, self.search, self.headers, self.timeout = url, user, search, headers or {}, timeout
        self.acknowledged: list[str] = []
        self.statuses: Counter = Counter()
        self.slowest_s = 0.0
        self.missing_retry_after = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)]

    def start(self) -> _Writers:
        for thread in self.threads:
            thread.start()
        return self

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def _run(self, worker: int) -> None:
        with httpx.Client(base_url=self.url, headers=self.headers, timeout=self.timeout) as client:
            n = 0
            while not self.stop.is_set():
                n += 1
                text = f"writer {worker} fact {n} {uuid.uuid4().hex[:8]}"
                status = self._call(
                    client, "POST", "/v1/memories", {"user": self.user, "text": text, "id": f"w{worker}-{n}"}
                )
                if status == 200:
                    with self._lock:
                        self.acknowledged.append(f"w{worker}-{n}")
                if self.search:
                    self._call(client, "POST", "/v1/search", {"user": self.user, "query": text, "k": 3})
                if status not in (200, None):
                    time.sleep(0.05)

    def _call(self, client: httpx.Client, method: str, path: str, body: dict) -> int | None:
        started = time.monotonic()
        try:
            response = client.request(method, path, json=body)
        except httpx.TransportError:
            with self._lock:
                self.statuses["no answer"] += 1
            time.sleep(0.05)
            return None
        with self._lock:
            self.slowest_s = max(self.slowest_s, time.monotonic() - started)
            self.statuses[response.status_code] += 1
            if response.status_code == 503 and "retry-after" not in response.headers:
                self.missing_retry_after += 1
        return response.status_code


def _present(url: str, user: str, ids: list[str], headers: dict | None = None) -> int:
    with httpx.Client(base_url=url, headers=headers or {}, timeout=30) as client:
        listed = []
        offset = 0
        while True:
            page = client.get("/v1/memories", params={"user": user, "limit": 1000, "offset": offset}).json()
            listed.extend(m["id"] for m in page["memories"])
            if page["next_offset"] is None:
                break
            offset = page["next_offset"]
    return len(set(ids) & set(listed))


def kill_run(location: str, server_args: list[str], *, writers: int = 4, seconds: float = 5.0, env=None) -> dict:
    """SIGKILL a server under ``writers`` concurrent adders after ``seconds``; restart; count what survived."""
    user = "kill-" + uuid.uuid4().hex[:6]
    first = ServerProcess(location, *server_args, env=env).wait_ready()
    load = _Writers(first.url, writers, user=user).start()
    time.sleep(seconds)
    first.kill()  # no shutdown code runs: what was acknowledged must already be on disk
    load.join()
    with ServerProcess(location, *server_args, env=env) as second:
        second.wait_ready()
        present = _present(second.url, user, load.acknowledged)
    return {
        "writers": writers,
        "seconds_before_kill": seconds,
        "acknowledged": len(load.acknowledged),
        "present": present,
        "lost": len(load.acknowledged) - present,
        "answers": {str(k): v for k, v in load.statuses.items()},
    }


def postgres_restart_run(
    url: str,
    server_args: list[str],
    stop_postgres: Callable[[], None],
    start_postgres: Callable[[], None],
    *,
    writers: int = 4,
    before_s: float = 3.0,
    down_s: float = 5.0,
    recover_within_s: float = 60.0,
    client_timeout_s: float = 10.0,
    env=None,
) -> dict:
    """Stop PostgreSQL for ``down_s`` under load and start it again; count the answers and the recovery.
    Each writer's client gives up on a request after ``client_timeout_s`` (counted as "no answer")."""
    user = "pg-" + uuid.uuid4().hex[:6]
    with ServerProcess(url, *server_args, env=env) as server:
        server.wait_ready()
        load = _Writers(server.url, writers, user=user, search=True, timeout=client_timeout_s).start()
        time.sleep(before_s)
        stop_postgres()
        time.sleep(down_s)
        down = dict(load.statuses)
        start_postgres()
        restarted = time.monotonic()
        recovered_after = None
        with httpx.Client(base_url=server.url, timeout=10) as probe:
            while time.monotonic() - restarted < recover_within_s:
                try:
                    if probe.post("/v1/search", json={"user": user, "query": "fact", "k": 1}).status_code == 200:
                        recovered_after = time.monotonic() - restarted
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
        time.sleep(2.0)  # some load after the recovery
        load.join()
        present = _present(server.url, user, load.acknowledged)
        server_pid_alive = server.process.poll() is None
    return {
        "writers": writers,
        "down_s": down_s,
        "answers": {str(k): v for k, v in load.statuses.items()},
        "answers_until_restart": {str(k): v for k, v in down.items()},
        "503_without_retry_after": load.missing_retry_after,
        "client_timeout_s": client_timeout_s,
        "slowest_answer_s": round(load.slowest_s, 2),
        "recovered_after_s": recovered_after,
        "server_still_running": server_pid_alive,
        "acknowledged": len(load.acknowledged),
        "present": present,
        "lost": len(load.acknowledged) - present,
    }
