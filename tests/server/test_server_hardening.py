"""The server-side breaks of the second security review (issue 35), each against a real `memnets serve
http` process: the pack manifest is never re-read after load (5), slow clients are cut off and
cannot lock others out (8), hostile numbers are 4xx with the documented error shape (12), and the
access log keeps no user names, ids or filter values (13)."""

from __future__ import annotations

import json
import socket
import uuid

import httpx
import pytest

from memnets.server.testing import ServerProcess

ADMIN = "admin-" + uuid.uuid4().hex
ANN = "ann-" + uuid.uuid4().hex
SECRET_USER = "user-" + uuid.uuid4().hex  # a name the access log must not keep
SECRET_VALUE = "value-" + uuid.uuid4().hex  # a filter value the access log must not keep
WAIT_S = 60  # how long a test waits for the server to close a socket (a bound, not a measurement)


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    """A server with a pack, an admin and a scoped token, and 1 s header and body timeouts."""
    from memnets.nn.encoder import MemoryEncoder
    from memnets.pack import export_pack

    folder = tmp_path_factory.mktemp("hardening")
    pack = export_pack(folder / "pack", MemoryEncoder.from_pretrained(tiny_model_dir), metrics={"recall@5": 0.5})
    tokens = folder / "tokens.json"
    tokens.write_text(json.dumps({ANN: "ann"}))
    args = ["--pack", str(pack), "--token-env", "MEMNETS_TEST_ADMIN", "--tokens", str(tokens)]
    args += ["--header-timeout", "1", "--body-timeout", "1"]
    with ServerProcess(folder / "memory", *args, env={"MEMNETS_TEST_ADMIN": ADMIN}) as process:
        process.pack, process.tokens = pack, tokens
        yield process.wait_ready(token=ADMIN)


def client(server, token=ADMIN) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def half_sent(server, request: bytes) -> socket.socket:
    """A connection that sent ``request`` (part of one) and then nothing."""
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(request)
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (without answering) within WAIT_S seconds."""
    sock.settimeout(WAIT_S)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:  # closed with the half-sent request unread
        return True
    except TimeoutError:
        return False
    finally:
        sock.close()


# ---------------------------------------------------------------- 5: nothing answered is re-read from disk
def test_the_pack_manifest_is_the_one_read_at_load_not_a_link_put_there_later(server):
    """Before: /v1/pack read manifest.json on every call and followed a link, so a manifest replaced by
    a link to the tokens file handed every token to any token holder."""
    manifest = server.pack / "manifest.json"
    loaded = json.loads(manifest.read_text())
    manifest.unlink()
    manifest.symlink_to(server.tokens)
    with client(server, ANN) as ann:
        answer = ann.get("/v1/pack")
    assert answer.status_code == 200
    assert ANN not in answer.text and answer.json()["pack"] == loaded


# ---------------------------------------------------------------- 8: slow clients
def test_half_sent_requests_are_closed_and_a_client_is_answered_meanwhile(server):
    """Before: a request head or body that never completed held its connection forever."""
    heads = [half_sent(server, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n") for _ in range(50)]
    body = half_sent(server, b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
    with client(server) as admin:
        assert admin.get("/readyz").status_code == 200
    assert all(closed_by_server(sock) for sock in heads)
    assert closed_by_server(body)


def test_a_complete_request_on_a_kept_alive_connection_is_answered(server):
    """The deadlines bound the reading of a request, never the app's answer nor a reused connection."""
    with client(server) as admin:
        for _ in range(3):
            assert admin.post("/v1/search", json={"user": "ann", "query": "anything"}).status_code == 200


def test_over_the_connection_limit_the_longest_waiting_connection_goes(tiny_model_dir, tmp_path):
    """Before: no limit; half-sent connections piled up until the file descriptors ran out and the
    server accepted nobody. Now the connection waiting longest for its request head is closed."""
    args = ["--encoder", str(tiny_model_dir), "--header-timeout", "0", "--max-connections", "16"]
    with ServerProcess(tmp_path / "memory", *args) as process:
        process.wait_ready()
        first = [half_sent(process, b"GET /healthz HTTP/1.1\r\n") for _ in range(8)]
        later = [half_sent(process, b"GET /healthz HTTP/1.1\r\n") for _ in range(30)]
        with httpx.Client(base_url=process.url, timeout=30) as fresh:
            assert fresh.get("/healthz").status_code == 200
        assert all(closed_by_server(sock) for sock in first)  # no header timeout: evicted, oldest first
        for sock in later:
            sock.close()


# ---------------------------------------------------------------- 12: hostile numbers are 4xx
@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("GET", "/v1/memories", {"params": {"user": "ann", "limit": 10**20}}),
        ("GET", "/v1/memories", {"params": {"user": "ann", "offset": 10**20}}),
        ("POST", "/v1/memories", {"json": {"user": "ann", "text": "a fact", "ttl": 1e300}}),
        (
            "POST",
            "/v1/search",
            {"json": {"user": "ann", "query": "a fact", "filters": {"since": "0001-01-01T00:00:00+14:00"}}},
        ),
        (
            "GET",
            "/v1/memories",
            {"params": {"user": "ann", "filters": json.dumps({"since": "0001-01-01T00:00:00+14:00"})}},
        ),
    ],
)
def test_hostile_numbers_are_4xx_with_the_error_shape(server, method, path, kwargs):
    """Before: OverflowError from SQLite, timedelta or datetime: a 500 where docs/server.md promises 4xx."""
    with client(server) as admin:
        answer = admin.request(method, path, **kwargs)
        assert 400 <= answer.status_code < 500, answer.text
        error = answer.json()["error"]
        assert set(error) == {"code", "message", "field", "type"} and error["message"]
        assert (error["code"], error["type"]) == ("invalid_argument", "ValueError")  # the client raises ValueError
        assert admin.get("/v1/memories", params={"user": "ann"}).json()["memories"] == []  # nothing written


# ---------------------------------------------------------------- deep JSON (a QA pass, session 11)
def deep(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels):
        value = {"a": value}
    return value


def test_deeply_nested_metadata_is_refused_and_the_users_reads_keep_working(server):
    """Before: metadata 500 levels deep was stored (a 500 answered after the write), then every listing
    and search of its user was a 500 (the answer's encoding ran out of stack), for every token."""
    with client(server, ANN) as ann:
        answer = ann.post("/v1/memories", json={"user": "ann", "text": "a deep fact", "metadata": deep(500)})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "invalid_argument" and "nested" in answer.json()["error"]["message"]
        shallow = ann.post("/v1/memories", json={"user": "ann", "text": "a shallow fact", "metadata": deep(40)})
        assert shallow.status_code == 200, shallow.text
        assert ann.post("/v1/search", json={"user": "ann", "query": "a deep fact"}).status_code == 200
        listed = ann.get("/v1/memories", params={"user": "ann"})
        assert [m["content"] for m in listed.json()["memories"]] == ["a shallow fact"]
        gone = ann.delete(f"/v1/memories/{shallow.json()['memory']['id']}", params={"user": "ann"})
        assert gone.json() == {"deleted": True}  # the module's other tests expect ann's memory empty


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/search"])
def test_a_json_body_nested_past_the_parsers_stack_is_a_400_even_without_a_token(server, path):
    """Before: the hot routes' body parse let RecursionError through: a 500 and a traceback per request."""
    body = "[" * 5000 + "]" * 5000
    answer = httpx.post(server.url + path, content=body, headers={"Content-Type": "application/json"}, timeout=30)
    assert 400 <= answer.status_code < 500, answer.text
    assert set(answer.json()["error"]) == {"code", "message", "field", "type"}


def test_a_filters_query_nested_past_the_parsers_stack_is_a_400_naming_filters(server):
    """Before: the listing's query parse caught JSONDecodeError only: 500 levels of $and (a 9 KB query
    string) raised RecursionError, a 500 with a traceback in the log. Request JSON has one parser now."""
    filters = '{"$and":[' * 500 + "{}" + "]}" * 500
    with client(server, ANN) as ann:
        answer = ann.get("/v1/memories", params={"user": "ann", "filters": filters})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["field"]) == ("malformed_request", "filters") and "nested" in error["message"]
    assert "RecursionError" not in server.log.read_text(errors="replace")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/search", '{"user": "ann", "query": "a fact", "filters": %s}'),  # the hot route
        ("PATCH", "/v1/memories/m1", '{"user": "ann", "text": "a fact", "filters": %s}'),  # parsed by FastAPI
    ],
)
def test_a_filter_as_deep_as_the_parser_takes_is_a_4xx_at_every_depth(server, method, path, body):
    """Before: a filter the JSON parser could just take (~480 levels, the bound set by the server's stack)
    overflowed the stack in the walk that turns its times back into datetimes: a 500 at a level or two."""
    with client(server, ANN) as ann:
        for levels in range(400, 560):
            filters = '{"$and":[' * levels + "{}" + "]}" * levels
            answer = ann.request(method, path, content=body % filters, headers={"Content-Type": "application/json"})
            assert 400 <= answer.status_code < 500, (levels, answer.text)


# ---------------------------------------------------------------- 13: the access log
def test_the_access_log_keeps_routes_not_user_names_ids_or_filter_values(server):
    """Before: uvicorn's access log kept every path and query string (user names, memory ids, filter values)."""
    with client(server) as admin:
        added = admin.post("/v1/memories", json={"user": SECRET_USER, "text": "a fact to find"}).json()["memory"]
        filters = json.dumps({"metadata": {"tag": SECRET_VALUE}})
        admin.get("/v1/memories", params={"user": SECRET_USER, "filters": filters}).raise_for_status()
        admin.get(f"/v1/memories/{added['id']}", params={"user": SECRET_USER}).raise_for_status()
        admin.delete("/v1/memories", params={"user": SECRET_USER}).raise_for_status()
    log = server.log.read_text(errors="replace")
    assert '"GET /v1/memories/{id:path} HTTP/1.1" 200' in log  # the requests are logged, by route
    for secret in (SECRET_USER, SECRET_VALUE, added["id"]):
        assert secret not in log
