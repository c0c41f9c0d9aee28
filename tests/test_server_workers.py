"""Many workers on one memory (`serve http --workers 2`): on PostgreSQL and on the embedded store,
every worker sees every write and every delete of the others (each request on a new connection, so
the requests spread over the workers; the X-Memnets-Worker header says which one answered)."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from memnets.server.testing import ServerProcess

pytestmark = pytest.mark.slow
ROUNDS = 6


def _fresh(method: str, url: str, **kwargs) -> httpx.Response:
    """One request on its own connection (so that any worker may take it)."""
    response = httpx.request(method, url, headers={"Connection": "close"}, timeout=30, **kwargs)
    assert response.status_code < 400, response.text
    return response


def _wait_until_workers_ready(url: str, count: int, timeout: float) -> None:
    """Until ``count`` distinct workers have answered /readyz with 200: the first ready one is not
    the last (each loads its own encoder; on a loaded machine the second answers 503 not_ready for
    a while, and a request it takes meanwhile would fail the test for the wrong reason)."""
    ready: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(ready) < count:
        assert time.monotonic() < deadline, f"only workers {ready} were ready after {timeout} s"
        response = httpx.get(f"{url}/readyz", headers={"Connection": "close"}, timeout=30)
        if response.status_code == 200:
            ready.add(response.headers["x-memnets-worker"])
        else:
            time.sleep(0.2)


def _every_worker_sees_every_change(url: str) -> set[str]:
    workers: set[str] = set()
    for n in range(ROUNDS):
        added = _fresh(
            "POST", f"{url}/v1/memories", json={"user": "ann", "text": f"fact number {n} {uuid.uuid4().hex}"}
        )
        memory = added.json()["memory"]
        workers.add(added.headers["x-memnets-worker"])
        for _ in range(3):  # read it back, on whichever workers answer
            got = _fresh("GET", f"{url}/v1/memories/{memory['id']}", params={"user": "ann"})
            found = _fresh("POST", f"{url}/v1/search", json={"user": "ann", "query": memory["content"], "k": 1})
            workers.update((got.headers["x-memnets-worker"], found.headers["x-memnets-worker"]))
            assert got.json()["memory"]["content"] == memory["content"]
            assert found.json()["results"][0]["memory"]["id"] == memory["id"]
        _fresh("DELETE", f"{url}/v1/memories/{memory['id']}", params={"user": "ann"})
        for _ in range(3):
            gone = httpx.get(
                f"{url}/v1/memories/{memory['id']}", params={"user": "ann"}, headers={"Connection": "close"}
            )
            found = _fresh("POST", f"{url}/v1/search", json={"user": "ann", "query": memory["content"], "k": 50})
            workers.update((gone.headers["x-memnets-worker"], found.headers["x-memnets-worker"]))
            assert gone.status_code == 404
            assert memory["id"] not in {r["memory"]["id"] for r in found.json()["results"]}
    listed = _fresh("GET", f"{url}/v1/memories", params={"user": "ann", "limit": 1000}).json()["memories"]
    assert listed == []
    return workers


@pytest.mark.parametrize("store", ["embedded", "postgres"])
def test_two_workers_serve_one_memory(store, request, tiny_model_dir, tmp_path):
    location = str(tmp_path / "memory") if store == "embedded" else request.getfixturevalue("pg_url")
    extra = [] if store == "embedded" else ["--set", f"table=wk{uuid.uuid4().hex[:10]}", "--set", "connect_timeout=5"]
    with ServerProcess(location, "--encoder", str(tiny_model_dir), "--workers", "2", *extra) as server:
        server.wait_ready(timeout=240)
        _wait_until_workers_ready(server.url, 2, timeout=240)
        workers = _every_worker_sees_every_change(server.url)
    assert len(workers) == 2, f"the requests reached workers {workers} only: the test saw no second worker"
