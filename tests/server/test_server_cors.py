"""``--cors-origin`` against a real ``memnets serve http`` process: a configured origin's preflight and
its request are answered with CORS headers, while that origin is still no name for ``Host`` and any
other origin is still refused by the door guard.

Before: the guard checked ``Origin`` against the bind host and ``--allowed-host`` only, so both the
preflight and the request of a configured origin got 403; the one workaround, ``--allowed-host``,
also accepted that name as ``Host`` (the DNS rebinding the Host check is there to stop)."""

from __future__ import annotations

import uuid

import httpx
import pytest

from memnets.server.testing import ServerProcess

ADMIN = "admin-" + uuid.uuid4().hex
ORIGIN = "http://app.example:3000"  # the web app's origin, allowed by --cors-origin


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    """A server with an admin token and one CORS origin, given as an operator might write it."""
    folder = tmp_path_factory.mktemp("cors")
    args = ["--encoder", str(tiny_model_dir), "--token-env", "MEMNETS_TEST_ADMIN"]
    args += ["--cors-origin", "HTTP://App.Example:3000/"]  # as written, not as a browser sends it
    with ServerProcess(folder / "memory", *args, env={"MEMNETS_TEST_ADMIN": ADMIN}) as process:
        yield process.wait_ready(token=ADMIN)


def preflight(server, origin: str) -> httpx.Response:
    """A browser's preflight of a POST with a bearer token and a JSON body (it carries no token itself)."""
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    return httpx.options(f"{server.url}/v1/memories", headers=headers, timeout=30)


def add_from(server, origin: str, **headers: str) -> httpx.Response:
    """The POST that follows the preflight, from ``origin``."""
    headers = {"Origin": origin, "Authorization": f"Bearer {ADMIN}", **headers}
    body = {"user": "ann", "text": "ann reads in the garden"}
    return httpx.post(f"{server.url}/v1/memories", json=body, headers=headers, timeout=30)


def test_a_configured_origin_gets_its_preflight_and_its_request_answered_with_cors_headers(server):
    answer = preflight(server, ORIGIN)
    assert answer.status_code == 200, answer.text
    assert answer.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in answer.headers["access-control-allow-methods"]
    assert "authorization" in answer.headers["access-control-allow-headers"].lower()
    added = add_from(server, ORIGIN)
    assert added.status_code == 200, added.text
    assert added.headers["access-control-allow-origin"] == ORIGIN
    assert added.json()["memory"]["content"] == "ann reads in the garden"


def test_the_configured_origin_is_no_host_and_other_origins_stay_refused(server):
    as_host = add_from(server, ORIGIN, Host="app.example:3000")
    assert as_host.status_code == 421 and as_host.json()["error"]["code"] == "misdirected"
    for other in ("http://evil.example", "http://app.example:3001", "https://app.example:3000", "null"):
        for answer in (preflight(server, other), add_from(server, other)):
            assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden", (other, answer.text)
            assert "access-control-allow-origin" not in answer.headers
