"""The memory API's own behaviour tests (tests/memory/test_api.py) run unchanged against AgentMemory on
PostgreSQL and against memnets.Client through a real server on both stores, so embedded and remote
memories behave alike: the same results, the same exceptions naming the same arguments."""

from __future__ import annotations

import functools
import inspect
import json
import uuid
from datetime import UTC, datetime

import pytest
import test_api  # tests/ is on sys.path under pytest
import test_writes

import memnets
from memnets.api import SearchHit
from memnets.records import Memory
from memnets.server.testing import ServerProcess
from memnets.store.errors import InvalidMemoryError

EXACT = test_api.EXACT
TOKEN = "ann-" + uuid.uuid4().hex


class RemoteMemory(memnets.Client):
    """memnets.Client, plus the ``store.count(user)`` some API tests read: the server's count of the
    user's current memories (all pages of list_memories), not a stand-in."""

    @property
    def store(self):
        client = self

        class Counts:
            def count(self, user: str) -> int:
                return len(client.list_memories(user=user, limit=None))

        return Counts()


def _server(location, tiny_model_dir, folder, *extra, threshold=EXACT):
    (folder / "tokens.json").write_text(json.dumps({TOKEN: "ann"}))
    args = ["--encoder", str(tiny_model_dir), "--tokens", str(folder / "tokens.json")]
    if threshold is not None:
        args += ["--set", f"duplicate_threshold={threshold}"]
    return ServerProcess(location, *args, *extra, env={"MEMNETS_API_ADMIN": "admin-token-for-tests"})


@pytest.fixture(scope="module")
def embedded_server(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("api-embedded")
    with _server(folder / "memory", tiny_model_dir, folder, "--token-env", "MEMNETS_API_ADMIN") as process:
        yield process.wait_ready(token="admin-token-for-tests")


@pytest.fixture(scope="module")
def default_server(tiny_model_dir, tmp_path_factory):
    """A server with memnets.open's default duplicate threshold (test_writes' setting)."""
    folder = tmp_path_factory.mktemp("api-default")
    with _server(
        folder / "memory", tiny_model_dir, folder, "--token-env", "MEMNETS_API_ADMIN", threshold=None
    ) as process:
        yield process.wait_ready(token="admin-token-for-tests")


@pytest.fixture(scope="module")
def postgres_server(pg_url, tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("api-postgres")
    table = "srv" + uuid.uuid4().hex[:10]
    with _server(
        pg_url, tiny_model_dir, folder, "--token-env", "MEMNETS_API_ADMIN", "--set", f"table={table}"
    ) as process:
        yield process.wait_ready(token="admin-token-for-tests")


@pytest.fixture(params=["postgres", "server-embedded", "server-postgres"])
def memory(request, encoder_for_api):
    """AgentMemory on PostgreSQL, or memnets.Client through a real server on either store (empty at the start)."""
    if request.param == "postgres":
        table = "api" + uuid.uuid4().hex[:12]
        with memnets.open(
            request.getfixturevalue("pg_url"), encoder=encoder_for_api, table=table, duplicate_threshold=EXACT
        ) as opened:
            yield opened
        return
    server = request.getfixturevalue("embedded_server" if request.param == "server-embedded" else "postgres_server")
    with RemoteMemory(server.url, token="admin-token-for-tests") as client:
        yield client
        for user in client.users():
            client.delete_all(user=user)


@pytest.fixture(scope="module")
def encoder_for_api(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir)


API_TESTS = [
    test_api.test_one_rule_for_time,
    test_api.test_add_many_with_ids_keys_items_by_them,
    test_api.test_near_duplicates_refresh_the_existing_memory,
    test_api.test_update_keeps_history_and_search_skips_old_versions,
    test_api.test_replaces_supersedes_an_older_memory,
    test_api.test_filters_apply_before_ranking,
    test_api.test_delete_and_delete_all,
]


@pytest.mark.parametrize("behaviour", API_TESTS, ids=[t.__name__.removeprefix("test_") for t in API_TESTS])
def test_api_behaviour(memory, behaviour):
    behaviour(memory)


BAD_INPUT = [  # test_api's table of bad calls, less those of manager(): a manager's tiers live in one process
    case
    for case in test_api.test_bad_input_is_named_and_writes_nothing.pytestmark[0].args[1]
    if "m.manager(" not in inspect.getsource(case[0])
]


@pytest.mark.parametrize(("call", "error", "named"), BAD_INPUT)
def test_api_bad_input(memory, call, error, named):
    test_api.test_bad_input_is_named_and_writes_nothing(memory, call, error, named)


@pytest.fixture(params=["postgres", "server-embedded"])
def default_memory(request, encoder_for_api):
    """As ``memory``, with the default duplicate threshold (the consistency rule's tests)."""
    if request.param == "postgres":
        table = "wr" + uuid.uuid4().hex[:12]
        with memnets.open(request.getfixturevalue("pg_url"), encoder=encoder_for_api, table=table) as opened:
            yield opened
        return
    with RemoteMemory(request.getfixturevalue("default_server").url, token="admin-token-for-tests") as client:
        yield client
        for user in client.users():
            client.delete_all(user=user)


WRITE_TESTS = [
    test_writes.test_add_many_applies_the_rule_within_the_call,
    test_writes.test_an_explicit_id_is_unchanged_only_for_the_same_record,
    test_writes.test_update_merges_or_replaces_metadata_and_keeps_creation_order,
    test_writes.test_bad_text_through_update,
    test_writes.test_the_records_validation_is_the_one_every_door_uses,
]


@pytest.mark.parametrize("behaviour", WRITE_TESTS, ids=[t.__name__.removeprefix("test_") for t in WRITE_TESTS])
def test_write_path_behaviour(default_memory, behaviour):
    behaviour(default_memory)


def test_a_changed_fact_is_an_update_with_history(default_memory, encoder_for_api):
    test_writes.test_a_changed_fact_is_an_update_with_history(default_memory, encoder_for_api)


@pytest.mark.parametrize(
    ("call", "where"), test_writes.test_bad_text_is_refused_before_anything_is_written.pytestmark[0].args[1]
)
def test_bad_text_is_refused(default_memory, call, where):
    test_writes.test_bad_text_is_refused_before_anything_is_written(default_memory, call, where)


def test_client_returns_the_api_types_and_raises_its_errors(embedded_server, tiny_model_dir, tmp_path):
    with RemoteMemory(embedded_server.url, token="admin-token-for-tests") as client:
        added = client.add("red green blue", user="ann", metadata={"n": 1}, agent="planner", objects=["ball"])
        assert isinstance(added, Memory) and added.objects == ("ball",) and added.agent == "planner"
        assert client.get(added.id, user="ann") == added and client.get("missing", user="ann") is None
        hits = client.search("red green blue", user="ann", k=1)
        assert [hit.memory for hit in hits] == [added] and isinstance(hits[0], SearchHit)
        assert 0.0 < hits[0].score <= 1.0  # hybrid search's fused score (docs/memory.md)
        many = client.search_many("red", users=["ann", "bob"], k=1)
        assert list(many) == ["ann", "bob"] and [h.memory for h in many["ann"]] == [added] and many["bob"] == []
        explained = client.search_explained("red green blue", user="ann", k=1)
        assert set(explained["results"][0]["parts"]) == {"relevance", "recency", "importance", "learned"}
        record = Memory(id="rec", owner="ann", t=added.t, content="a record", kind="summary", links=(added.id,))
        assert client.add(record, user="ann") == record
        with pytest.raises(KeyError, match="no memory"):
            client.update("missing", "text", user="ann")
        client.add("the critic's note", user="ann", agent="critic", session="s1")
        assert client.delete_all(user="ann", agent="critic", session="s2") == 0
        assert client.delete_all(user="ann", agent="critic") == 1  # that scope only
        assert client.delete_all(user="ann") == 2
    with memnets.Client(embedded_server.url, token=TOKEN) as ann, memnets.Client(embedded_server.url) as anonymous:
        ann.add("mine", user="ann")
        with pytest.raises(PermissionError, match="bob"):
            ann.add("not mine", user="bob")
        with pytest.raises(PermissionError, match="unauthorized"):
            anonymous.users()
        assert ann.users() == ["ann"] and ann.delete_all(user="ann") == 1
    with memnets.Client(f"http://127.0.0.1:{_closed_port()}", timeout=2) as nowhere:
        with pytest.raises(ConnectionError):
            nowhere.users()
    with pytest.raises(ValueError, match="url"):
        memnets.Client("127.0.0.1:8000")


@pytest.mark.parametrize("item", [b"bytes", None, 42])
def test_the_client_raises_what_agent_memory_raises_before_any_request(encoder, tmp_path, item):
    """No server listens: an item the API refuses is its TypeError, with its message, not a ConnectionError."""
    with memnets.open(tmp_path / "memory", encoder=encoder) as memory:
        with pytest.raises(TypeError) as embedded:
            memory.add(item, user="ann")
        with pytest.raises(TypeError) as embedded_many:
            memory.add_many(["fine", item], user="ann")
    with memnets.Client(f"http://127.0.0.1:{_closed_port()}", timeout=2) as nowhere:
        with pytest.raises(TypeError) as remote:
            nowhere.add(item, user="ann")
        with pytest.raises(TypeError) as remote_many:
            nowhere.add_many(["fine", item], user="ann")
    assert str(remote.value) == str(embedded.value)
    assert str(remote_many.value) == str(embedded_many.value)


@pytest.mark.parametrize(
    ("metadata", "error", "message"),
    [
        ({"when": datetime(2024, 1, 1, tzinfo=UTC)}, InvalidMemoryError, "JSON-serialisable"),
        ({"tags": {"a", "b"}}, InvalidMemoryError, "JSON-serialisable"),
        ({"n": float("nan")}, ValueError, "finite"),
        (functools.reduce(lambda value, _: {"a": value}, range(100), {"leaf": 1}), ValueError, "nested"),
    ],
)
def test_the_client_refuses_a_metadata_the_api_refuses_before_any_request(encoder, tmp_path, metadata, error, message):
    """A datetime or a set in metadata: the embedded API refuses it, the Client had sent it converted (an ISO
    string, a list) and the server stored it; a deep one had been a local RecursionError."""
    with memnets.open(tmp_path / "memory", encoder=encoder) as memory:
        with pytest.raises(error, match=message):
            memory.add("Ann likes olives", user="ann", metadata=metadata)
    with memnets.Client(f"http://127.0.0.1:{_closed_port()}", timeout=2) as nowhere:
        with pytest.raises(error, match=message):
            nowhere.add("Ann likes olives", user="ann", metadata=metadata)
        with pytest.raises(error, match=message):
            nowhere.update("m1", user="ann", metadata=metadata)


def _closed_port() -> int:
    from memnets.server.testing import free_port

    return free_port()
