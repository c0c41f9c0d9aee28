"""Many workers on one memory (`serve http --workers 2`): on PostgreSQL and on the embedded store,
every worker sees every write and every delete of the others (each request on a new connection, so
the requests spread over the workers; the X-Memnets-Worker header says which one answered)."""

from __future__ import annotations

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
        server.wait_workers(2)
        workers = _every_worker_sees_every_change(server.url)
    assert len(workers) == 2, f"the requests reached workers {workers} only: the test saw no second worker"
