"""The store contract (memnets.store.testing.StoreContract) run on both stores, and what only memnets' stores promise.

The suite itself lives in :mod:`memnets.store.testing`, so a third-party store runs the same
tests. Here it runs on the embedded Archive (SQLite + FAISS, a folder) and on PgVectorStore (a real
PostgreSQL with pgvector, started once per test run by the ``pg_url`` fixture; those cases skip
with the reason when the server cannot start). Children are real processes, kills are SIGKILL.
The tests below the classes cover memnets' own promises: encryption, format versions, migrations.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from datetime import UTC, datetime

import numpy as np
import pytest
from archive_helpers import DIM, drop_lexical, memory_for, start_child, vector_for, vectors_for

from memnets.store import LexicalSearch, MemoryStore, SearchVectors, StoreError, open_store, supports
from memnets.store.errors import ArchiveFormatError, ArchiveKeyError
from memnets.store.sqlite_schema import FORMAT_VERSION
from memnets.store.testing import StoreContract, StoreSpec, hit_ids, ids

OPEN_STORE = "memnets.store:open_store"


class TestArchive(StoreContract):
    @pytest.fixture
    def store_spec(self, tmp_path) -> StoreSpec:
        return StoreSpec(OPEN_STORE, {"location": str(tmp_path / "store")})


class TestPgVectorStore(StoreContract):
    @pytest.fixture
    def store_spec(self, pg_url) -> StoreSpec:
        return StoreSpec(OPEN_STORE, {"location": pg_url, "table": "t" + uuid.uuid4().hex[:16]})


@pytest.fixture(params=["archive", "postgres"])
def location(request, tmp_path) -> tuple[str, dict]:
    """(location, options) of a fresh, empty store of each kind: a folder, or a URL and a table of its own."""
    if request.param == "archive":
        return str(tmp_path / "store"), {}
    return request.getfixturevalue("pg_url"), {"table": "t" + uuid.uuid4().hex[:16]}


@pytest.fixture
def make(location):
    """Opens the test's store (again, or with another key); closes all at the end."""
    opened = []

    def make(dim: int | None = DIM, key=None) -> MemoryStore:
        store = open_store(location[0], dim, key=key, **location[1])
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def test_open_without_dim_of_an_empty_store_says_to_give_it(location):
    with pytest.raises(ValueError, match="give dim"):
        open_store(location[0], None, **location[1])


@pytest.mark.parametrize("key", [None, os.urandom(32)], ids=["plain", "encrypted"])
def test_search_with_vectors_is_search_with_the_vectors_of_its_rows(make, key):
    """SearchVectors: the results of search, with what vectors() reads for them, on every path a search takes."""
    store = make(key=key)
    assert supports(store, SearchVectors)
    kinds = ("plan", "observation")
    memories = [memory_for(f"m{i}", "a", minutes=i, kind=kinds[i % 2], metadata={"tag": i % 3}) for i in range(15)]
    store.upsert(memories, vectors_for(memories))
    long = memory_for("long", "a", minutes=20, content="a long memory " * 50)
    store.upsert([long], vector_for("long")[None], chunks=[vector_for("probe")[None]])  # found at its window
    store.new_version(memories[0].replace(content="m0, rewritten"), vector_for("m0 again"))  # a version's row
    probe = vector_for("probe")
    as_of = {"as_of": datetime.now(UTC)}
    for filters in (None, {"kind": "plan"}, {"metadata": {"tag": 1}}, as_of):
        found, vectors = store.search_with_vectors(probe, 5, "a", filters=filters)
        assert [(m.id, s) for m, s in found] == [(m.id, s) for m, s in store.search(probe, 5, "a", filters=filters)]
        assert len(found) == 5 and vectors.dtype == np.float32, filters
        np.testing.assert_array_equal(vectors, store.vectors(hit_ids(found), "a"))
    found, vectors = store.search_with_vectors(probe, 3, "nobody")
    assert found == [] and vectors.shape == (0, DIM)


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


def test_a_store_of_the_format_before_the_lexical_index_builds_it_from_its_rows(make, location):
    """Archive format 6 -> 7, PostgreSQL 5 -> 6: the first open indexes the current rows it holds (an older
    version's text stays out), and the index then follows every write."""
    memories = [memory_for("m", "a", content="the Zanzibar trip"), memory_for("n", "b", content="a Zanzibar map")]
    with make() as store:
        store.upsert(memories, vectors_for(memories))
        store.new_version(memories[0].replace(content="the Reykjavik trip"), vector_for("m2"))
    if location[0].startswith("postgresql"):
        import psycopg

        from memnets.store.postgres import FORMAT_VERSION as CURRENT

        with psycopg.connect(location[0], autocommit=True) as conn:
            drop_lexical(conn, location[1]["table"])
            conn.execute(f"UPDATE {location[1]['table']}_meta SET value = %s WHERE key = 'format'", (b"5",))
    else:
        CURRENT = FORMAT_VERSION
        with sqlite3.connect(os.path.join(location[0], "archive.sqlite3")) as conn:
            drop_lexical(conn)
            conn.execute("PRAGMA user_version = 6")
    store = make(None)
    assert supports(store, LexicalSearch)
    assert hit_ids(store.lexical_search("Reykjavik Zanzibar", 5, "a")) == ["m"]
    assert hit_ids(store.lexical_search("Zanzibar", 5, "b")) == ["n"]
    store.upsert([memory_for("o", "a", content="Zanzibar again")], vector_for("o")[None])
    store.delete(["m"], "a")
    assert hit_ids(store.lexical_search("Reykjavik Zanzibar", 5, "a")) == ["o"]
    assert stored_format(location) == CURRENT


def stored_format(location) -> int:
    """The format a store says it is (PRAGMA user_version, or the meta row of PostgreSQL)."""
    if location[0].startswith("postgresql"):
        import psycopg

        with psycopg.connect(location[0]) as conn:
            return int(
                conn.execute(f"SELECT value FROM {location[1]['table']}_meta WHERE key = 'format'").fetchone()[0]
            )
    with sqlite3.connect(os.path.join(location[0], "archive.sqlite3")) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def test_an_encrypted_store_keeps_no_lexical_index(make):
    """Its text is sealed; an index of its words would hold them in clear (docs/security.md)."""
    store = make(key=os.urandom(32))
    store.upsert([memory_for("s", "a", content="the vault word is Quincunx")], vector_for("s")[None])
    assert not supports(store, LexicalSearch)
    with pytest.raises(StoreError, match="keeps no lexical index.*encrypted"):
        store.lexical_search("Quincunx", 1, "a")


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
        drop_lexical(conn)  # nor the lexical index of format 7
        conn.execute("DROP INDEX memories_owner_superseded")
        conn.execute("ALTER TABLE memories DROP COLUMN superseded_by")
        conn.execute("ALTER TABLE memories DROP COLUMN version")  # nor the row versions and archive id of format 3
        conn.execute("DELETE FROM meta WHERE key = 'archive_id'")
        conn.execute("DROP INDEX memories_owner_expires")  # nor the expiry of format 4
        for column in ("expires_at", "expires_epoch", "ttl"):
            conn.execute(f"ALTER TABLE memories DROP COLUMN {column}")
        _drop_chunks(conn, "")  # nor the chunks of format 6
        conn.execute("PRAGMA user_version = 1")
    with open_store(folder, DIM) as store:
        assert store.get(["m"], "a") == [memory_for("m", "a")]
        store.upsert([memory_for("m@1", "a", superseded_by="m")], vector_for("v")[None])
        assert ids(store.history("m", "a")) == ["m@1"] and store.count("a") == 1
    with sqlite3.connect(folder / "archive.sqlite3") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION


def _drop_chunks(conn, prefix: str) -> None:
    """Take a store back to before chunks (archive format 5, PostgreSQL format 4): no chunks columns, no index."""
    conn.execute(f"DROP INDEX {prefix + 'chunked' if prefix else 'memories_owner_chunked'}")
    conn.execute(f"ALTER TABLE {prefix}memories DROP COLUMN chunks")
    conn.execute(f"ALTER TABLE {prefix}reembed DROP COLUMN chunks")


def test_a_store_of_the_format_before_chunks_opens_and_takes_long_memories(make, location):
    """The migration steps from before chunks (archive format 5, PostgreSQL 4) on a store with memories."""
    with make() as store:
        store.upsert(
            [memory_for("m", "a"), memory_for("n", "a")], vectors_for([memory_for("m", "a"), memory_for("n", "a")])
        )
    if location[0].startswith("postgresql"):
        import psycopg

        table = location[1]["table"]
        with psycopg.connect(location[0], autocommit=True) as conn:
            drop_lexical(conn, table)
            _drop_chunks(conn, f"{table}_")
            conn.execute(f"UPDATE {table}_meta SET value = %s WHERE key = 'format'", (b"4",))
    else:
        with sqlite3.connect(os.path.join(location[0], "archive.sqlite3")) as conn:
            drop_lexical(conn)
            _drop_chunks(conn, "")
            conn.execute("PRAGMA user_version = 5")
    store = make(None)
    assert store.get(["m"], "a") == [memory_for("m", "a")]
    assert store.chunk_vectors(["m"], "a")[0].shape == (0, DIM)
    long = memory_for("long", "a", content="long " * 100)
    store.upsert([long], vector_for("long")[None], chunks=[vector_for("probe")[None]])
    assert hit_ids(store.search(vector_for("probe"), 1, "a")) == ["long"]
    assert hit_ids(store.search(vector_for("n"), 1, "a")) == ["n"]


def test_postgres_index_path_also_fills_k_under_a_filter(pg_url, monkeypatch):
    """With the exact threshold lowered, a filtered search goes through the HNSW iterative scan (and
    its exact fallback): still k results, all passing the filter."""
    from memnets.store import pg_search

    monkeypatch.setattr(pg_search, "EXACT_BELOW", 5)
    with open_store(pg_url, DIM, table="t" + uuid.uuid4().hex[:16]) as store:
        memories = [memory_for(f"m{i}", "a", kind="plan" if i % 50 == 0 else "observation") for i in range(1000)]
        store.upsert(memories, vectors_for(memories))
        for k in (10, 20, 30):
            hits = store.search(vector_for("probe"), k, "a", filters={"kind": "plan"})
            assert len(hits) == min(k, 20) and {m.kind for m, _ in hits} == {"plan"}
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


# ---------------------------------------------------------------------- capability declarations
def test_supports_reads_the_declaration_not_the_methods():
    from memnets.store import Compaction, DeletionLedger, supports

    class Undeclared:  # has the methods, declares nothing: not a ledger
        def deletion_mark(self):
            return 0

        def deleted_since(self, mark, owner, memories):
            return mark, set()

    class HalfDeclared:
        supports_compaction = True

    assert not supports(Undeclared(), DeletionLedger)
    with pytest.raises(TypeError, match="supports_compaction = True but lacks a method of Compaction"):
        supports(HalfDeclared(), Compaction)
    with pytest.raises(TypeError, match="not a store capability"):
        supports(Undeclared(), MemoryStore)


def test_the_store_package_imports_without_pytest():
    code = "import sys, memnets, memnets.store, memnets.store.archive; memnets.StoreError; assert 'pytest' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})


# ---------------------------------------------------------------------- versions through memnets.open
UPDATER = """
import sys
import memnets
location, table, encoder, tag = sys.argv[1:5]
with memnets.open(location, encoder=encoder, **({"table": table} if table else {})) as memory:
    print("open", flush=True)
    for i in range(40):
        memory.update("common", f"{tag} says version {i}", user="u")  # retried inside when the other got in between
        print(f"{tag}-{i}", flush=True)  # printed once the update was acknowledged
"""


@pytest.mark.slow
def test_two_processes_updating_one_memory_keep_all_80_versions(location, tiny_model_dir):
    """AgentMemory.update from two processes at once (issue 25: on PostgreSQL 40 of 80 updates were
    in no version of history, on the embedded store 1): every acknowledged update is a version, once."""
    import memnets

    where, table = location[0], location[1].get("table", "")
    with memnets.open(where, encoder=str(tiny_model_dir), **location[1]) as memory:
        memory.add("initial text", user="u", id="common")
    writers = [start_child(UPDATER, where, table, str(tiny_model_dir), f"w{n}") for n in range(2)]
    acknowledged = []
    for process in writers:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-2000:]
        acknowledged += out.split()[1:]
    assert len(acknowledged) == 80
    with memnets.open(where, encoder=str(tiny_model_dir), **location[1]) as memory:
        versions = [m.content for m in memory.history("common", user="u")]  # the older ones, then the current one
    assert versions[0] == "initial text" and len(versions) == 81
    assert sorted(versions[1:]) == sorted(tag.replace("-", " says version ") for tag in acknowledged)
    for n in range(2):
        assert [int(v.split()[-1]) for v in versions if v.startswith(f"w{n} ")] == list(range(40))


# ---------------------------------------------------------------------- the near-match decision and its write, at once
ADDER = """
import os, sys, time
import memnets
location, table, encoder, go = sys.argv[1:5]
with memnets.open(location, encoder=encoder, **({"table": table} if table else {})) as memory:
    memory.add("warm up the encoder", user="other")
    print("open", flush=True)
    while not os.path.exists(go):  # both processes start adding at the same moment
        time.sleep(0.001)
    for i in range(25):  # one user a round: the sentence is the user's only memory
        print(memory.add("the budget meeting moved to room four", user=f"u{i}").outcome, flush=True)
"""


def test_two_processes_adding_the_same_sentences_at_once_store_each_once(location, tiny_model_dir, tmp_path):
    """The near-match check and the write it decides are one transaction of the store (atomic_write):
    two processes adding the same sentence for one user at once (25 users in turn) store it once per
    user, added by one process and found "unchanged" by the other. Checked apart, both found no match
    for the sentence the other was writing, and each stored it (before: 2 of 25 users had it twice on
    the archive, 10 on PostgreSQL)."""
    import memnets

    where, table = location[0], location[1].get("table", "")
    go = tmp_path / "go"
    adders = [start_child(ADDER, where, table, str(tiny_model_dir), str(go)) for _ in range(2)]
    for process in adders:
        assert process.stdout.readline().strip() == "open", process.stderr.read()[-2000:]
    go.touch()
    outcomes = []
    for process in adders:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-2000:]
        outcomes += out.split()
    with memnets.open(where, encoder=str(tiny_model_dir), **location[1]) as memory:
        stored = {f"u{i}": len(memory.list_memories(user=f"u{i}")) for i in range(25)}
    assert stored == {f"u{i}": 1 for i in range(25)}
    assert sorted(outcomes) == ["added"] * 25 + ["unchanged"] * 25
