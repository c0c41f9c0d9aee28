"""`memnets serve http` as a real process on 127.0.0.1: every route, the auth matrix (admin, own user,
other user, no token, wrong token), errors that name the field (never a 500), health, metrics,
the offline docs page and the inspector's files."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

import memnets
from memnets.server.client import ServerError
from memnets.server.testing import ServerProcess

ADMIN = "admin-" + uuid.uuid4().hex
ANN = "ann-" + uuid.uuid4().hex
BOB = "bob-" + uuid.uuid4().hex
PLANNER = "planner-" + uuid.uuid4().hex  # ann's, for agent "planner" only
CRITIC = "critic-" + uuid.uuid4().hex  # ann's, for agent "critic" only
PLANNER_S1 = "planner-s1-" + uuid.uuid4().hex  # ann's, for agent "planner" in session "s1" only
PLANNER_S2 = "planner-s2-" + uuid.uuid4().hex  # ann's, for agent "planner" in session "s2" only
S1 = "s1-" + uuid.uuid4().hex  # ann's, for session "s1" only (any agent)
SCOPES = {  # the scope of each narrowed token
    PLANNER: {"agent": "planner"},
    CRITIC: {"agent": "critic"},
    PLANNER_S1: {"agent": "planner", "session": "s1"},
    PLANNER_S2: {"agent": "planner", "session": "s2"},
    S1: {"session": "s1"},
}
EXACT = "0.9999"


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("server")
    tokens = folder / "tokens.json"
    narrowed = {token: {"user": "ann", **scope} for token, scope in SCOPES.items()}
    tokens.write_text(json.dumps({ANN: "ann", BOB: {"user": "bob"}, **narrowed}))
    args = ["--encoder", str(tiny_model_dir), "--set", f"duplicate_threshold={EXACT}"]
    args += ["--token-env", "MEMNETS_TEST_ADMIN", "--tokens", str(tokens), "--max-body", "65536"]
    with ServerProcess(folder / "memory", *args, env={"MEMNETS_TEST_ADMIN": ADMIN}) as process:
        yield process.wait_ready(token=ADMIN)


def http(server, token=ADMIN):
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=30)


@pytest.fixture()
def admin(server):
    with http(server) as client:
        yield client
        for user in client.get("/v1/users").json()["users"]:
            client.delete("/v1/memories", params={"user": user})


def error_of(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    return error


def test_every_memory_route_round_trips(admin):
    one = admin.post("/v1/memories", json={"user": "ann", "text": "red green blue", "metadata": {"topic": "colours"}})
    assert one.status_code == 200 and one.headers["x-memnets-worker"].isdigit()
    first = one.json()["memory"]
    assert (
        first["content"] == "red green blue" and first["metadata"] == {"topic": "colours"} and first["owner"] == "ann"
    )
    batch = admin.post(
        "/v1/memories", json={"user": "ann", "items": ["one two three", "cat dog bird"], "t": "2024-03-01T12:00:00Z"}
    ).json()["memories"]
    assert [m["content"] for m in batch] == ["one two three", "cat dog bird"]
    assert all(m["t"] == "2024-03-01T12:00:00+00:00" for m in batch)
    record = {"id": "rec-1", "owner": "ann", "t": "2024-03-02T00:00:00+00:00", "content": "north south", "kind": "plan"}
    assert admin.post("/v1/memories", json={"user": "ann", "record": record}).json()["memory"]["id"] == "rec-1"

    found = admin.post("/v1/search", json={"user": "ann", "query": "red green blue", "k": 2}).json()
    assert found["ranker"] == "cosine" and len(found["results"]) == 2
    top = found["results"][0]
    assert top["memory"]["id"] == first["id"] and top["score"] == pytest.approx(1.0, abs=1e-4)
    assert top["parts"]["relevance"] == pytest.approx(top["score"], abs=1e-4)  # cosine ranking: the score is relevance
    assert 0 < top["parts"]["recency"] <= 1 and top["parts"]["importance"] == first["importance"]
    plans = admin.post("/v1/search", json={"user": "ann", "query": "x", "k": 5, "filters": {"kind": "plan"}}).json()
    assert [r["memory"]["id"] for r in plans["results"]] == ["rec-1"]
    ranged = admin.post(
        "/v1/search", json={"user": "ann", "query": "x", "k": 5, "filters": {"until": "2024-03-01T13:00:00Z"}}
    ).json()
    assert sorted(r["memory"]["content"] for r in ranged["results"]) == ["cat dog bird", "one two three"]
    many = admin.post("/v1/search", json={"users": ["ann", "bob"], "query": "red", "k": 1}).json()["by_user"]
    assert len(many["ann"]) == 1 and many["bob"] == []

    assert first["outcome"] == "added" and first["updated_at"] == first["t"]
    got = admin.get(f"/v1/memories/{first['id']}", params={"user": "ann"}).json()["memory"]
    assert got == {**first, "outcome": None}  # a read did no write
    again = admin.post("/v1/memories", json={"user": "ann", "text": "red green blue", "metadata": {"topic": "colours"}})
    assert again.json()["memory"]["outcome"] == "unchanged" and again.json()["memory"]["id"] == first["id"]
    updated = admin.patch(f"/v1/memories/{first['id']}", json={"user": "ann", "text": "red green"}).json()["memory"]
    assert updated["id"] == first["id"] and updated["content"] == "red green" and updated["outcome"] == "updated"
    history = admin.get(f"/v1/memories/{first['id']}/history", params={"user": "ann"}).json()["memories"]
    assert [m["content"] for m in history] == ["red green blue", "red green"]
    assert history[0]["superseded_by"] == first["id"]

    page = admin.get("/v1/memories", params={"user": "ann", "limit": 2}).json()
    assert len(page["memories"]) == 2 and page["next_offset"] == 2
    rest = admin.get("/v1/memories", params={"user": "ann", "limit": 2, "offset": 2}).json()
    assert len(rest["memories"]) == 2 and rest["next_offset"] == 4
    assert admin.get("/v1/memories", params={"user": "ann", "limit": 2, "offset": 4}).json()["next_offset"] is None
    filtered = admin.get(
        "/v1/memories", params={"user": "ann", "filters": json.dumps({"metadata": {"topic": "colours"}})}
    ).json()
    assert [m["id"] for m in filtered["memories"]] == [first["id"]]

    admin.post("/v1/memories", json={"user": "bob", "text": "bob's"})
    assert admin.get("/v1/users").json()["users"] == ["ann", "bob"]
    assert admin.delete(f"/v1/memories/{first['id']}", params={"user": "ann"}).json() == {"deleted": True}
    assert admin.delete(f"/v1/memories/{first['id']}", params={"user": "ann"}).json() == {"deleted": False}
    error_of(admin.get(f"/v1/memories/{first['id']}~1", params={"user": "ann"}), 404, "not_found")  # versions too
    assert admin.delete("/v1/memories", params={"user": "ann"}).json() == {"deleted": 3}
    assert admin.get("/v1/users").json()["users"] == ["bob"]


def test_ids_with_slashes_and_derived_reflections(admin):
    admin.post("/v1/memories", json={"user": "ann", "text": "turn one", "id": "conv-26/D1:3"})
    record = {"id": "r1", "owner": "ann", "t": "2024-03-02T00:00:00Z", "content": "about turn one"}
    admin.post(
        "/v1/memories", json={"user": "ann", "record": {**record, "kind": "reflection", "links": ["conv-26/D1:3"]}}
    )
    assert admin.get("/v1/memories/conv-26%2FD1%3A3", params={"user": "ann"}).json()["memory"]["content"] == "turn one"
    derived = admin.get("/v1/memories/conv-26%2FD1%3A3/derived", params={"user": "ann"}).json()["memories"]
    assert [m["id"] for m in derived] == ["r1"] and derived[0]["links"] == ["conv-26/D1:3"]
    assert admin.delete("/v1/memories/conv-26%2FD1%3A3", params={"user": "ann"}).json()["deleted"] is True
    assert admin.get("/v1/memories/r1", params={"user": "ann"}).status_code == 404  # deleted with its source


def test_manager_routes_show_tiers_and_gate_decisions(admin):
    for text in ("I adopted a beagle named Rex", "Rex likes the park", "my sister lives in Lyon"):
        observed = admin.post("/v1/users/ann/observe", json={"text": text, "importance": 0.9})
        assert observed.status_code == 200, observed.text
    context = admin.post("/v1/users/ann/context", json={"query": "what is my dog called?", "k": 2}).json()
    assert isinstance(context["recalled"], bool) and isinstance(context["gate_score"], float)
    assert len(context["messages"]) == 3
    tiers = admin.get("/v1/users/ann/manager").json()
    assert [m["content"] for m in tiers["context"]][0] == "I adopted a beagle named Rex"
    assert tiers["gate"][0]["move"] == "GATE" and tiers["gate"][0]["detail"]["query"] == "what is my dog called?"
    assert tiers["moves"]["OBSERVE"] == 3
    kept = admin.get("/v1/memories", params={"user": "ann"}).json()["memories"]
    assert len(kept) == 3  # written through: acknowledged observations are in the store
    metrics = admin.get("/metrics").text
    assert 'memnets_gate_decisions_total{recall="' in metrics


def test_health_metrics_docs_and_inspector(server, admin):
    with http(server, token=None) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        ready = anonymous.get("/readyz").json()
        assert ready == {"status": "ready", "batching": True}  # not the store's path or host (no token needed)
        spec = anonymous.get("/openapi.json").json()
        assert {"/v1/memories", "/v1/search", "/v1/users", "/v1/memories/{id}"} <= set(spec["paths"])
        docs = anonymous.get("/docs").text
        assert "/openapi.json" in docs and "cdn" not in docs.lower() and '<script src="http' not in docs
        page = anonymous.get("/ui/")
        assert page.status_code == 200 and "memnets inspector" in page.text
        for asset in ("app.js", "style.css"):
            assert anonymous.get(f"/ui/{asset}").status_code == 200
        assert "http" not in "".join(
            line for line in page.text.splitlines() if "<script" in line or "<link" in line
        )  # nothing loaded from another origin
        error_of(anonymous.get("/metrics"), 401, "unauthorized")
    admin.post("/v1/search", json={"user": "ann", "query": "anything"})
    admin.post("/v1/memories", json={"user": "ann", "text": "a b c"})
    metrics = admin.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'memnets_requests_total{method="POST",route="/v1/search",status="200"}' in text
    assert "memnets_request_seconds_bucket" in text and "memnets_encode_batch_size_count" in text
    assert 'memnets_errors_total{code="unauthorized"}' in text
    with http(server, token=ANN) as ann:
        error_of(ann.get("/metrics"), 403, "forbidden")
    pack = admin.get("/v1/pack").json()
    assert pack == {"pack": None, "ranker": "cosine", "batching": True}


# (method, path, json body, query params) on user ann's memory "m" (made by the fixture below)
ROUTES = [
    ("POST", "/v1/memories", {"user": "ann", "text": "written"}, None),
    ("POST", "/v1/search", {"user": "ann", "query": "q"}, None),
    ("POST", "/v1/search", {"users": ["ann"], "query": "q"}, None),
    ("GET", "/v1/memories/m", None, {"user": "ann"}),
    ("PATCH", "/v1/memories/m", {"user": "ann", "metadata": {"v": 2}}, None),
    ("GET", "/v1/memories/m/history", None, {"user": "ann"}),
    ("GET", "/v1/memories/m/derived", None, {"user": "ann"}),
    ("GET", "/v1/memories", None, {"user": "ann"}),
    ("POST", "/v1/users/ann/observe", {"text": "observed"}, None),
    ("POST", "/v1/users/ann/context", {"query": "q"}, None),
    ("GET", "/v1/users/ann/manager", None, None),
    ("DELETE", "/v1/memories/m", None, {"user": "ann"}),
    ("DELETE", "/v1/memories", None, {"user": "ann"}),
]


@pytest.mark.parametrize(("method", "path", "body", "params"), ROUTES, ids=[f"{r[0]} {r[1]}" for r in ROUTES])
@pytest.mark.parametrize(
    ("who", "status"),
    [("admin", 200), ("own user", 200), ("other user", 403), ("no token", 401), ("wrong token", 401)],
)
def test_auth_matrix(server, admin, method, path, body, params, who, status):
    admin.post("/v1/memories", json={"user": "ann", "text": "ann's memory", "id": "m"}).raise_for_status()
    token = {"admin": ADMIN, "own user": ANN, "other user": BOB, "no token": None, "wrong token": ADMIN + "x"}[who]
    with http(server, token) as client:
        response = client.request(method, path, json=body, params=params)
    assert response.status_code == status, response.text
    if status == 401:
        assert response.headers["www-authenticate"] == "Bearer" and response.json()["error"]["code"] == "unauthorized"
    if status == 403:
        assert "'bob'" in response.json()["error"]["message"] and "'ann'" in response.json()["error"]["message"]
    if status != 200:  # refused before anything was written or deleted
        assert admin.get("/v1/memories/m", params={"user": "ann"}).json()["memory"]["content"] == "ann's memory"
        assert [m["id"] for m in admin.get("/v1/memories", params={"user": "ann"}).json()["memories"]] == ["m"]


def test_scoped_tokens_see_their_user_and_write_as_their_agent(server, admin):
    admin.post("/v1/memories", json={"user": "ann", "text": "ann's"}).raise_for_status()
    admin.post("/v1/memories", json={"user": "bob", "text": "bob's"}).raise_for_status()
    with http(server, ANN) as ann, http(server, PLANNER) as planner:
        assert ann.get("/v1/users").json()["users"] == ["ann"]
        assert planner.get("/v1/users").json()["users"] == []  # ann has no memory of the planner yet
        assert ann.post("/v1/search", json={"users": ["ann", "bob"], "query": "q"}).status_code == 403
        written = planner.post("/v1/memories", json={"user": "ann", "text": "from the planner"}).json()["memory"]
        assert written["agent"] == "planner"
        assert planner.get("/v1/users").json()["users"] == ["ann"]
        refused = planner.post("/v1/memories", json={"user": "ann", "text": "as another", "agent": "critic"})
        assert error_of(refused, 403, "forbidden")["message"].count("planner") == 1
        as_record = {"id": "x", "owner": "ann", "t": "2024-01-01T00:00:00Z", "content": "c", "agent": "critic"}
        assert planner.post("/v1/memories", json={"user": "ann", "record": as_record}).status_code == 403
        lower = httpx.get(f"{server.url}/v1/users", headers={"Authorization": f"bearer {ANN}"})
        assert lower.status_code == 200  # the scheme is case-insensitive
        basic = httpx.get(f"{server.url}/v1/users", headers={"Authorization": f"Basic {ANN}"})
        assert basic.status_code == 401


def memories_in(value) -> list[dict]:
    """Every memory object anywhere in a JSON answer (a dict with an owner and an id)."""
    if isinstance(value, dict):
        found = [value] if {"owner", "id", "content"} <= set(value) else []
        return found + [m for inner in value.values() for m in memories_in(inner)]
    if isinstance(value, list):
        return [m for inner in value for m in memories_in(inner)]
    return []


MANAGER_ROUTES = {"/v1/users/ann/observe", "/v1/users/ann/context", "/v1/users/ann/manager"}
ID_ROUTES = {"/v1/memories/m", "/v1/memories/m/history", "/v1/memories/m/derived"}


@pytest.mark.parametrize(("method", "path", "body", "params"), ROUTES, ids=[f"{r[0]} {r[1]}" for r in ROUTES])
@pytest.mark.parametrize(
    ("who", "token"),
    [("own agent", PLANNER), ("own agent and session", PLANNER_S1), ("own session", S1),
     ("other agent", CRITIC), ("own agent, other session", PLANNER_S2)],
)  # fmt: skip
def test_scope_matrix_of_narrowed_tokens(server, admin, method, path, body, params, who, token):
    """A token narrowed to an agent and/or a session of ann: 403 on a memory of another scope, reads
    that see its scope only, writes and scope deletions in its scope only, no manager (it spans all)."""
    m = {"user": "ann", "text": "ann's planner memory", "id": "m", "agent": "planner", "session": "s1"}
    fixture = [m, {"text": "the critic's", "agent": "critic", "session": "s1"}, {"text": "no scope at all"}]
    for memory in fixture:
        admin.post("/v1/memories", json={"user": "ann", **memory}).raise_for_status()
    admin.post("/v1/memories", json={"user": "bob", "text": "bob's", "agent": "planner", "session": "s1"})
    scope = SCOPES[token]

    def in_scope(memory: dict) -> bool:
        return all(memory.get(name) == value for name, value in scope.items())

    holds_m = in_scope(m)
    with http(server, token) as client:
        response = client.request(method, path, json=body, params=params)
    if path in MANAGER_ROUTES:
        status = 403
    elif path in ID_ROUTES:
        status = 200 if holds_m else 403
    else:
        status = 200
    assert response.status_code == status, response.text
    if status == 403:
        message = error_of(response, 403, "forbidden")["message"]
        assert all(repr(value) in message for value in scope.values())
    seen = memories_in(response.json())
    assert all(memory["owner"] == "ann" for memory in seen)
    assert all(memory[name] == value for memory in seen for name, value in scope.items())  # nothing of another scope
    if status == 200 and (method, path) in (("GET", "/v1/memories"), ("POST", "/v1/search")) and holds_m:
        assert "m" in [memory["id"] for memory in seen]  # ... and its own scope's memories
    if not holds_m:  # another scope's memory: untouched
        assert admin.get("/v1/memories/m", params={"user": "ann"}).json()["memory"]["content"] == m["text"]
    if method == "DELETE" and path == "/v1/memories":  # its own scope's memories, and only those
        assert response.json()["deleted"] == sum(map(in_scope, fixture))
        listed = admin.get("/v1/memories", params={"user": "ann"}).json()["memories"]
        assert sorted(m["content"] for m in listed) == sorted(f["text"] for f in fixture if not in_scope(f))
    assert admin.get("/v1/users").json()["users"] == ["ann", "bob"]  # bob's memory is untouched


def test_narrowed_tokens_write_in_their_scope_only(server, admin):
    critic = {"user": "ann", "text": "Ann's trip to Porto is in May", "agent": "critic", "session": "s1", "id": "c"}
    admin.post("/v1/memories", json=critic).raise_for_status()
    with http(server, PLANNER_S1) as planner, http(server, S1) as session:
        written = planner.post("/v1/memories", json={"user": "ann", "text": critic["text"]}).json()["memory"]
        assert (written["agent"], written["session"], written["outcome"]) == ("planner", "s1", "added")
        assert written["id"] != "c"  # the same words in another scope are this scope's own memory
        batch = planner.post("/v1/memories", json={"user": "ann", "items": ["one", "two"]}).json()["memories"]
        assert {(m["agent"], m["session"]) for m in batch} == {("planner", "s1")}
        by_session = session.post("/v1/memories", json={"user": "ann", "text": "any agent", "agent": "critic"})
        assert (by_session.json()["memory"]["agent"], by_session.json()["memory"]["session"]) == ("critic", "s1")
        refusals = [
            planner.post("/v1/memories", json={"user": "ann", "text": "x", "session": "s2"}),
            planner.post("/v1/memories", json={"user": "ann", "text": "x", "id": "c"}),  # overwrite the critic's
            planner.post("/v1/memories", json={"user": "ann", "text": "x", "replaces": "c"}),
            planner.post("/v1/memories", json={"user": "ann", "items": ["x"], "ids": ["c"]}),
            planner.post(
                "/v1/memories",
                json={
                    "user": "ann",
                    "record": {
                        "id": "r",
                        "owner": "ann",
                        "t": "2024-01-01T00:00:00Z",
                        "content": "c",
                        "agent": "planner",
                        "session": "s2",
                    },
                },
            ),  # fmt: skip
            planner.delete("/v1/memories", params={"user": "ann", "agent": "critic"}),
            session.delete("/v1/memories", params={"user": "ann", "session": "s2"}),
        ]
        for refused in refusals:
            error_of(refused, 403, "forbidden")
        kept = admin.get("/v1/memories/c", params={"user": "ann"}).json()["memory"]
        assert (kept["content"], kept["agent"], kept["session"]) == (critic["text"], "critic", "s1")
        assert admin.get("/v1/memories/r", params={"user": "ann"}).status_code == 404
        assert planner.get("/v1/whoami").json() == {"admin": False, "user": "ann", "agent": "planner", "session": "s1"}
        assert planner.get("/v1/users").json()["users"] == ["ann"]
        assert planner.delete("/v1/memories", params={"user": "ann"}).json() == {"deleted": 3}  # its scope's only
        assert planner.get("/v1/users").json()["users"] == []  # nothing left in its scope
    contents = sorted(m["content"] for m in admin.get("/v1/memories", params={"user": "ann"}).json()["memories"])
    assert contents == ["Ann's trip to Porto is in May", "any agent"]
    assert admin.get("/v1/whoami").json() == {"admin": True, "user": None, "agent": None, "session": None}


@pytest.mark.parametrize(
    ("request_args", "status", "code", "field"),
    [
        ({"json": {"user": "", "text": "x"}}, 422, "invalid_argument", "user"),
        ({"json": {"user": 7, "text": "x"}}, 422, "invalid_type", "user"),
        ({"json": {"user": "ann", "text": "   "}}, 422, "invalid_argument", "text"),
        ({"json": {"user": "ann", "text": "x", "importance": 2}}, 422, "invalid_argument", "importance"),
        ({"json": {"user": "ann", "text": "x", "kind": "dream"}}, 422, "invalid_argument", "kind"),
        ({"json": {"user": "ann", "text": "x", "t": "yesterday"}}, 422, "invalid_argument", "t"),
        ({"json": {"user": "ann", "text": "x", "colour": "red"}}, 422, "invalid_type", "colour"),
        ({"json": {"user": "ann"}}, 400, "malformed_request", "text"),
        ({"json": {"user": "ann", "text": "x", "items": ["y"]}}, 400, "malformed_request", "text"),
        ({"json": {"user": "ann", "items": "one"}}, 400, "malformed_request", "items"),
        ({"json": {"user": "ann", "items": [{"content": "no id"}]}}, 422, "invalid_type", None),
        ({"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "malformed_request", "body"),
        ({"json": [1, 2]}, 400, "malformed_request", "body"),
    ],
)
def test_bad_requests_are_4xx_naming_the_problem_and_write_nothing(admin, request_args, status, code, field):
    response = admin.post("/v1/memories", **request_args)
    error = error_of(response, status, code)
    if field is not None:
        assert error["field"] == field and field in error["message"]
    assert admin.get("/v1/users").json()["users"] == []


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "field"),
    [
        ("POST", "/v1/search", {"json": {"user": "ann", "query": "q", "k": 0}}, 422, "k"),
        ("POST", "/v1/search", {"json": {"user": "ann", "query": "q", "filters": {"colour": 1}}}, 422, "filters"),
        ("GET", "/v1/memories", {"params": {"user": "ann", "limit": "many"}}, 422, "limit"),
        ("GET", "/v1/memories", {"params": {"user": "ann", "filters": "{x"}}, 400, "filters"),
        ("GET", "/v1/memories", {"params": {}}, 422, "user"),
        ("PATCH", "/v1/memories/missing", {"json": {"user": "ann", "text": "t"}}, 404, "id"),
        ("PATCH", "/v1/memories/missing", {"json": {"user": "ann"}}, 422, "text"),
        # a field or query parameter the route does not take is named (it had been ignored, or refused naming none)
        ("POST", "/v1/search", {"json": {"user": "ann", "query": "q", "colour": 1}}, 422, "colour"),
        ("POST", "/v1/search", {"json": {"user": "ann", "query": "q"}, "params": {"k": "3"}}, 422, "k"),
        ("PATCH", "/v1/memories/missing", {"json": {"user": "ann", "text": "t", "colour": 1}}, 422, "colour"),
        ("GET", "/v1/memories", {"params": {"user": "ann", "agent": "planner"}}, 422, "agent"),
        ("GET", "/v1/memories/missing", {"params": {"user": "ann", "session": "s1"}}, 422, "session"),
        ("GET", "/v1/nothing-here", {}, 404, None),
        ("PUT", "/v1/users", {}, 405, None),
    ],
)
def test_other_bad_requests(admin, method, path, kwargs, status, field):
    response = admin.request(method, path, **kwargs)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] and (field is None or error["field"] == field)


def test_the_door_guard_refuses_big_bodies_foreign_hosts_and_origins(server, admin):
    """The guard's refusals have the one documented error shape: {"error": {"code", "message", ...}}."""
    big = admin.post("/v1/memories", content=b"x" * 70000, headers={"content-type": "application/json"})
    error = big.json()["error"]
    assert big.status_code == 413 and error["code"] == "too_large" and "65536 bytes" in error["message"]
    rebound = admin.get("/v1/users", headers={"Host": "evil.example"})
    error = rebound.json()["error"]
    assert rebound.status_code == 421 and error["code"] == "misdirected" and "evil.example" in error["message"]
    cross = admin.post("/v1/memories", json={"user": "ann", "text": "x"}, headers={"Origin": "http://evil.example"})
    error = cross.json()["error"]
    assert cross.status_code == 403 and error["code"] == "forbidden" and "evil.example" in error["message"]
    with memnets.Client(server.url, token=ADMIN) as client, pytest.raises(ServerError) as raised:
        client.add("x" * 70000, user="ann")
    assert (raised.value.status, raised.value.code) == (413, "too_large")  # the Client reads the code
    same = admin.post("/v1/memories", json={"user": "ann", "text": "x"}, headers={"Origin": server.url})
    assert same.status_code == 200  # the inspector's own requests
    assert admin.get("/v1/users").json()["users"] == ["ann"]


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"user": "ann", "session": ""}, "entry 0: session must be a non-empty string"),
        ({"user": "ann", "agent": 7}, "entry 0: agent must be a non-empty string"),
        ({"user": "ann", "team": "x"}, r"entry 0 must map the token to a user or to \{user, agent, session\}"),
        ({"agent": "planner"}, "entry 0 must map"),
    ],
)
def test_a_tokens_file_with_a_bad_scope_is_refused(tmp_path, entry, match):
    from memnets.server.auth import Principal, Tokens

    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"t": entry}))
    with pytest.raises(ValueError, match=match):
        Tokens.load(None, path)
    path.write_text(json.dumps({"t": {"user": "ann", "agent": "planner", "session": "s1"}}))
    principal = Tokens.load(None, path).principal("Bearer t")
    assert principal == Principal(admin=False, user="ann", agent="planner", session="s1")
    assert principal.scope == {"agent": "planner", "session": "s1"}
