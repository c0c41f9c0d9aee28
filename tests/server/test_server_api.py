"""memnets.Client through a real server process on both stores: the memory contract
(memnets.memory.testing.MemoryContract, which tests/memory/test_memory_contract.py runs on AgentMemory),
so that embedded and remote memories behave alike: the same results, the same exceptions naming the same
arguments. Then what only the Client does: its types and errors, and the checks it makes before any request."""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from datetime import UTC, datetime

import pytest

import memnets
from memnets.api import SearchHit
from memnets.memory.testing import EXACT, MemoryContract
from memnets.records import Memory
from memnets.server.testing import ServerProcess
from memnets.store.errors import InvalidMemoryError

ADMIN = "admin-token-for-tests"
TOKEN = "ann-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def served(request, tiny_model_dir, tmp_path_factory):
    """``served(store, threshold)``: a server on the embedded store or on PostgreSQL with that duplicate
    threshold (None: memnets.open's default), started on first use and stopped at the module's end."""
    started = {}
    with contextlib.ExitStack() as stack:

        def served(store: str, threshold: float | None) -> ServerProcess:
            if (store, threshold) not in started:
                folder = tmp_path_factory.mktemp(f"api-{store}")
                (folder / "tokens.json").write_text(json.dumps({TOKEN: "ann"}))
                args = ["--encoder", str(tiny_model_dir), "--tokens", str(folder / "tokens.json")]
                args += ["--token-env", "MEMNETS_API_ADMIN"]
                if threshold is not None:
                    args += ["--set", f"duplicate_threshold={threshold}"]
                if store == "embedded":
                    location = folder / "memory"
                else:
                    location = request.getfixturevalue("pg_url")
                    args += ["--set", f"table=srv{uuid.uuid4().hex[:10]}"]
                process = stack.enter_context(ServerProcess(location, *args, env={"MEMNETS_API_ADMIN": ADMIN}))
                started[(store, threshold)] = process.wait_ready(token=ADMIN)
            return started[(store, threshold)]

        yield served


@pytest.fixture(scope="module")
def embedded_server(served):
    return served("embedded", EXACT)


class TestClient(MemoryContract):
    @pytest.fixture(scope="class")
    def encoder(self, tiny_model_dir):
        """The servers' encoder (--encoder), loaded here for the contract's checks of it."""
        from memnets.nn.encoder import MemoryEncoder

        return MemoryEncoder.from_pretrained(tiny_model_dir)

    @pytest.fixture(params=["embedded", "postgres"])
    def make_memory(self, request, served):
        """memnets.Client on a server of each store; every user's memories are deleted at the end."""
        clients = []

        def make(duplicate_threshold=None):
            clients.append(memnets.Client(served(request.param, duplicate_threshold).url, token=ADMIN))
            return clients[-1]

        yield make
        for client in clients:
            for user in client.users():
                client.delete_all(user=user)
            client.close()


def test_client_returns_the_api_types_and_raises_its_errors(embedded_server, tiny_model_dir, tmp_path):
    with memnets.Client(embedded_server.url, token=ADMIN) as client:
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
