"""Expiry (TTL) on both stores and through every door: AgentMemory, the manager's tiers, LangGraph's
TTL (TTLConfig, put ttl, refresh on read, the background sweep) and MCP's add_memory. The store side
(the Expiry capability) is in the contract suite, memnets.store.testing.

Time is a test clock: ``memnets.timeutil.now`` is what every part of memnets reads the wall clock
through (records, stores, the API, the manager), so advancing it expires memories without sleeping.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import pytest
from wallclock import START

import memnets
from memnets.store import open_store


# ---------------------------------------------------------------------- AgentMemory
@pytest.fixture
def memory(location, encoder):
    with memnets.open(location[0], encoder=encoder, duplicate_threshold=None, **location[1]) as opened:
        yield opened


@pytest.mark.parametrize(
    "ttl, error, named",
    [
        (0, ValueError, "ttl must be a positive"),
        (-5, ValueError, "ttl must be a positive"),
        (float("nan"), ValueError, "ttl must be a positive"),
        (float("inf"), ValueError, "ttl must be a positive"),
        (timedelta(0), ValueError, "ttl must be a positive"),
        ("1h", TypeError, "ttl must be a timedelta or a number of seconds"),
        (True, TypeError, "ttl must be a timedelta or a number of seconds"),
    ],
)
def test_a_bad_ttl_is_refused_naming_it_and_writes_nothing(memory, clock, ttl, error, named):
    with pytest.raises(error, match=named):
        memory.add("a fact", user="ann", ttl=ttl)
    with pytest.raises(error, match=named):
        memory.add_many(["one", "two"], user="ann", ttl=ttl)
    kept = memory.add("kept", user="ann")
    with pytest.raises(error, match=named):
        memory.update(kept.id, "changed", user="ann", ttl=ttl)
    assert [m.content for m in memory.list_memories(user="ann")] == ["kept"]


def test_ttl_on_add_add_many_and_update(memory, clock):
    one = memory.add("the parcel arrives today", user="ann", ttl=timedelta(minutes=2))
    assert (one.expires_at, one.ttl) == (START + timedelta(minutes=2), 120.0)
    many = memory.add_many(["door code 4412", "gate code 9913"], user="ann", ttl=30)
    assert {m.expires_at for m in many} == {START + timedelta(seconds=30)}
    forever = memory.add("my name is Ann", user="ann")
    assert forever.expires_at is None and forever.ttl is None

    clock.advance(10)
    kept = memory.update(one.id, "the parcel arrives tomorrow", user="ann")  # ttl left out: the expiry stays
    assert kept.expires_at == one.expires_at
    reset = memory.update(many[0].id, "door code 4413", user="ann", ttl=60)
    assert reset.expires_at == clock.now + timedelta(seconds=60)
    cleared = memory.update(many[1].id, user="ann", ttl=None)
    assert cleared.expires_at is None and memory.get(many[1].id, user="ann").expires_at is None

    clock.advance(25)  # 35 s: nothing has expired yet except nothing
    assert len(memory.list_memories(user="ann")) == 4
    clock.advance(40)  # 75 s: the door code (reset to 70 s) expired, the parcel (120 s) not
    assert sorted(m.content for m in memory.list_memories(user="ann")) == [
        "gate code 9913",
        "my name is Ann",
        "the parcel arrives tomorrow",
    ]
    assert memory.get(many[0].id, user="ann") is None
    assert memory.history(many[0].id, user="ann") == []  # its older version expired with it


def test_an_expired_memory_is_gone_for_every_read_and_every_manager(memory, clock):
    memory.add("Ann's flight leaves at 10:30 from gate B7", user="ann", ttl=60, id="flight")
    memory.add("Ann likes green tea", user="ann", id="tea")
    memory.add("Bob's one expiring note", user="bob", ttl=60)
    manager = memory.manager("ann", k=5)
    view = manager.context_for("Ann's flight leaves at 10:30 from gate B7")
    assert "flight" in view.ids() and "flight" in manager.working
    assert memory.users() == ["ann", "bob"]

    clock.advance(61)
    assert [h.memory.id for h in memory.search("flight gate B7", user="ann", k=5)] == ["tea"]
    assert memory.get("flight", user="ann") is None
    assert [m.id for m in memory.list_memories(user="ann")] == ["tea"]
    assert memory.users() == ["ann"]
    assert memory.store.count("bob") == 0
    view = manager.context_for("Ann's flight leaves at 10:30 from gate B7")
    assert "flight" not in view.ids() and "flight" not in manager.working


def test_refresh_ttl_on_get_and_search(memory, clock):
    memory.add("the wifi password is tulip42", user="ann", ttl=60, id="wifi")
    clock.advance(50)
    assert memory.get("wifi", user="ann", refresh_ttl=True).expires_at == clock.now + timedelta(seconds=60)
    clock.advance(50)  # 100 s after the write
    hits = memory.search("wifi password", user="ann", k=1, refresh_ttl=True)
    assert [h.memory.id for h in hits] == ["wifi"] and hits[0].memory.expires_at == clock.now + timedelta(seconds=60)
    clock.advance(50)
    assert memory.get("wifi", user="ann") is not None  # plain reads do not refresh
    clock.advance(11)
    assert memory.get("wifi", user="ann") is None


def test_an_expired_successor_releases_the_facts_it_ended(location, encoder, clock):
    """Expiry is deletion: the sweep takes the judge's decisions that read the expired memories with them (each
    user's memories read once for the whole sweep), so a fact one of them ended is current again; before the sweep,
    a read of a valid time finds it valid (it had answered nothing)."""

    class EndsWhatCameBefore:
        threshold = 0.5

        def score(self, older: str, newer: str) -> float:
            return float(newer.startswith("Now"))

    options = dict(encoder=encoder, duplicate_threshold=None, supersession=EndsWhatCameBefore(), **location[1])
    with memnets.open(location[0], **options) as memory:
        for user in ("ann", "bo"):
            memory.add("I live in Leeds", user=user, id="home")
            memory.add("Now I live in Lyon, for a month", user=user, ttl=60, id="stay")
            assert memory.get("home", user=user).invalidated_by == "stay"
        clock.advance(61)
        for user in ("ann", "bo"):  # before the sweep: an ending by a memory gone is not in force
            assert [m.id for m in memory.list_memories(user=user, as_of=clock.now)] == ["home"]
        assert memory.sweep_expired() == 2
        for user in ("ann", "bo"):
            home = memory.get("home", user=user)
            assert (home.valid_to, home.invalidated_by) == (None, None) and memory.get("stay", user=user) is None


def test_the_sweep_deletes_for_good_with_versions_and_derived_memories(memory, clock, location):
    memory.add("the alarm code is 5521", user="ann", ttl=60, id="alarm")
    memory.update("alarm", "the alarm code is 5522", user="ann")
    memory.add("The alarm code matters to Ann", user="ann", kind="reflection", id="insight")
    memory.store.upsert(
        [memory.get("insight", user="ann").replace(links=("alarm",))], memory.store.vectors(["insight"], "ann")
    )
    memory.add("Ann lives in Lyon", user="ann", id="home")
    assert memory.sweep_expired() == 0

    clock.advance(61)
    assert memory.sweep_expired() == 3  # the memory, its older version and the reflection derived from it
    assert memory.sweep_expired() == 0
    again = open_store(location[0], None, **location[1])  # another connection: the rows are gone, not hidden
    try:
        clock.advance(-61)  # even read at a time before the expiry
        assert [m.id for m in again.list_memories("ann")] == ["home"]
        assert again.get(["alarm", "alarm~1", "insight"], "ann") == []
        assert again.expired(clock.now + timedelta(days=1)) == []
    finally:
        again.close()


def test_a_manager_in_another_connection_learns_of_the_sweep(location, encoder, clock):
    with memnets.open(location[0], encoder=encoder, **location[1]) as writer:
        writer.add("the locker number is 311", user="ann", ttl=600, id="locker")
        with memnets.open(location[0], encoder=encoder, **location[1]) as reader:
            manager = reader.manager("ann")
            assert "locker" in manager.context_for("the locker number is 311").ids()
            writer.update("locker", user="ann", ttl=60)  # the reader's copy still says 600 s
            clock.advance(61)
            assert writer.sweep_expired() == 2  # the memory and its older version
            assert "locker" not in manager.context_for("the locker number is 311").ids()
            assert "locker" not in manager._held()


# ---------------------------------------------------------------------- LangGraph
def test_langgraph_store_drives_ttl_the_langgraph_way(memory, clock):
    pytest.importorskip("langgraph")
    from langgraph.store.base import GetOp, PutOp, SearchOp

    from memnets.integrations.langgraph import MemnetsStore

    store = MemnetsStore(memory, ttl={"default_ttl": 2, "refresh_on_read": True})
    assert store.supports_ttl is True
    ns = ("notes", "ann")
    store.put(ns, "default", {"content": "lives under the default ttl"})  # 2 minutes
    store.put(ns, "short", {"content": "a one minute note"}, ttl=1)
    store.put(ns, "forever", {"content": "never expires"}, ttl=None)
    assert memory.get("short", user="notes.ann").expires_at == START + timedelta(minutes=1)
    assert memory.get("default", user="notes.ann").expires_at == START + timedelta(minutes=2)
    assert memory.get("forever", user="notes.ann").expires_at is None

    clock.advance(50)
    assert store.get(ns, "short") is not None  # refresh_on_read: expires at 50 s + 1 min now
    clock.advance(50)  # 100 s
    assert store.get(ns, "short", refresh_ttl=False) is not None
    assert sorted(i.key for i in store.search(ns, query="note")) == ["default", "forever", "short"]  # refreshed
    clock.advance(65)  # 165 s: "default" (120 s, refreshed at 100 s to 220 s) lives, short (160 s) gone
    assert store.get(ns, "short") is None
    assert sorted(i.key for i in store.search(ns, refresh_ttl=False)) == ["default", "forever"]

    no_refresh = MemnetsStore(memory, ttl={"refresh_on_read": False})
    other = ("batch", "ann")
    no_refresh.batch([PutOp(other, "batched", {"content": "put through batch"}, ttl=1)])  # at 165 s
    clock.advance(40)
    assert no_refresh.get(other, "batched") is not None  # refresh_on_read=False: still expires at 225 s
    clock.advance(30)  # 235 s
    assert no_refresh.get(other, "batched") is None
    no_refresh.batch([PutOp(other, "again", {"content": "put through batch again"}, ttl=1)])  # at 235 s
    clock.advance(40)
    assert no_refresh.batch([GetOp(other, "again")])[0] is not None  # a GetOp refreshes by default: 335 s
    clock.advance(40)
    assert [i.key for i in no_refresh.batch([SearchOp(other, refresh_ttl=True)])[0]] == ["again"]  # to 375 s
    clock.advance(50)  # 365 s
    assert [i.key for i in no_refresh.search(other)] == ["again"]
    clock.advance(20)  # 385 s
    assert no_refresh.search(other) == []
    assert no_refresh.sweep_ttl() == 4  # batched, again, short and default (refreshed at 100 s to 220 s)
    assert memory.store.expired(clock.now) == []
    assert [m.id for m in memory.store.get(["default", "forever"], "notes.ann")] == ["forever"]


@pytest.mark.parametrize(
    "config, named",
    [
        ({"default_ttl": 0}, "default_ttl"),
        ({"sweep_interval_minutes": -1}, "sweep_interval_minutes"),
        ({"refresh_on_read": "yes"}, "refresh_on_read"),
        ({"ttl_minutes": 5}, "unknown TTLConfig keys"),
    ],
)
def test_langgraph_store_refuses_a_bad_ttl_config(memory, config, named):
    pytest.importorskip("langgraph")
    from memnets.integrations.langgraph import MemnetsStore

    with pytest.raises(ValueError, match=named):
        MemnetsStore(memory, ttl=config)
    with pytest.raises(ValueError, match="ttl must be a positive number of minutes"):
        MemnetsStore(memory).put(("a",), "k", {"content": "x"}, ttl=-1)


def test_langgraph_background_sweeper_starts_sweeps_and_stops(memory, clock):
    pytest.importorskip("langgraph")
    from memnets.integrations.langgraph import MemnetsStore

    with MemnetsStore(memory, ttl={"sweep_interval_minutes": 0.002}) as store:  # every 0.12 s
        sweeper = store._sweeper
        assert sweeper is not None and sweeper.is_alive() and store.start_ttl_sweeper() is False
        store.put(("tmp",), "k", {"content": "a short-lived note"}, ttl=1)
        clock.advance(61)
        assert memory.store.expired(clock.now) == [("tmp", "k")]
        deadline = time.monotonic() + 30
        while memory.store.expired(clock.now) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert memory.store.expired(clock.now) == []  # swept by the thread, not by a read
    assert not sweeper.is_alive() and store._sweeper is None
    assert store.stop_ttl_sweeper() is True  # stopping twice is fine


# ---------------------------------------------------------------------- MCP
def test_mcp_add_memory_takes_a_ttl(memory, clock):
    pytest.importorskip("mcp")
    from mcp.server.fastmcp.exceptions import ToolError

    from memnets.integrations.mcp_server import build_server

    server = build_server(memory)

    async def run():
        result = await server.call_tool("add_memory", {"text": "call the plumber", "user_id": "ann", "ttl_seconds": 90})
        added = json.loads(result[0][0].text) if isinstance(result, tuple) else json.loads(result[0].text)
        with pytest.raises(ToolError, match="ttl_seconds"):  # the strict schema names the argument
            await server.call_tool("add_memory", {"text": "bad", "user_id": "ann", "ttl_seconds": -1})
        return added

    added = asyncio.run(run())
    assert added["expires_at"] == (START + timedelta(seconds=90)).isoformat()
    clock.advance(91)
    assert memory.get(added["id"], user="ann") is None
    assert [m.content for m in memory.list_memories(user="ann")] == []


def test_a_write_of_the_same_statement_restarts_its_ttl(memory, clock):
    memory.add("the gate code is 1234", user="ann", ttl=60, id="gate")
    clock.advance(50)
    again = memory.add("the gate code is 1234", user="ann", ttl=60, id="gate")  # LangGraph's put of the same value
    assert again.outcome == "unchanged" and again.expires_at == clock.now + timedelta(seconds=60)
    assert memory.history("gate", user="ann") == [again]  # no version written for it
    clock.advance(50)  # 100 s: alive only because the write restarted the timer
    same = memory.update("gate", user="ann", ttl=60)
    assert same.outcome == "unchanged" and memory.get("gate", user="ann").expires_at == clock.now + timedelta(
        seconds=60
    )
    clock.advance(61)
    assert memory.get("gate", user="ann") is None
    fresh = memory.add("the gate code is 5678", user="ann", id="gate")  # the id of an expired, unswept memory
    assert fresh.outcome == "added" and memory.get("gate", user="ann").content == "the gate code is 5678"
    assert memory.sweep_expired() == 0 and memory.get("gate", user="ann").expires_at is None
