"""The store contract suite: the tests every :class:`~memnets.store.MemoryStore` must pass, for any store.

memnets runs it on its two stores (tests/store/test_store_contract.py); a third-party store runs the
same suite by subclassing :class:`StoreContract` in a pytest module and saying how to open it::

    import pytest
    from memnets.store.testing import StoreContract, StoreSpec

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_spec(self, tmp_path):
            # a fresh, empty store per test; "module:callable" is called as callable(dim=..., **kwargs)
            return StoreSpec("mypackage.store:MyStore", {"path": str(tmp_path / "store")})

The factory must be importable by name because some tests open the store in child processes (a
second process deleting, concurrent writers, a writer killed with SIGKILL). Optional capabilities
(:data:`memnets.store.protocol.CAPABILITIES`) are tested when the store declares them and
reported as skipped, with the reason, when it does not.

This module imports pytest (it is only imported by test code; ``import memnets`` never loads it).
It also gives the deterministic memories and vectors the tests use (:func:`memory_for`,
:func:`vector_for`, from :mod:`memnets.store.testing_data`): content and vector are pure functions
of the id, so a parent can check what a killed or concurrent child wrote without talking to it. The
tests of the lexical index are in :mod:`memnets.store.testing_lexical`, a base class of the suite.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

import memnets.timeutil as timeutil
from memnets.records import Memory
from memnets.store.errors import InvalidMemoryError
from memnets.store.filters import MemoryFilter
from memnets.store.protocol import (
    CAPABILITIES,
    AtomicWrites,
    Chunks,
    Compaction,
    DeletionLedger,
    Expiry,
    IndexRebuild,
    MemoryStore,
    supports,
)
from memnets.store.testing_data import (
    DIM,
    EPOCH,
    EXPIRY_START,
    expiring,
    hit_ids,
    ids,
    memory_for,
    vector_for,
    vectors_for,
)
from memnets.store.testing_lexical import LexicalContract
from memnets.store.testing_processes import child, finish
from memnets.store.testing_processes import start_child as start_child  # public here since the suite began


@dataclass(frozen=True)
class StoreSpec:
    """How to open one store, in this process or a child: ``factory`` ("module:callable") and its keyword arguments.

    :meth:`open` calls ``callable(dim=dim, **kwargs)`` (and ``key=key`` when a key is given); the
    kwargs must be JSON-serialisable, since children receive them as JSON.
    """

    factory: str
    kwargs: dict = field(default_factory=dict)

    def open(self, dim: int | None = DIM, *, key: bytes | str | None = None) -> MemoryStore:
        module, _, name = self.factory.partition(":")
        if not module or not name:
            raise ValueError(f"StoreSpec: factory must be 'module:callable', got {self.factory!r}")
        extra = {} if key is None else {"key": key}
        return getattr(importlib.import_module(module), name)(dim=dim, **self.kwargs, **extra)

    def to_json(self) -> str:
        return json.dumps({"factory": self.factory, "kwargs": self.kwargs})

    @classmethod
    def from_json(cls, text: str) -> StoreSpec:
        raw = json.loads(text)
        return cls(raw["factory"], raw["kwargs"])


# ---------------------------------------------------------------------- deterministic data
def varied_memories(n: int, owner: str = "a") -> list[Memory]:
    rng = np.random.default_rng(7)
    kinds = ["observation", "reflection", "plan", "message"]
    memories = []
    for i in range(n):
        metadata = {"n": int(rng.integers(0, 10)), "tag": ["red", "green", "blue"][i % 3]}
        if i % 4 == 0:
            metadata["flag"] = bool(i % 8)
        if i % 5 == 0:
            del metadata["n"]
        memories.append(
            memory_for(f"m{i:03d}", owner, minutes=int(rng.integers(0, 600)), kind=kinds[i % 4], metadata=metadata)
        )
    return memories


FILTERS = [
    {"kind": "plan"},
    {"kind": ["observation", "message"]},
    {"metadata": {"tag": "red"}},
    {"metadata": {"n": {"$gte": 3, "$lt": 7}}},
    {"metadata": {"n": {"$ne": 4}}},  # also matches memories without n
    {"metadata": {"tag": {"$in": ["green", "blue"]}, "flag": True}},
    {"metadata": {"flag": 1}},  # JSON: true is not 1
    {"metadata": {"tag": {"$gt": "green"}}},
    {"since": EPOCH + timedelta(minutes=100), "until": EPOCH + timedelta(minutes=300)},
    {"kind": "reflection", "metadata": {"n": {"$lte": 5}}, "until": EPOCH + timedelta(minutes=400)},
    {"metadata": {"missing": {"$eq": None}}},
]


BAD_CALLS = [
    (
        "upsert empty content",
        lambda s: s.upsert([memory_for("n", "a", content=" ")], vector_for("n")[None]),
        InvalidMemoryError,
    ),
    ("upsert NaN vector", lambda s: s.upsert([memory_for("n", "a")], np.full((1, DIM), np.nan)), InvalidMemoryError),
    ("upsert wrong dim", lambda s: s.upsert([memory_for("n", "a")], np.ones((1, DIM + 1))), InvalidMemoryError),
    (
        "upsert twice in a batch",
        lambda s: s.upsert([memory_for("n", "a")] * 2, vectors_for([memory_for("n", "a")] * 2)),
        InvalidMemoryError,
    ),
    ("upsert not a Memory", lambda s: s.upsert(["text"], vector_for("n")[None]), InvalidMemoryError),
    (
        "upsert self-superseding",
        lambda s: s.upsert([memory_for("n", "a", superseded_by="n")], vector_for("n")[None]),
        InvalidMemoryError,
    ),
    (
        "upsert bad metadata",
        lambda s: s.upsert([memory_for("n", "a", metadata={"x": object()})], vector_for("n")[None]),
        InvalidMemoryError,
    ),
    ("search k=0", lambda s: s.search(vector_for("x"), 0, "a"), ValueError),
    ("search owner None", lambda s: s.search(vector_for("x"), 3, None), ValueError),
    ("search wrong dim", lambda s: s.search(np.ones(DIM + 1), 3, "a"), InvalidMemoryError),
    ("search filters a list", lambda s: s.search(vector_for("x"), 3, "a", filters=["plan"]), TypeError),
    ("get ids as one string", lambda s: s.get("existing", "a"), TypeError),
    ("delete empty owner", lambda s: s.delete(["existing"], ""), ValueError),
    ("list negative offset", lambda s: s.list_memories("a", offset=-1), ValueError),
    ("list limit as str", lambda s: s.list_memories("a", limit="3"), ValueError),
    ("touch with a string that is no time", lambda s: s.touch(["existing"], "a", "now"), ValueError),
    ("purge with a string that is no time", lambda s: s.purge_older_than("last week"), ValueError),  # ISO is a time
    ("history of ids", lambda s: s.history(["existing"], "a"), TypeError),
    ("vectors of a missing id", lambda s: s.vectors(["nope"], "a"), KeyError),
]


class _Clock:
    """A settable ``memnets.timeutil.now`` for the expiry tests (the stores read the clock through it)."""

    def __init__(self) -> None:
        self.now = EXPIRY_START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class StoreContract(LexicalContract):
    """The contract suite as a pytest base class: subclass it and define the ``store_spec`` fixture.

    ``store_spec`` returns the :class:`StoreSpec` of a fresh, empty store for each test (a new
    folder, a new table prefix). The fixtures ``make`` (open it, again: a second connection) and
    ``store`` (one open store) are built on it and close what they opened.
    """

    @pytest.fixture
    def store_spec(self) -> StoreSpec:
        raise NotImplementedError("a StoreContract subclass defines the store_spec fixture")

    @pytest.fixture
    def make(self, store_spec):
        opened = []

        def make(dim: int | None = DIM, key=None) -> MemoryStore:
            store = store_spec.open(dim, key=key)
            opened.append(store)
            return store

        yield make
        for store in opened:
            store.close()

    @pytest.fixture
    def store(self, make) -> MemoryStore:
        return make()

    @pytest.fixture
    def clock(self, monkeypatch) -> _Clock:
        clock = _Clock()
        monkeypatch.setattr(timeutil, "now", clock)
        return clock

    # ---------------------------------------------------------------------- owner scoping

    def test_is_a_memory_store(self, store):
        assert isinstance(store, MemoryStore) and store.dim == DIM

    def test_owners_see_only_their_own_memories(self, store):
        for owner in ("alice", "bob"):
            memories = [memory_for(f"m{i}", owner, minutes=i) for i in range(5)]
            store.upsert(memories, np.stack([vector_for(owner + str(i)) for i in range(5)]))
        assert store.owners() == ["alice", "bob"]
        for owner in ("alice", "bob"):
            assert {m.owner for m in store.get([f"m{i}" for i in range(5)], owner)} == {owner}
            assert {m.owner for m in store.list_memories(owner)} == {owner} and store.count(owner) == 5
            hits = store.search(vector_for("alice0"), 5, owner)
            assert len(hits) == 5 and {m.owner for m, _ in hits} == {owner}
            np.testing.assert_array_equal(store.vectors(["m1"], owner), vector_for(owner + "1")[None])
        assert store.search(vector_for("x"), 3, "carol") == [] and store.count("carol") == 0
        assert store.delete(["m0", "m1"], "carol") == 0 and store.delete_owner("carol") == 0
        assert store.delete_owner("alice") == 5
        assert store.owners() == ["bob"] and store.count("bob") == 5

    def test_round_trip_keeps_every_field(self, store):
        rich = Memory(
            id="r",
            owner="a",
            t=datetime(2024, 3, 1, 12, 30, 15, 123456, tzinfo=UTC),
            content="naïve café ☕ — multi\nline",
            importance=0.75,
            kind="reflection",
            last_access=datetime(2024, 3, 2, tzinfo=UTC),
            links=("x", "y"),
            agent="Ann",
            action="says",
            objects=("cup",),
            location="kitchen",
            metadata={"n": 3, "tags": ["a"], "ok": True},
            session="run-7",
        )
        plain = memory_for("p", "a")
        store.upsert([rich, plain], vectors_for([rich, plain]))
        assert store.get(["r", "p"], "a") == [rich, plain]
        assert store.touch(["r", "missing"], "a", datetime(2025, 1, 1)) == 1
        assert store.get(["r"], "a")[0].last_access == datetime(2025, 1, 1, tzinfo=UTC)
        store.upsert([plain.replace(content="changed")], vectors_for([plain]))  # upsert replaces
        assert store.get(["p"], "a")[0].content == "changed" and store.count("a") == 2

    # ---------------------------------------------------------------------- filters

    @pytest.mark.parametrize("spec", FILTERS, ids=[json.dumps(f, default=str)[:60] for f in FILTERS])
    def test_filters_agree_with_the_reference_semantics(self, store, spec):
        memories = varied_memories(60)
        vectors = vectors_for(memories)
        store.upsert(memories, vectors)
        store.upsert([memory_for("other", "b", kind="plan", metadata={"tag": "red"})], vector_for("other")[None])
        flt = MemoryFilter.parse(spec)
        expected = sorted((m for m in memories if flt.matches(m)), key=lambda m: (m.t, m.id))
        assert ids(store.list_memories("a", filters=spec)) == ids(expected)
        assert ids(store.list_memories("a", filters=flt, offset=2, limit=3)) == ids(expected[2:5])
        query = vector_for("query")
        scores = {m.id: float(v @ query) for m, v in zip(memories, vectors)}
        hits = store.search(query, 10, "a", filters=spec)
        best = sorted((m.id for m in expected), key=lambda i: -scores[i])[:10]
        assert hit_ids(hits) == best
        assert [s for _, s in hits] == pytest.approx([scores[i] for i in best], abs=1e-5)

    def test_k_is_filled_under_a_selective_filter(self, store):
        memories = [
            memory_for(f"m{i}", "a", kind="plan" if i % 50 == 0 else "observation", metadata={"rare": i % 50 == 1})
            for i in range(1000)
        ]
        vectors = vectors_for(memories)
        for start in range(0, 1000, 250):
            store.upsert(memories[start : start + 250], vectors[start : start + 250])
        query = vector_for("probe")
        for spec, predicate in [
            ({"kind": "plan"}, lambda m: m.kind == "plan"),
            ({"metadata": {"rare": True}}, lambda m: m.metadata["rare"]),
        ]:
            matching = [n for n, m in enumerate(memories) if predicate(m)]
            assert len(matching) == 20
            exact = [memories[n].id for n in sorted(matching, key=lambda n: -float(vectors[n] @ query))]
            assert hit_ids(store.search(query, 10, "a", filters=spec)) == exact[:10]
            assert hit_ids(store.search(query, 50, "a", filters=spec)) == exact  # all 20 when k exceeds the matches

    def test_bad_filters_are_refused_naming_the_problem(self, store):
        with pytest.raises(ValueError, match="kinds"):
            store.search(vector_for("q"), 3, "a", filters={"kinds": "plan"})
        with pytest.raises(ValueError, match=r"\$regex"):
            store.list_memories("a", filters={"metadata": {"x": {"$regex": "a"}}})
        with pytest.raises(ValueError, match="unknown kinds"):
            store.list_memories("a", filters={"kind": "dream"})
        with pytest.raises(ValueError, match="since"):
            store.list_memories("a", filters={"since": "yesterday"})

    # ---------------------------------------------------------------------- versions

    def test_superseded_rows_are_history_not_search_results(self, store):
        first = memory_for("m@1", "a", minutes=0, content="first version", superseded_by="m")
        second = memory_for("m@2", "a", minutes=1, content="second version", superseded_by="m")
        current = memory_for("m", "a", minutes=2, content="current version")
        other = memory_for("x", "a", minutes=3)
        store.upsert([first, current, other], np.stack([vector_for("v"), vector_for("w"), vector_for("x")]))
        store.upsert([second], vector_for("v")[None])
        assert store.count("a") == 2
        assert ids(store.list_memories("a")) == ["m", "x"]
        assert set(hit_ids(store.search(vector_for("v"), 5, "a"))) == {"m", "x"}
        assert set(hit_ids(store.search(vector_for("v"), 5, "a", filters={"kind": "observation"}))) == {"m", "x"}
        assert ids(store.history("m", "a")) == ["m@1", "m@2"]
        assert store.get(["m@1"], "a") == [first]
        assert store.history("x", "a") == [] and store.history("m", "b") == []
        assert store.delete(["m"], "a") == 3  # the memory and both older versions
        assert store.get(["m", "m@1", "m@2"], "a") == [] and store.count("a") == 1

    def test_purge_takes_older_versions_with_their_memory(self, store):
        old = memory_for("m", "a", minutes=10)
        version = memory_for("m@1", "a", minutes=100, superseded_by="m")  # newer t than the cutoff
        keep = memory_for("k", "a", minutes=200)
        store.upsert([old, version, keep], vectors_for([old, version, keep]))
        assert store.purge_older_than(EPOCH + timedelta(minutes=50)) == 2
        assert ids(store.get(["m", "m@1", "k"], "a")) == ["k"]

    # ---------------------------------------------------------------------- deletion is final

    def test_deletion_is_final_for_a_second_connection_and_a_second_process(self, make, store_spec):
        first, second = make(), make()
        memories = [memory_for(f"m{i}", "a", minutes=i) for i in range(6)]
        first.upsert(memories, vectors_for(memories))
        assert hit_ids(second.search(vector_for("m0"), 1, "a")) == ["m0"]  # the second connection has seen it
        assert first.delete(["m0"], "a") == 1
        assert "m0" not in hit_ids(second.search(vector_for("m0"), 6, "a"))
        assert second.get(["m0"], "a") == [] and second.count("a") == 5
        assert finish(child(store_spec, "delete", "a", "m1,m2")) == ["open", "2"]
        for store in (first, second):
            assert not {"m1", "m2"} & set(hit_ids(store.search(vector_for("m1"), 6, "a")))
            assert ids(store.list_memories("a")) == ["m3", "m4", "m5"]
            with pytest.raises(KeyError):
                store.vectors(["m1"], "a")
        first.close()
        assert ids(make().list_memories("a")) == ["m3", "m4", "m5"]

    # ---------------------------------------------------------------------- concurrency and crashes

    def test_concurrent_writers_in_threads_and_processes_lose_nothing(self, store, store_spec):
        children = [child(store_spec, "write", f"proc{n}", "25") for n in range(2)]

        def write(tag: str) -> None:
            for i in range(25):
                memory_id = f"{tag}-{i}"
                store.upsert([memory_for(memory_id, "threads", minutes=i)], vector_for(memory_id)[None])

        with ThreadPoolExecutor(3) as pool:
            for done in [pool.submit(write, f"thread{n}") for n in range(3)]:
                done.result()  # re-raises a thread's error
        for n, process in enumerate(children):
            assert finish(process) == ["open", *[f"proc{n}-{i}" for i in range(25)]]
        assert store.count("threads") == 75
        assert set(ids(store.list_memories("threads"))) == {f"thread{n}-{i}" for n in range(3) for i in range(25)}
        for n in range(2):
            owner = f"proc{n}"
            assert store.count(owner) == 25
            assert hit_ids(store.search(vector_for(f"{owner}-7"), 1, owner)) == [f"{owner}-7"]

    def test_new_version_keeps_the_current_one_as_history(self, store):
        first = memory_for("m", "a", content="first")
        store.upsert([first, memory_for("m~1", "a", content="an id the user chose")], vectors_for([first, first]))
        second = memory_for("m", "a", minutes=1, content="second")
        older = store.new_version(second, vector_for("second"))
        # m~1 is taken: never overwritten; the older version's validity ends where the new one's begins
        assert older == first.replace(id="m~2", superseded_by="m", valid_to=second.valid_from)
        assert store.get(["m", "m~2", "m~1"], "a") == [
            second,
            older,
            memory_for("m~1", "a", content="an id the user chose"),
        ]
        np.testing.assert_array_equal(
            store.vectors(["m~2", "m"], "a"), np.stack([vector_for("m"), vector_for("second")])
        )
        assert hit_ids(store.search(vector_for("second"), 1, "a")) == ["m"]
        assert store.search(vector_for("m"), 3, "a", filters={"kind": "observation"})[0][0].id != "m~2"
        third = memory_for("m", "a", minutes=2, content="third")
        assert store.new_version(third, vector_for("third")).id == "m~3"
        assert ids(store.history("m", "a")) == ["m~2", "m~3"] and store.count("a") == 2
        with pytest.raises(KeyError, match="no current memory 'gone'"):
            store.new_version(memory_for("gone", "a"), vector_for("gone"))
        with pytest.raises(KeyError):  # an older version is not current: no version of a version
            store.new_version(memory_for("m~2", "a"), vector_for("x"))
        with pytest.raises(KeyError):  # another owner's memory
            store.new_version(memory_for("m", "b"), vector_for("x"))
        with pytest.raises(InvalidMemoryError):
            store.new_version(third.replace(superseded_by="z"), vector_for("x"))
        assert store.get(["m"], "a") == [third] and ids(store.history("m", "a")) == ["m~2", "m~3"]
        said = memory_for("m", "a", minutes=-5, content="held before")  # a backdated statement: the store numbers it
        kept = store.new_version(said, vector_for("held"), older=True)
        assert kept == said.replace(id="m~4", superseded_by="m") and store.get(["m"], "a") == [third]
        assert ids(store.history("m", "a")) == ["m~2", "m~3", "m~4"] and store.count("a") == 2

    def test_concurrent_new_versions_of_one_id_keep_every_acknowledged_version(self, store, store_spec):
        """Two processes make 40 new versions each of one memory: all 80 end up in its history, once
        each, numbered in the order they committed, each writer's in the order it wrote them."""
        store.upsert([memory_for("common", "a", content="initial")], vector_for("initial")[None])
        writers = [child(store_spec, "versions", "a", "common", "40", f"w{n}") for n in range(2)]
        acknowledged = [finish(process)[1:] for process in writers]
        assert [len(a) for a in acknowledged] == [40, 40]
        history = store.history("common", "a")
        current = store.get(["common"], "a")[0]
        assert [m.id for m in history] == [f"common~{n}" for n in range(1, 81)]
        contents = [m.content for m in [*history, current]]
        expected = {"initial"} | {f"{tag.replace('-', ' version ')}" for a in acknowledged for tag in a}
        assert contents[0] == "initial" and len(contents) == len(set(contents)) == 81 and set(contents) == expected
        for n in range(2):  # each writer's versions in its own order
            mine = [int(c.split()[-1]) for c in contents if c.startswith(f"w{n} ")]
            assert mine == list(range(40))
        tags = [c.replace(" version ", "-") for c in contents[1:]]
        np.testing.assert_array_equal(
            store.vectors([m.id for m in history[1:]] + ["common"], "a"), np.stack([vector_for(t) for t in tags])
        )

    def test_every_acknowledged_write_survives_sigkill(self, make, store_spec):
        process = child(store_spec, "write", "a", "100000")
        acknowledged = []
        for line in process.stdout:
            if line.strip() != "open":
                acknowledged.append(line.strip())
            if len(acknowledged) >= 30:
                break
        os.kill(process.pid, signal.SIGKILL)
        rest, _ = process.communicate(timeout=60)
        acknowledged += [line for line in rest.split() if line != "open"]
        assert process.returncode == -signal.SIGKILL
        store = make()
        present = set(ids(store.list_memories("a")))
        assert set(acknowledged) <= present
        assert len(present - set(acknowledged)) <= 1  # at most the write in flight, committed but not yet printed
        assert store.get(acknowledged[-1:], "a")[0] == memory_for(acknowledged[-1], "a", minutes=len(acknowledged) - 1)
        assert hit_ids(store.search(vector_for(acknowledged[0]), 1, "a")) == [acknowledged[0]]

    # ---------------------------------------------------------------------- bad input

    @pytest.mark.parametrize("label,call,error", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
    def test_bad_input_raises_and_writes_nothing(self, store, label, call, error):
        store.upsert([memory_for("existing", "a")], vector_for("existing")[None])
        with pytest.raises(error):
            call(store)
        assert ids(store.list_memories("a")) == ["existing"] and store.get(["n"], "a") == []

    def test_bad_open_arguments_are_refused(self, store_spec):
        with pytest.raises(ValueError, match="dim"):
            store_spec.open(0)

    # ---------------------------------------------------------------------- optional capabilities
    def test_declared_capabilities_have_their_methods(self, store):
        declared = [capability for capability in CAPABILITIES if supports(store, capability)]  # raises if half-declared
        assert all(isinstance(store, capability) for capability in declared)

    def test_deletion_ledger_reports_every_deletion_of_another_connection(self, make):
        first, second = make(), make()
        if not supports(first, DeletionLedger):
            pytest.skip(f"{type(first).__name__} does not declare DeletionLedger (supports_deletion_ledger)")
        stored = [memory_for(f"m{i}", "a", minutes=i * 10) for i in range(4)]
        first.upsert(stored, vectors_for(stored))
        held = [*stored, memory_for("buffered", "a", minutes=5)]  # one the store never saw (a write buffer)
        mark = first.deletion_mark()
        assert first.deleted_since(mark, "a", held) == (mark, set())
        second.delete(["m0", "buffered"], "a")
        second.delete(["m1"], "b")  # another owner's id: not a deletion of a's m1
        mark, gone = first.deleted_since(mark, "a", held)
        assert gone == {"m0", "buffered"}
        assert mark == first.deletion_mark() > 0, (mark, first.deletion_mark())
        second.purge_older_than(EPOCH + timedelta(minutes=15), owner="a")  # m1 (t=10); m0 and buffered already
        mark, gone = first.deleted_since(mark, "a", held[1:4])
        assert gone == {"m1"}
        second.delete_owner("a")
        assert first.deleted_since(mark, "a", held[2:4])[1] == {"m2", "m3"}
        assert first.deleted_since(first.deletion_mark(), "a", held) == (first.deletion_mark(), set())

    def test_compaction_keeps_every_current_memory(self, store):
        if not supports(store, Compaction):
            pytest.skip(f"{type(store).__name__} does not declare Compaction (supports_compaction)")
        memories = [memory_for(f"m{i}", "a", minutes=i) for i in range(20)]
        store.upsert(memories, vectors_for(memories))
        store.delete([f"m{i}" for i in range(0, 20, 2)], "a")
        store.compact()
        assert ids(store.list_memories("a")) == [f"m{i}" for i in range(1, 20, 2)]
        assert hit_ids(store.search(vector_for("m5"), 1, "a")) == ["m5"]

    def test_index_rebuild_gives_the_same_results(self, store):
        if not supports(store, IndexRebuild):
            pytest.skip(f"{type(store).__name__} does not declare IndexRebuild (supports_index_rebuild)")
        memories = [memory_for(f"m{i}", "a", minutes=i) for i in range(50)]
        store.upsert(memories, vectors_for(memories))
        queries = [vector_for(f"q{i}") for i in range(5)]
        before = [hit_ids(store.search(q, 5, "a")) for q in queries]
        store.rebuild_index()
        assert [hit_ids(store.search(q, 5, "a")) for q in queries] == before
        assert hit_ids(store.search(vector_for("m7"), 1, "a")) == ["m7"]

    def test_expiry_hides_an_expired_row_from_every_read(self, store, clock):
        if not supports(store, Expiry):
            pytest.skip(f"{type(store).__name__} does not declare Expiry (supports_expiry)")
        memories = [
            expiring("soon", "ann", 60, metadata={"tag": "x"}, session="s1"),
            memory_for("kept", "ann", metadata={"tag": "x"}),
            expiring("later", "ann", 120, metadata={"tag": "x"}),
            expiring("only", "bob", 60),
        ]
        store.upsert(memories, vectors_for(memories))
        older = memory_for(
            "soon~1", "ann", superseded_by="soon", expires_at=EXPIRY_START + timedelta(seconds=60), ttl=60.0
        )
        store.upsert([older], vector_for("soon~1")[None])
        back = store.get(["soon"], "ann")[0]
        assert (back.expires_at, back.ttl, back.session) == (EXPIRY_START + timedelta(seconds=60), 60.0, "s1")
        assert store.count("ann") == 3 and store.owners() == ["ann", "bob"]

        clock.advance(90)
        assert [m.id for m in store.get(["soon", "kept", "later"], "ann")] == ["kept", "later"]
        assert sorted(m.id for m in store.list_memories("ann")) == ["kept", "later"]
        assert store.count("ann") == 2 and store.owners() == ["ann"]
        probe = vector_for("soon")  # the expired memory is the nearest: k must still be filled by the others
        assert sorted(m.id for m, _ in store.search(probe, 2, "ann")) == ["kept", "later"]
        assert sorted(m.id for m, _ in store.search(probe, 2, "ann", filters={"metadata": {"tag": "x"}})) == [
            "kept",
            "later",
        ]
        assert sorted(m.id for m, _ in store.search(probe, 2, "ann", filters={"kind": "observation"})) == [
            "kept",
            "later",
        ]
        assert sorted(store.expired(clock.now)) == [("ann", "soon"), ("ann", "soon~1"), ("bob", "only")]
        assert store.expired(clock.now, owner="bob") == [("bob", "only")]

        clock.advance(60)
        assert [m.id for m, _ in store.search(probe, 5, "ann")] == ["kept"]

    def test_expiry_sweep_deletes_only_rows_still_expired(self, store, clock):
        """The sweep's deletion step (``delete_expired``) re-checks the expiry in its own transaction: a
        key put again after the sweep listed it survives; one still expired goes with what is named
        with it. Until then an expired row still holds its id (``get(..., include_expired=True)``)."""
        if not supports(store, Expiry):
            pytest.skip(f"{type(store).__name__} does not declare Expiry (supports_expiry)")
        memories = [expiring("k", "ann", 60), expiring("gone", "ann", 60), memory_for("note", "ann")]
        store.upsert(memories, vectors_for(memories))
        clock.advance(61)
        assert store.expired(clock.now) == [("ann", "gone"), ("ann", "k")]
        assert store.get(["k"], "ann") == [] and ids(store.get(["k"], "ann", include_expired=True)) == ["k"]
        store.upsert([memory_for("k", "ann", content="put again")], vector_for("k")[None])  # another writer
        assert store.delete_expired("k", "ann", clock.now) == 0
        assert store.delete_expired("gone", "ann", clock.now, with_ids=["note"]) == 2
        assert [(m.id, m.content) for m in store.get(["k", "gone", "note"], "ann", include_expired=True)] == [
            ("k", "put again")
        ]

    def test_expiry_refresh_moves_the_expiry_from_the_read(self, store, clock):
        if not supports(store, Expiry):
            pytest.skip(f"{type(store).__name__} does not declare Expiry (supports_expiry)")
        memories = [expiring("a", "ann", 60), memory_for("b", "ann")]
        store.upsert(memories, vectors_for(memories))
        clock.advance(45)
        assert store.refresh_expiry(["a", "b", "missing"], "ann", clock.now) == 1  # b has no TTL
        assert store.get(["a"], "ann")[0].expires_at == clock.now + timedelta(seconds=60)
        clock.advance(45)  # 90 s after the write, 45 after the refresh
        assert [m.id for m in store.get(["a"], "ann")] == ["a"]
        clock.advance(30)
        assert store.get(["a"], "ann") == []
        assert store.refresh_expiry(["a"], "ann", clock.now) == 0  # an expired memory cannot be brought back

    def test_expiry_round_trips_exactly(self, store, clock):
        """expires_at keeps microseconds and its zone (the refresh arithmetic relies on it)."""
        if not supports(store, Expiry):
            pytest.skip(f"{type(store).__name__} does not declare Expiry (supports_expiry)")
        moment = EXPIRY_START + timedelta(seconds=12, microseconds=345678)
        memory = memory_for("m", "ann", expires_at=moment, ttl=12.345678)
        store.upsert([memory], vector_for("m")[None])
        back = store.get(["m"], "ann")[0]
        assert back.expires_at == moment and back.ttl == pytest.approx(12.345678)
        np.testing.assert_allclose(store.vectors(["m"], "ann")[0], vector_for("m"), atol=1e-6)

    # ---------------------------------------------------------------------- chunks (long memories)
    def _chunked(self, store) -> tuple[Memory, np.ndarray]:
        """A long memory "long" whose main vector is far from the probe and whose third window is it."""
        if not supports(store, Chunks):
            pytest.skip(f"{type(store).__name__} does not declare Chunks (supports_chunks)")
        others = [memory_for(f"m{i}", "ann", minutes=i, metadata={"tag": "x"}) for i in range(30)]
        store.upsert(others, vectors_for(others))
        long = memory_for("long", "ann", minutes=40, metadata={"tag": "x"}, content="a long memory " * 50)
        windows = np.stack([vector_for("w1"), vector_for("w2"), vector_for("probe")])
        store.upsert([long], vector_for("long")[None], chunks=[windows])
        return long, windows

    def test_chunks_find_a_long_memory_once_at_its_best_window(self, store):
        long, windows = self._chunked(store)
        probe = vector_for("probe")
        for filters in (None, {"kind": "observation"}, {"metadata": {"tag": "x"}}):
            hits = store.search(probe, 5, "ann", filters=filters)
            assert hit_ids(hits)[0] == "long", filters
            assert hit_ids(hits).count("long") == 1 and len(hits) == 5, filters
            assert hits[0][1] == pytest.approx(1.0, abs=1e-5), filters  # the best window's score, not the main one's
        assert hit_ids(store.search(probe, 5, "ann", filters={"metadata": {"tag": "y"}})) == []  # filters still apply
        assert hit_ids(store.search(vector_for("m3"), 1, "ann")) == ["m3"]  # the main vectors rank as before
        np.testing.assert_allclose(store.chunk_vectors(["long", "m1"], "ann")[0], windows, atol=1e-6)
        assert store.chunk_vectors(["m1"], "ann")[0].shape == (0, DIM)
        with pytest.raises(KeyError):
            store.chunk_vectors(["missing"], "ann")
        assert hit_ids(store.search(probe, 5, "bob")) == []  # owner-scoped

    def test_chunks_follow_the_row_through_replace_version_and_delete(self, store):
        long, _ = self._chunked(store)
        probe = vector_for("probe")
        older = store.new_version(long.replace(content="a long memory, rewritten " * 40), vector_for("long2"))
        assert store.chunk_vectors([older.id], "ann")[0].shape == (0, DIM)  # history is not searched
        assert store.chunk_vectors(["long"], "ann")[0].shape == (0, DIM)  # the new text gave none
        assert "long" not in hit_ids(store.search(probe, 3, "ann"))
        store.new_version(
            store.get(["long"], "ann")[0].replace(content="again " * 60),
            vector_for("long3"),
            chunks=vector_for("probe")[None],
        )
        assert hit_ids(store.search(probe, 1, "ann")) == ["long"]
        store.upsert([store.get(["long"], "ann")[0]], vector_for("long3")[None])  # replaced without chunks
        assert "long" not in hit_ids(store.search(probe, 3, "ann"))
        store.upsert([store.get(["long"], "ann")[0]], vector_for("long3")[None], chunks=[vector_for("probe")[None]])
        store.delete(["long"], "ann")
        assert "long" not in hit_ids(store.search(probe, 3, "ann"))
        assert len(store.search(probe, 40, "ann")) == 30

    @pytest.mark.parametrize(
        "chunks",
        [[np.full((2, DIM), np.nan)], [np.zeros((2, DIM + 1))], [np.zeros(DIM)], [None, None]],
        ids=["nan", "wrong-dim", "one-dimensional", "one-too-many"],
    )
    def test_bad_chunks_are_refused_and_nothing_is_written(self, store, chunks):
        if not supports(store, Chunks):
            pytest.skip(f"{type(store).__name__} does not declare Chunks (supports_chunks)")
        memory = memory_for("m", "ann")
        with pytest.raises(InvalidMemoryError, match="chunks"):
            store.upsert([memory], vector_for("m")[None], chunks=chunks)
        assert store.count("ann") == 0

    def test_an_atomic_write_is_one_transaction_all_or_nothing(self, store):
        if not supports(store, AtomicWrites):
            pytest.skip(f"{type(store).__name__} does not declare AtomicWrites (supports_atomic_write)")
        kept, dropped = memory_for("kept", "ann"), memory_for("dropped", "ann")
        with pytest.raises(RuntimeError, match="abort"), store.atomic_write("ann"):
            store.upsert([dropped], vector_for("dropped")[None])
            assert hit_ids(store.search(vector_for("dropped"), 1, "ann")) == ["dropped"]  # its own write, seen
            with store.atomic_write("bob"):  # nested: one more owner's lock in the same transaction
                store.upsert([memory_for("b", "bob")], vector_for("b")[None])
            raise RuntimeError("abort")
        later = [kept, memory_for("other", "ann")]
        store.upsert(later, vectors_for(later))  # the next writes, and an index that saw the rolled-back one
        assert store.get(["dropped"], "ann") == [] and store.count("bob") == 0
        for memory in later:  # each found at its own vector (score 1), none at a rolled-back one
            [(found, score)] = store.search(vector_for(memory.id), 1, "ann")
            assert found.id == memory.id and score == pytest.approx(1.0, abs=1e-5)
        assert "dropped" not in hit_ids(store.search(vector_for("dropped"), 3, "ann"))
        with store.atomic_write("ann"):
            store.new_version(kept.replace(content="kept, again"), vector_for("kept2"))
        assert [m.content for m in store.history("kept", "ann")] == [kept.content]
        assert hit_ids(store.search(vector_for("kept2"), 1, "ann")) == ["kept"]
