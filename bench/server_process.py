"""A real `memnets serve http` process on 127.0.0.1 (for bench/load.py and the server tests): start, wait, stop, kill."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerProcess:
    """``python -m memnets serve http LOCATION ARGS`` in a child process, its output in ``log``."""

    def __init__(self, location, *args: str, env: dict | None = None, log: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (
            Path(log) if log is not None else Path(os.environ.get("TMPDIR", "/tmp")) / f"memnets-server-{self.port}.log"
        )
        environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
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
