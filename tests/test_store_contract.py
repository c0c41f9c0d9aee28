"""The store contract (memnets.store.MemoryStore), one suite run against every store.

Each test runs on the embedded Archive (SQLite + FAISS, a folder) and on PgVectorStore (a real
PostgreSQL with pgvector, started once per test run by the ``pg_url`` fixture; those cases skip
with the reason when the server cannot start). Children are real processes, kills are SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from archive_helpers import DIM, EPOCH, memory_for, start_child, vector_for, vectors_for

from memnets.records import Memory
from memnets.store import MemoryFilter, MemoryStore, open_store
from memnets.store.errors import (
    ArchiveFormatError,
    ArchiveKeyError,
    InvalidMemoryError,
)

STORES = ["archive", "postgres"]


@pytest.fixture(params=STORES)
def location(request, tmp_path) -> tuple[str, dict]:
    """(location, options) of a fresh, empty store of each kind: a folder, or a URL and a table of its own."""
    if request.param == "archive":
        return str(tmp_path / "store"), {}
    return request.getfixturevalue("pg_url"), {"table": "t" + uuid.uuid4().hex[:16]}


@pytest.fixture
def make(location):
    """Opens the test's store (again, as a second connection, or with another key); closes all at the end."""
    opened = []

    def make(dim: int | None = DIM, key=None) -> MemoryStore:
        store = open_store(location[0], dim, key=key, **location[1])
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make) -> MemoryStore:
    return make()


def ids(memories) -> list[str]:
    return [m.id for m in memories]


def hit_ids(hits) -> list[str]:
    return [m.id for m, _ in hits]


CHILD = """
import json, sys
from archive_helpers import DIM, memory_for, vector_for
from memnets.store import open_store
location, options, mode, owner = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
store = open_store(location, DIM, **options)
print("open", flush=True)
if mode == "write":
    for i in range(int(sys.argv[5])):
        memory_id = f"{owner}-{i}"
        store.upsert([memory_for(memory_id, owner, minutes=i)], vector_for(memory_id)[None])
        print(memory_id, flush=True)  # printed only once the write was acknowledged
elif mode == "delete":
    print(store.delete(sys.argv[5].split(","), owner), flush=True)
store.close()
"""


def child(location, mode: str, owner: str, *args: str):
    return start_child(CHILD, location[0], json.dumps(location[1]), mode, owner, *args)


def finish(process) -> list[str]:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    return out.split()


# ---------------------------------------------------------------------- owner scoping
def test_is_a_memory_store(store):
    assert isinstance(store, MemoryStore) and store.dim == DIM


def test_owners_see_only_their_own_memories(store):
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


def test_round_trip_keeps_every_field(store):
    rich = Memory(
        id="r",
        owner="a",
        t=datetime(2024, 3, 1, 12, 30, 15, 123456, tzinfo=timezone.utc),
        content="naïve café ☕ — multi\nline",
        importance=0.75,
        kind="reflection",
        last_access=datetime(2024, 3, 2, tzinfo=timezone.utc),
        links=("x", "y"),
        agent="Ann",
        action="says",
        objects=("cup",),
        location="kitchen",
        metadata={"n": 3, "tags": ["a"], "ok": True},
    )
    plain = memory_for("p", "a")
    store.upsert([rich, plain], vectors_for([rich, plain]))
    assert store.get(["r", "p"], "a") == [rich, plain]
    assert store.touch(["r", "missing"], "a", datetime(2025, 1, 1)) == 1
    assert store.get(["r"], "a")[0].last_access == datetime(2025, 1, 1, tzinfo=timezone.utc)
    store.upsert([plain.replace(content="changed")], vectors_for([plain]))  # upsert replaces
    assert store.get(["p"], "a")[0].content == "changed" and store.count("a") == 2


# ---------------------------------------------------------------------- filters
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


@pytest.mark.parametrize("spec", FILTERS, ids=[json.dumps(f, default=str)[:60] for f in FILTERS])
def test_filters_agree_with_the_reference_semantics(store, spec):
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


def test_k_is_filled_under_a_selective_filter(store):
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


def test_bad_filters_are_refused_naming_the_problem(store):
    with pytest.raises(ValueError, match="kinds"):
        store.search(vector_for("q"), 3, "a", filters={"kinds": "plan"})
    with pytest.raises(ValueError, match=r"\$regex"):
        store.list_memories("a", filters={"metadata": {"x": {"$regex": "a"}}})
    with pytest.raises(ValueError, match="unknown kinds"):
        store.list_memories("a", filters={"kind": "dream"})
    with pytest.raises(TypeError, match="since"):
        store.list_memories("a", filters={"since": "yesterday"})


# ---------------------------------------------------------------------- versions
def test_superseded_rows_are_history_not_search_results(store):
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


def test_purge_takes_older_versions_with_their_memory(store):
    old = memory_for("m", "a", minutes=10)
    version = memory_for("m@1", "a", minutes=100, superseded_by="m")  # newer t than the cutoff
    keep = memory_for("k", "a", minutes=200)
    store.upsert([old, version, keep], vectors_for([old, version, keep]))
    assert store.purge_older_than(EPOCH + timedelta(minutes=50)) == 2
    assert ids(store.get(["m", "m@1", "k"], "a")) == ["k"]


# ---------------------------------------------------------------------- deletion is final
def test_deletion_is_final_for_a_second_connection_and_a_second_process(make, location):
    first, second = make(), make()
    memories = [memory_for(f"m{i}", "a", minutes=i) for i in range(6)]
    first.upsert(memories, vectors_for(memories))
    assert hit_ids(second.search(vector_for("m0"), 1, "a")) == ["m0"]  # the second connection has seen it
    assert first.delete(["m0"], "a") == 1
    assert "m0" not in hit_ids(second.search(vector_for("m0"), 6, "a"))
    assert second.get(["m0"], "a") == [] and second.count("a") == 5
    assert finish(child(location, "delete", "a", "m1,m2")) == ["open", "2"]
    for store in (first, second):
        assert not {"m1", "m2"} & set(hit_ids(store.search(vector_for("m1"), 6, "a")))
        assert ids(store.list_memories("a")) == ["m3", "m4", "m5"]
        with pytest.raises(KeyError):
            store.vectors(["m1"], "a")
    first.close()
    assert ids(make().list_memories("a")) == ["m3", "m4", "m5"]


# ---------------------------------------------------------------------- concurrency and crashes
def test_concurrent_writers_in_threads_and_processes_lose_nothing(store, location):
    children = [child(location, "write", f"proc{n}", "25") for n in range(2)]

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


def test_every_acknowledged_write_survives_sigkill(make, location):
    process = child(location, "write", "a", "100000")
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
    ("touch with a string", lambda s: s.touch(["existing"], "a", "now"), TypeError),
    ("purge with a string", lambda s: s.purge_older_than("2024-01-01"), TypeError),
    ("history of ids", lambda s: s.history(["existing"], "a"), TypeError),
    ("vectors of a missing id", lambda s: s.vectors(["nope"], "a"), KeyError),
]


@pytest.mark.parametrize("label,call,error", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_input_raises_and_writes_nothing(store, label, call, error):
    store.upsert([memory_for("existing", "a")], vector_for("existing")[None])
    with pytest.raises(error):
        call(store)
    assert ids(store.list_memories("a")) == ["existing"] and store.get(["n"], "a") == []


def test_bad_open_arguments_are_refused(location):
    with pytest.raises(ValueError, match="dim"):
        open_store(location[0], 0, **location[1])
    with pytest.raises(ValueError, match="give dim"):
        open_store(location[0], None, **location[1])


# ---------------------------------------------------------------------- encryption and formats
def test_encrypted_store_needs_its_key_and_keeps_text_sealed(make, location):
    key = os.urandom(32)
    store = make(key=key)
    secret = memory_for("s", "a", content="the launch code is 0000", metadata={"pin": "4321"})
    store.upsert([secret], vector_for("s")[None])
    assert hit_ids(store.search(vector_for("s"), 1, "a", filters={"metadata": {"pin": "4321"}})) == ["s"]
    store.close()
    with pytest.raises(ArchiveKeyError):
        make(key=os.urandom(32))
    with pytest.raises(ArchiveKeyError):
        make(key=None)
    assert make(key=key).get(["s"], "a") == [secret]
    assert b"launch code" not in stored_payload(location) and b"4321" not in stored_payload(location)


def test_plain_store_refuses_a_key(make):
    make().close()
    with pytest.raises(ArchiveKeyError):
        make(key="a passphrase")


def stored_payload(location) -> bytes:
    """Every payload byte as stored, read past the store's own code (SQLite file or SQL)."""
    if location[0].startswith("postgresql"):
        import psycopg

        with psycopg.connect(location[0]) as conn:
            return b"".join(bytes(r[0]) for r in conn.execute(f"SELECT payload FROM {location[1]['table']}_memories"))
    with sqlite3.connect(os.path.join(location[0], "archive.sqlite3")) as conn:
        return b"".join(bytes(r[0]) for r in conn.execute("SELECT payload FROM memories"))


def test_a_newer_format_is_refused_with_a_clear_error(make, location):
    make().close()
    if location[0].startswith("postgresql"):
        import psycopg

        with psycopg.connect(location[0]) as conn:
            conn.execute(f"UPDATE {location[1]['table']}_meta SET value = '99' WHERE key = 'format'")
    else:
        with sqlite3.connect(os.path.join(location[0], "archive.sqlite3")) as conn:
            conn.execute("PRAGMA user_version = 99")
    with pytest.raises(ArchiveFormatError, match="format 99.*Upgrade memnets"):
        make()


def test_archive_of_format_1_is_migrated_on_open(tmp_path):
    folder = tmp_path / "old"
    with open_store(folder, DIM) as store:
        store.upsert([memory_for("m", "a")], vector_for("m")[None])
    with sqlite3.connect(folder / "archive.sqlite3") as conn:  # back to format 1: no superseded_by column
        conn.execute("DROP INDEX memories_owner_superseded")
        conn.execute("ALTER TABLE memories DROP COLUMN superseded_by")
        conn.execute("ALTER TABLE memories DROP COLUMN version")  # nor the row versions and archive id of format 3
        conn.execute("DELETE FROM meta WHERE key = 'archive_id'")
        conn.execute("PRAGMA user_version = 1")
    with open_store(folder, DIM) as store:
        assert store.get(["m"], "a") == [memory_for("m", "a")]
        store.upsert([memory_for("m@1", "a", superseded_by="m")], vector_for("v")[None])
        assert ids(store.history("m", "a")) == ["m@1"] and store.count("a") == 1
    with sqlite3.connect(folder / "archive.sqlite3") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3


def test_postgres_index_path_also_fills_k_under_a_filter(pg_url, monkeypatch):
    """With the exact threshold lowered, a filtered search goes through the HNSW iterative scan (and
    its exact fallback): still k results, all passing the filter."""
    from memnets.store import postgres

    monkeypatch.setattr(postgres, "EXACT_BELOW", 5)
    with open_store(pg_url, DIM, table="t" + uuid.uuid4().hex[:16]) as store:
        memories = [memory_for(f"m{i}", "a", kind="plan" if i % 50 == 0 else "observation") for i in range(1000)]
        store.upsert(memories, vectors_for(memories))
        for k in (10, 20, 30):
            hits = store.search(vector_for("probe"), k, "a", filters={"kind": "plan"})
            assert len(hits) == min(k, 20) and {m.kind for m, _ in hits} == {"plan"}
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
