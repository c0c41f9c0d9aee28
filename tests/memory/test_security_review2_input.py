"""Input validation breaks of the second security review (issue 35: breaks 1, 4, 6, 7 and 12), each
checked where it was found: through ``memnets.open`` on both stores (the embedded archive and a real
PostgreSQL with pgvector) and, for the REST doors, through a real ``memnets serve http`` process on
either store, with ``memnets.Client`` or plain HTTP.

1. ids: ``"."`` and ``".."`` (and such segments), backslashes and control characters are not ids;
   ``Client.delete(".")`` went out as ``DELETE /v1/memories`` and deleted every memory of the user.
4. metadata: NaN, Infinity and 1e400 were stored (the add answered 422) and broke every later listing.
6. filter cost: a ``$in`` of 200,000 values held the store for seconds; filters are bounded.
7. lineage: a caller's record could set ``superseded_by`` (a forged row in another's history); a
   ``superseded_by`` cycle already in a store made history and delete recurse to a 500.
12. numeric ranges: a 400-deep ``$and``, limit/offset 10**20, ttl 1e300 and a ``since`` before
    year 1 in UTC were RecursionError/OverflowError instead of a ValueError naming the input.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import httpx
import numpy as np
import pytest

import memnets
from memnets.records import Memory
from memnets.server.testing import ServerProcess
from memnets.store.filters import MAX_FILTER_CLAUSES, MAX_FILTER_DEPTH, MAX_FILTER_VALUES

ADMIN = "admin-" + uuid.uuid4().hex
ANN = "ann-" + uuid.uuid4().hex  # a token of user ann only
T0 = datetime(2024, 3, 1, tzinfo=UTC)


@pytest.fixture
def memory(location, encoder):
    """memnets.open on each store (conftest's ``location``: an archive folder or a PostgreSQL table)."""
    where, options = location
    with memnets.open(where, encoder=encoder, **options) as opened:
        yield opened


def _server(location, tiny_model_dir, folder: Path, *extra: str) -> ServerProcess:
    (folder / "tokens.json").write_text(json.dumps({ANN: "ann"}))
    return ServerProcess(
        location,
        "--encoder",
        str(tiny_model_dir),
        "--tokens",
        str(folder / "tokens.json"),
        "--token-env",
        "MEMNETS_TEST_ADMIN",
        *extra,
        env={"MEMNETS_TEST_ADMIN": ADMIN},
    )


@pytest.fixture(scope="module")
def embedded_server(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("review2-embedded")
    with _server(folder / "memory", tiny_model_dir, folder) as process:
        yield process.wait_ready(token=ADMIN)


@pytest.fixture(scope="module")
def postgres_server(pg_url, tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("review2-postgres")
    table = "rv" + uuid.uuid4().hex[:12]
    with _server(pg_url, tiny_model_dir, folder, "--set", f"table={table}") as process:
        yield process.wait_ready(token=ADMIN)


@pytest.fixture(params=["server-embedded", "server-postgres"])
def server(request):
    """A real server on each store, emptied after the test."""
    process = request.getfixturevalue("embedded_server" if request.param == "server-embedded" else "postgres_server")
    yield process
    with memnets.Client(process.url, token=ADMIN) as admin:
        for user in admin.users():
            admin.delete_all(user=user)


def _http(server: ServerProcess, token: str = ADMIN) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


# ---------------------------------------------------------------------- 1. ids
BAD_IDS = [".", "..", "a/..", "./b", "a/./b", "a\\b", "line\nbreak", "nul\x00", "del\x7f", "x" * 600]


def test_client_delete_of_a_dot_id_is_refused_and_deletes_nothing(server):
    with memnets.Client(server.url, token=ADMIN) as client:
        client.add("I adopted a beagle named Rex", user="ann", id="rex")
        client.add("turn one", user="ann", id="conv-26/D1:3")  # a slash stays a valid id (LoCoMo's, the manager's)
        for bad in BAD_IDS:
            for call in (client.delete, client.get, client.history):
                with pytest.raises(ValueError, match="id"):
                    call(bad, user="ann")
            with pytest.raises(ValueError, match="id"):
                client.update(bad, "new text", user="ann")
        assert sorted(m.id for m in client.list_memories(user="ann")) == ["conv-26/D1:3", "rex"]
        assert client.get("conv-26/D1:3", user="ann").content == "turn one"
        assert client.delete("conv-26/D1:3", user="ann") is True
        assert [m.id for m in client.list_memories(user="ann")] == ["rex"]


def test_rest_add_refuses_a_dot_id_naming_it(server):
    with _http(server) as http:
        for bad in (".", "..", "a/../b"):
            answer = http.post("/v1/memories", json={"user": "ann", "text": "some text", "id": bad})
            assert 400 <= answer.status_code < 500 and repr(bad) in answer.json()["error"]["message"], answer.text
        assert http.get("/v1/memories", params={"user": "ann"}).json()["memories"] == []


@pytest.mark.parametrize("bad", BAD_IDS)
def test_api_refuses_ids_outside_the_grammar_naming_them(memory, bad):
    errors = []
    for call in (
        lambda: memory.add("some text", user="ann", id=bad),
        lambda: memory.add_many(["some text"], user="ann", ids=[bad]),
        lambda: memory.add(Memory(id=bad, owner="ann", t=T0, content="some text"), user="ann"),
        lambda: memory.manager("ann").observe("some text", id=bad),
        lambda: memory.get(bad, user="ann"),
        lambda: memory.history(bad, user="ann"),
        lambda: memory.delete(bad, user="ann"),
        lambda: memory.update(bad, "new", user="ann"),
    ):
        with pytest.raises(ValueError) as error:
            call()
        errors.append(str(error.value))
    assert all("id" in message for message in errors), errors
    assert all(f"{bad!r:.80}" in message or "characters" in message for message in errors), errors
    assert memory.list_memories(user="ann") == []


def test_ids_in_the_grammar_keep_working(memory):
    for memory_id in ("plain", "conv-26/D1:3", "ann/0123456789ab", "a.b", "..a", "x" * 512, "café"):
        assert memory.add(f"text of {memory_id}", user="ann", id=memory_id).id == memory_id
        assert memory.get(memory_id, user="ann").content == f"text of {memory_id}"
    memory.update("plain", "changed", user="ann")
    assert [m.id for m in memory.history("plain", user="ann")] == ["plain~1", "plain"]
    assert memory.get("plain~1", user="ann").content == "text of plain"  # an older version, by its own id
    with pytest.raises(ValueError, match="reserved for older versions"):
        memory.add("text", user="ann", id="plain~9")


# ---------------------------------------------------------------------- 4. finite metadata
NON_FINITE = [float("nan"), float("-inf"), float("inf")]


@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "-inf", "inf"])
def test_non_finite_metadata_is_refused_before_anything_is_written(memory, value):
    kept = memory.add("kept memory", user="ann", id="kept", metadata={"n": 1})
    with pytest.raises(ValueError, match=r"metadata\['deep'\]\[1\]\['v'\]"):
        memory.add("poison", user="ann", metadata={"deep": [1, {"v": value}]})
    with pytest.raises(ValueError, match="metadata"):
        memory.add_many(["fine", "poison"], user="ann", metadata={"v": value})
    with pytest.raises(ValueError, match="metadata"):
        memory.update("kept", user="ann", metadata={"v": value})
    with pytest.raises(ValueError, match="metadata"):
        memory.manager("ann").observe("poison", metadata={"v": value}, importance=1.0)
    assert [(m.id, m.metadata) for m in memory.list_memories(user="ann")] == [(kept.id, {"n": 1})]
    assert [m.id for m in memory.history("kept", user="ann")] == ["kept"]
    assert [hit.memory.id for hit in memory.search("kept memory", user="ann", k=5)] == ["kept"]


@pytest.mark.parametrize("literal", ["NaN", "-Infinity", "1e400"])
def test_rest_non_finite_metadata_is_a_4xx_and_the_user_stays_listable(server, literal):
    with _http(server) as http:
        assert http.post("/v1/memories", json={"user": "ann", "text": "kept memory"}).status_code == 200
        body = '{"user": "ann", "text": "poison", "metadata": {"v": ' + literal + "}}"  # valid for Python's json
        answer = http.post("/v1/memories", content=body, headers={"Content-Type": "application/json"})
        assert 400 <= answer.status_code < 500 and "metadata" in answer.text, answer.text
        listed = http.get("/v1/memories", params={"user": "ann"})
        assert listed.status_code == 200 and [m["content"] for m in listed.json()["memories"]] == ["kept memory"]
        found = http.post("/v1/search", json={"user": "ann", "query": "kept memory", "k": 5})
        assert found.status_code == 200 and len(found.json()["results"]) == 1


# ---------------------------------------------------------------------- 6. filter cost
def _wide_in(n: int) -> dict:
    return {"metadata": {"tag": {"$in": [f"t{i}" for i in range(n)]}}}


def _nested_and(depth: int) -> dict:
    spec: dict = {"kind": "observation"}
    for _ in range(depth - 1):
        spec = {"$and": [spec]}
    return spec


def _many_clauses(n: int) -> dict:
    return {"metadata": {f"f{i}": {"$ne": i} for i in range(n)}}


def test_filters_at_their_bounds_work_and_beyond_are_refused_naming_the_bound(memory):
    memory.add("tagged", user="ann", id="hit", metadata={"tag": f"t{MAX_FILTER_VALUES - 1}"})
    memory.add("other", user="ann", id="miss", metadata={"tag": "elsewhere"})
    within = [_wide_in(MAX_FILTER_VALUES), _nested_and(MAX_FILTER_DEPTH), _many_clauses(MAX_FILTER_CLAUSES)]
    found = [sorted(m.id for m in memory.list_memories(user="ann", filters=spec)) for spec in within]
    assert found == [["hit"], ["hit", "miss"], ["hit", "miss"]]
    beyond = [
        (_wide_in(MAX_FILTER_VALUES + 1), f"over the limit of {MAX_FILTER_VALUES:,}"),
        (_wide_in(200_000), f"over the limit of {MAX_FILTER_VALUES:,}"),
        ({"metadata": {"tag": [list(range(MAX_FILTER_VALUES)), 1]}}, f"over the limit of {MAX_FILTER_VALUES:,}"),
        (_nested_and(MAX_FILTER_DEPTH + 1), f"over {MAX_FILTER_DEPTH} deep"),
        (_many_clauses(MAX_FILTER_CLAUSES + 1), f"over the limit of {MAX_FILTER_CLAUSES}"),
    ]
    for spec, named in beyond:
        with pytest.raises(ValueError, match=named):
            memory.search("tagged", user="ann", k=2, filters=spec)
        with pytest.raises(ValueError, match=named):
            memory.list_memories(user="ann", filters=spec)


def test_in_lists_keep_json_equality(memory):
    """$in/$nin match through a hash set now: booleans still equal no number, 1 still equals 1.0; their values are scalars."""
    for memory_id, value in (("flag", True), ("one", 1), ("onef", 1.0), ("list", [1]), ("none", None)):
        memory.add(f"memory {memory_id}", user="ann", id=memory_id, metadata={"v": value})

    def ids(condition) -> list[str]:
        return sorted(m.id for m in memory.list_memories(user="ann", filters={"metadata": {"v": condition}}))

    assert ids({"$in": [1]}) == ["one", "onef"]
    assert ids({"$in": [True]}) == ["flag"]
    assert ids({"$in": [None, "1"]}) == ["none"]
    assert ids({"$nin": [1.0, True]}) == ["list", "none"]
    assert ids({"$eq": [1]}) == ["list"]
    with pytest.raises(ValueError, match=r"\$in on metadata field 'v' takes strings, numbers"):
        ids({"$in": [[1]]})  # lists of lists would be compared one by one: the cost bound needs scalars


def test_rest_filter_beyond_the_bound_is_a_4xx(server):
    with _http(server) as http:
        http.post("/v1/memories", json={"user": "ann", "text": "tagged", "metadata": {"tag": "t1"}})
        answer = http.post("/v1/search", json={"user": "ann", "query": "tagged", "filters": _wide_in(200_000)})
        assert answer.status_code == 422 and f"{MAX_FILTER_VALUES:,}" in answer.json()["error"]["message"]
        deep = http.get("/v1/memories", params={"user": "ann", "filters": json.dumps(_nested_and(400))})
        assert deep.status_code == 422 and f"{MAX_FILTER_DEPTH} deep" in deep.json()["error"]["message"]


# ---------------------------------------------------------------------- 7. lineage fields
def test_records_from_a_caller_cannot_set_superseded_by(memory):
    memory.add("agent a's memory", user="ann", id="a1", agent="a")
    forged = Memory(id="c1", owner="ann", t=T0, content="forged older version", superseded_by="a1", agent="b")
    with pytest.raises(ValueError, match="superseded_by"):
        memory.add(forged, user="ann")
    with pytest.raises(ValueError, match="superseded_by"):
        memory.add_many([Memory(id="ok", owner="ann", t=T0, content="fine"), forged], user="ann")
    assert memory.get("c1", user="ann") is None and memory.get("ok", user="ann") is None
    assert [m.id for m in memory.history("a1", user="ann")] == ["a1"]


def test_rest_record_with_superseded_by_is_refused_for_a_narrowed_token(server):
    record = {"id": "c1", "owner": "ann", "t": "2024-03-01T00:00:00Z", "content": "forged", "superseded_by": "a1"}
    with _http(server) as admin, _http(server, ANN) as ann:
        admin.post("/v1/memories", json={"user": "ann", "text": "agent a's memory", "id": "a1", "agent": "a"})
        answer = ann.post("/v1/memories", json={"user": "ann", "record": record})
        assert 400 <= answer.status_code < 500 and "superseded_by" in answer.text, answer.text
        history = ann.get("/v1/memories/a1/history", params={"user": "ann"}).json()["memories"]
        assert [m["id"] for m in history] == ["a1"]
        assert ann.get("/v1/memories/c1", params={"user": "ann"}).status_code == 404


def test_a_superseded_by_cycle_already_stored_ends_history_and_delete(memory):
    """Rows written straight to the store (as a forged write could before): c1 <-> c2, and a chain
    of 1,500 replaced memories (deeper than Python's recursion limit)."""
    dim = memory.store.dim
    vectors = np.eye(dim, dtype=np.float32)[np.arange(2) % dim]
    c1 = Memory(id="c1", owner="ann", t=T0, content="one", superseded_by="c2")
    c2 = Memory(id="c2", owner="ann", t=T0, content="two", superseded_by="c1")
    memory.store.upsert([c1, c2], vectors)
    assert [m.id for m in memory.history("c1", user="ann")] == ["c2", "c1"]
    assert memory.delete("c1", user="ann") is True
    assert memory.get("c1", user="ann") is None and memory.get("c2", user="ann") is None

    chain = [
        Memory(id=f"r{n}", owner="ann", t=T0, content=f"replaced {n}", superseded_by=f"r{n + 1}") for n in range(1500)
    ]
    chain.append(Memory(id="r1500", owner="ann", t=T0, content="current"))
    memory.store.upsert(chain, np.eye(dim, dtype=np.float32)[np.arange(len(chain)) % dim])
    assert [m.id for m in memory.history("r1500", user="ann")] == [f"r{n}" for n in range(1501)]
    assert memory.delete("r1500", user="ann") is True
    assert memory.store.count("ann") == 0


# ---------------------------------------------------------------------- 12. numeric ranges
def test_numbers_out_of_range_are_value_errors_naming_them(memory):
    memory.add("a memory", user="ann", id="m")
    before_year_one = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
    cases = [
        (lambda: memory.list_memories(user="ann", limit=10**20), "limit"),
        (lambda: memory.list_memories(user="ann", offset=10**20), "offset"),
        (lambda: memory.search("a memory", user="ann", k=10**20), "k must"),
        (lambda: memory.add("expiring", user="ann", ttl=1e300), "ttl"),
        (lambda: memory.add("expiring", user="ann", ttl=timedelta(days=10**8)), "ttl"),
        (lambda: memory.update("m", user="ann", ttl=1e300), "ttl"),
        (lambda: memory.search("a memory", user="ann", filters={"since": before_year_one}), "since"),
        (lambda: memory.list_memories(user="ann", filters={"until": before_year_one}), "until"),
        (lambda: memory.add("old", user="ann", t=before_year_one), "t "),
        (lambda: memory.list_memories(user="ann", filters=_nested_and(400)), "deep"),
        (lambda: memory.search("a memory", user="ann", filters={"metadata": _nested_metadata(400)}), "deep"),
        (lambda: memory.search("a memory", user="ann", filters={"metadata": {"v": float("nan")}}), "finite"),
    ]
    for n, (call, named) in enumerate(cases):
        with pytest.raises(ValueError, match=named):
            call()
            pytest.fail(f"case {n} ({named!r}) raised nothing")
    assert [m.id for m in memory.list_memories(user="ann")] == ["m"]
    assert memory.add("a century", user="ann", ttl=timedelta(days=36_500)).ttl == 36_500 * 86_400


def test_rest_numbers_out_of_range_are_4xx_naming_them(server):
    with _http(server) as http:
        http.post("/v1/memories", json={"user": "ann", "text": "a memory"})
        answers = {
            "limit": http.get("/v1/memories", params={"user": "ann", "limit": 10**20}),
            "offset": http.get("/v1/memories", params={"user": "ann", "offset": 10**20}),
            "since": http.get(
                "/v1/memories", params={"user": "ann", "filters": json.dumps({"since": "0001-01-01T00:00:00+14:00"})}
            ),
            "ttl": http.post("/v1/memories", json={"user": "ann", "text": "expiring", "ttl": 1e300}),
            "deep": http.post("/v1/search", json={"user": "ann", "query": "a memory", "filters": _nested_and(400)}),
        }
        for named, answer in answers.items():
            assert 400 <= answer.status_code < 500 and named in answer.text, (named, answer.status_code, answer.text)
        assert [m["content"] for m in http.get("/v1/memories", params={"user": "ann"}).json()["memories"]] == [
            "a memory"
        ]


def _nested_metadata(depth: int) -> dict:
    spec: dict = {"v": 1}
    for _ in range(depth - 1):
        spec = {"$or": [spec]}
    return spec
