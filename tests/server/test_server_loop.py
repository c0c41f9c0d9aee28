"""The server's event loop (`memnets serve http --loop`): uvloop, of the server extra, when installed."""

from __future__ import annotations

import importlib.util

import httpx
import pytest

from memnets.server.run import ServerConfig, check
from memnets.server.testing import ServerProcess


def served(process: ServerProcess) -> None:
    """The server answers a write and a search."""
    with httpx.Client(base_url=process.url, timeout=60) as client:
        client.post("/v1/memories", json={"user": "ann", "text": "ann keeps a beagle"}).raise_for_status()
        hits = client.post("/v1/search", json={"user": "ann", "query": "ann's dog"}).json()["results"]
    assert [hit["memory"]["content"] for hit in hits] == ["ann keeps a beagle"]


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="the server extra's uvloop is not installed")
def test_with_the_server_extra_the_server_runs_uvloop(tiny_model_dir, tmp_path):
    """Before: asyncio's loop unless uvicorn found uvloop by itself; now --loop auto picks uvloop, says so, and serves."""
    with ServerProcess(tmp_path / "memory", "--encoder", str(tiny_model_dir), "-v") as process:
        process.wait_ready()
        served(process)
        assert "memnets server: event loop uvloop" in process.output()


def test_loop_asyncio_serves_as_before(tiny_model_dir, tmp_path):
    """--loop asyncio: asyncio's own loop, whatever is installed."""
    with ServerProcess(tmp_path / "memory", "--encoder", str(tiny_model_dir), "--loop", "asyncio", "-v") as process:
        process.wait_ready()
        served(process)
        assert "memnets server: event loop asyncio" in process.output()


def test_an_unknown_loop_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"--loop must be one of auto, asyncio, uvloop, got 'trio'"):
        check(ServerConfig(location=str(tmp_path / "memory"), loop="trio"))
