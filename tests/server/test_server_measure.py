"""RequestMeasure, the app's plain ASGI middleware: every answer names its worker and is counted by route
and status, an exception no handler takes is that request's JSON 500 (the server answers the next one),
and the access log line holds the route template, not the path."""

from __future__ import annotations

import logging
import os

import pytest

import memnets


@pytest.fixture()
def client(encoder, tmp_path):
    from starlette.testclient import TestClient

    from memnets.server.app import create_app
    from memnets.server.testing import wait_until_ready

    app = create_app(lambda wrap: memnets.open(str(tmp_path / "memory"), encoder=wrap(encoder)), access_log=True)
    with TestClient(app) as client:
        wait_until_ready(client)
        client.memory = app.state.memnets.memory
        yield client


def count(client, route: str, status: int) -> float:
    """The value of memnets_requests_total for POST ``route`` and ``status`` in /metrics."""
    line = f'memnets_requests_total{{method="POST",route="{route}",status="{status}"}} '
    found = [row for row in client.get("/metrics").text.splitlines() if row.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


def test_an_exception_no_handler_takes_is_that_request_s_500(client, monkeypatch):
    def broken(*args, **kwargs):
        raise AttributeError("a bug inside the search")  # no exception handler of the app takes it

    monkeypatch.setattr(client.memory, "explain", broken)
    failed = client.post("/v1/search", json={"user": "ann", "query": "anything"})
    assert failed.status_code == 500
    assert failed.json()["error"]["code"] == "internal" and "a bug" not in failed.text
    assert failed.headers["x-memnets-worker"] == str(os.getpid())
    assert count(client, "/v1/search", 500) == 1
    monkeypatch.undo()
    assert client.post("/v1/search", json={"user": "ann", "query": "anything"}).status_code == 200
    assert count(client, "/v1/search", 200) == 1


def test_answers_are_named_counted_and_logged_by_route(client, caplog):
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        added = client.post("/v1/memories", json={"user": "ann-secret-name", "text": "ann keeps bees"})
        missing = client.get("/v1/memories/no-such-id", params={"user": "ann-secret-name"})
    assert added.status_code == 200 and added.headers["x-memnets-worker"] == str(os.getpid())
    assert missing.status_code == 404 and missing.headers["x-memnets-worker"] == str(os.getpid())
    assert count(client, "/v1/memories", 200) == 1
    lines = [record.getMessage() for record in caplog.records if record.name == "uvicorn.access"]
    assert any('"POST /v1/memories HTTP/1.1" 200' in line for line in lines)
    assert any('"GET /v1/memories/{id:path} HTTP/1.1" 404' in line for line in lines)
    assert "ann-secret-name" not in caplog.text and "no-such-id" not in caplog.text
