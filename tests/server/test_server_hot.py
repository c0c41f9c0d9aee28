"""The server's hot path (memnets.server.hot: search and add served past FastAPI's request plumbing) and
its garbage-collector freeze (memnets.server.state.freeze_loaded_objects), on a real server process.

A request of the plain case (Content-Type application/json, a JSON object the route's model validates)
takes the hot path; the same request sent as ``application/vnd.memnets+json`` (JSON to FastAPI too)
takes FastAPI's: both must give the same answer, errors included, and be counted alike."""

from __future__ import annotations

import json

import httpx
import pytest

from memnets.server.testing import ServerProcess

ADMIN = "admin-token-hot-path-tests"
ANN = "ann-token-hot-path-tests"
ANN_S1 = "ann-session-token-hot-path"
HOT = "application/json"
COLD = "application/vnd.memnets+json"  # JSON to FastAPI, not the hot path's plain case


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hot")
    tokens = folder / "tokens.json"
    tokens.write_text(json.dumps({ANN: "ann", ANN_S1: {"user": "ann", "session": "s1"}}))
    args = ["--encoder", str(tiny_model_dir), "--token-env", "MEMNETS_TEST_ADMIN", "--tokens", str(tokens)]
    with ServerProcess(folder / "memory", *args, env={"MEMNETS_TEST_ADMIN": ADMIN}) as process:
        yield process.wait_ready(token=ADMIN)


def post(server, path: str, body, content_type: str, token: str | None = ADMIN) -> httpx.Response:
    headers = {"Content-Type": content_type, **({"Authorization": f"Bearer {token}"} if token else {})}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.url + path, content=raw, headers=headers, timeout=30)


def both(server, path: str, body, token: str | None = ADMIN) -> tuple[httpx.Response, httpx.Response]:
    return post(server, path, body, HOT, token), post(server, path, body, COLD, token)


def metrics(server) -> str:
    return httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30).text


def test_a_search_answers_the_same_on_both_paths(server):
    for text in ("ann keeps bees in the garden", "ann rides to lyon by train", "bob plays the piano"):
        assert post(server, "/v1/memories", {"user": "ann", "text": text}, HOT).status_code == 200
    hot, cold = both(server, "/v1/search", {"user": "ann", "query": "where are the bees", "k": 2})
    assert hot.status_code == cold.status_code == 200
    assert timeless(hot.json()) == timeless(cold.json()) and len(hot.json()["results"]) == 2
    assert [h["score"] for h in hot.json()["results"]] == pytest.approx([h["score"] for h in cold.json()["results"]])
    many = both(server, "/v1/search", {"users": ["ann", "bob"], "query": "bees"})
    assert timeless(many[0].json()) == timeless(many[1].json()) and set(many[0].json()["by_user"]) == {"ann", "bob"}


def timeless(answer: dict) -> dict:
    """A search's answer without what moves with the clock between two calls (recency, so the score)."""
    for hits in [answer["results"]] if "results" in answer else answer["by_user"].values():
        for hit in hits:
            del hit["score"], hit["parts"]["recency"]
    return answer


@pytest.mark.parametrize(
    ("path", "body", "token"),
    [
        ("/v1/search", {"user": "bob", "query": "bees"}, ANN),  # another user's: 403
        ("/v1/search", {"user": "ann", "query": "bees"}, None),  # no token: 401
        ("/v1/search", {"user": "ann", "query": "bees"}, "not-a-token"),
        ("/v1/search", {"user": "ann", "query": "bees", "k": "five"}, ADMIN),  # the API's TypeError
        ("/v1/search", {"user": "ann", "query": "bees", "colour": 1}, ADMIN),  # an unknown argument
        ("/v1/search", {"user": "ann", "query": "bees", "as_of": "yesterday"}, ADMIN),
        ("/v1/search", {"user": "ann"}, ADMIN),  # no query: FastAPI's validation on both
        ("/v1/search", [1, 2], ADMIN),  # not an object
        ("/v1/search", b'{"user": "ann", "query": ', ADMIN),  # not JSON
        ("/v1/memories", {"user": "ann", "text": "x", "items": ["y"]}, ADMIN),  # the server's own error
        ("/v1/memories", {"user": "ann", "text": ""}, ADMIN),  # the store's InvalidMemoryError
        ("/v1/memories", {"user": "ann", "text": "scoped", "session": "s2"}, ANN_S1),  # outside its scope
        ("/v1/memories", {"text": "no user"}, ADMIN),
    ],
)
def test_every_error_has_the_same_status_shape_and_headers_on_both_paths(server, path, body, token):
    hot, cold = both(server, path, body, token)
    assert hot.status_code == cold.status_code and hot.status_code >= 400
    assert hot.json() == cold.json() and set(hot.json()["error"]) == {"code", "message", "field", "type"}
    assert hot.headers.get("www-authenticate") == cold.headers.get("www-authenticate")
    assert hot.headers["x-memnets-worker"] == cold.headers["x-memnets-worker"]


def test_both_paths_are_counted_under_the_route(server):
    def count(status: int) -> float:
        line = f'memnets_requests_total{{method="POST",route="/v1/search",status="{status}"}} '
        rows = [row for row in metrics(server).splitlines() if row.startswith(line)]
        return float(rows[0].split()[-1]) if rows else 0.0

    before = count(200), count(403)
    both(server, "/v1/search", {"user": "ann", "query": "bees"})
    both(server, "/v1/search", {"user": "bob", "query": "bees"}, ANN)
    assert (count(200), count(403)) == (before[0] + 2, before[1] + 2)


def test_the_objects_alive_at_load_are_out_of_the_collector_s_scans(server):
    frozen = [row for row in metrics(server).splitlines() if row.startswith("memnets_gc_frozen_objects ")]
    assert frozen and float(frozen[0].split()[-1]) > 10_000  # torch, transformers and the encoder's modules


def test_a_hot_route_that_takes_more_than_body_and_caller_is_refused_at_start():
    from fastapi import APIRouter, Query

    from memnets.server.caller import CallerDep
    from memnets.server.hot import _check_takes_body_and_caller
    from memnets.server.routes.search import SearchBody

    router = APIRouter(prefix="/v1/search")

    @router.post("")
    async def search(body: SearchBody, caller: CallerDep, trace: bool = Query(False)):
        return None

    with pytest.raises(RuntimeError, match="HotRoutes serves /v1/search as \\(body, caller\\) only"):
        _check_takes_body_and_caller(router.routes[0])
