"""Erasure that leaves nothing: after ``delete_all(user=...)`` no byte of the store names the user.

The embedded store is checked the hard way: every file in the folder (SQLite main file, WAL, the
deletion ledger inside it, FAISS index files, manager state files) is read after close and searched
for the user's name and every piece of their text. PostgreSQL's ledger table is read back row by
row. The ledger still does its job for other processes (a manager elsewhere forgets the user and
writes nothing back), with a keyed hash of the owner in place of the name.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from archive_helpers import drop_lexical, relation_bytes
from successor_helpers import STALE, SUCCESSOR, LikelyLyonJudge, LyonJudge

import memnets
from memnets.memory.manager import default_state_path, legacy_state_path

NAME = "zoraida.quist"  # found nowhere else in a store's bytes by chance
TEXTS = [
    "Zoraida keeps her spare key under the blue flowerpot",
    "Zoraida's bank PIN is 80417, she told me twice",
    "Zoraida is allergic to kiwifruit",
    "Zoraida moved to Vilnius in the autumn",
]
OTHER_TEXTS = ["Bob waters the plants on Sundays", "Bob's cat is called Miso"]


# the ends of words the lexical index holds: an FTS5 segment keeps a term after the prefix it shares with
# the term before it ("kiwifruit" after "key" is "iwifruit"), so its words are looked for by their ends too
WORD_ENDS = ["owerpot", "wifruit", "raida"]


def needles() -> list[bytes]:
    """The name and a distinctive piece of every text, in the encodings a store might use."""
    pieces = [NAME, "zoraida", "flowerpot", "80417", "kiwifruit", "Vilnius", "Zoraida", *WORD_ENDS]
    return [p.encode(codec) for p in pieces for codec in ("utf-8", "utf-16-le")]


def lexical_index_bytes(folder: Path) -> bytes:
    """The segments of the archive's lexical index (its FTS5 data table), read past the store's code."""
    import sqlite3

    with sqlite3.connect(folder / "archive.sqlite3") as conn:
        return b"".join(bytes(block) for (block,) in conn.execute("SELECT block FROM memories_fts_data"))


def leaks(folder: Path) -> list[str]:
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(folder)}: {needle!r}" for needle in needles() if needle in data]
    return found


def fill(memory) -> None:
    for n, text in enumerate(TEXTS):
        memory.add(text, user=NAME, id=f"{NAME}-{n}", metadata={"who": NAME})
    memory.update(f"{NAME}-0", "Zoraida keeps her spare key under the red flowerpot", user=NAME)  # a version
    memory.delete(f"{NAME}-3", user=NAME)  # a ledger row for one id (its id holds the name)
    for text in OTHER_TEXTS:
        memory.add(text, user="bob")


@pytest.mark.parametrize("key", [None, "a passphrase for the test"], ids=["plain", "encrypted"])
def test_no_file_of_the_folder_names_the_user_after_delete_all(tmp_path, encoder, key):
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=encoder, key=key, duplicate_threshold=None) as memory:
        fill(memory)
        manager = memory.manager(NAME)
        manager.observe("Zoraida says the flowerpot key is for the neighbour", importance=0.9)
        manager.context_for("Where is the spare key?")
        bob = memory.manager("bob")
        bob.observe("Bob likes rain", importance=0.9)
    assert leaks(folder), "the check finds nothing even before the deletion: it cannot fail"
    assert default_state_path(folder, NAME).is_file()
    if key is None:  # hybrid search: the lexical index holds the user's words, and they must go with them
        assert all(end.encode() in lexical_index_bytes(folder) for end in WORD_ENDS)

    with memnets.open(folder, encoder=encoder, key=key) as memory:
        manager = memory.manager(NAME)  # restores the user's tiers from the state file
        assert manager._held()
        if key is None:  # found by its word (the tiny encoder ranks by chance), as every door searches
            assert memory.search("kiwifruit", user=NAME, k=1)[0].memory.content == TEXTS[2]
        assert memory.delete_all(user=NAME) == 4  # the user's current memories (three adds, one observation)
        assert memory.users() == ["bob"]
    assert not default_state_path(folder, NAME).exists()  # the live manager did not write it again on close
    assert leaks(folder) == []
    with memnets.open(folder, encoder=encoder, key=key) as memory:  # and the rest is intact
        assert sorted(m.content for m in memory.list_memories(user="bob")) == sorted([*OTHER_TEXTS, "Bob likes rain"])


@pytest.mark.parametrize("judge", [LyonJudge(), LikelyLyonJudge()], ids=["ended", "likely replaced"])
def test_no_file_names_a_deleted_memory_that_had_ended_another(tmp_path, encoder, judge):
    """The fact it ended (or likely replaced) is released, and the versions the judge wrote of it no longer name it:
    a caller's id may spell what the memory said, and it stays in no byte of the folder."""
    folder, secret = tmp_path / "memory", b"zoraida-moved-to-the-clinic"
    with memnets.open(folder, encoder=encoder, duplicate_threshold=None, supersession=judge) as memory:
        memory.add(STALE, user="ann")
        memory.add(SUCCESSOR, user="ann", id=secret.decode())
    assert any(secret in p.read_bytes() for p in folder.rglob("*") if p.is_file()), "the check must be able to fail"
    with memnets.open(folder, encoder=encoder, supersession=judge) as memory:
        assert memory.delete(secret.decode(), user="ann")
    assert [p.name for p in folder.rglob("*") if p.is_file() and secret in p.read_bytes()] == []


def test_a_manager_in_another_process_forgets_the_user_and_writes_no_state(tmp_path, encoder):
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=encoder, duplicate_threshold=None) as writer:
        fill(writer)
        with memnets.open(folder, encoder=encoder) as elsewhere:  # another connection, as another process
            held = elsewhere.manager(NAME, write_through_threshold=1.0, batch_size=100)
            held.observe("Zoraida's buffered note about kiwifruit", importance=0.2)  # only in its buffer
            held.context_for("Where does Zoraida live?")
            writer.delete_all(user=NAME)
            held.close()  # learns the deletion from the ledger: forgets, writes nothing back, saves no state
            assert elsewhere.list_memories(user=NAME) == [] and not default_state_path(folder, NAME).exists()
    assert leaks(folder) == []


def test_postgres_ledger_keeps_no_name(pg_url, encoder):
    import psycopg

    table = "e" + uuid.uuid4().hex[:12]
    with memnets.open(pg_url, encoder=encoder, table=table, duplicate_threshold=None) as memory:
        fill(memory)
        other = memnets.open(pg_url, encoder=encoder, table=table)
        try:
            manager = other.manager(NAME, write_through_threshold=1.0, batch_size=100)
            manager.observe("Zoraida's buffered note about kiwifruit", importance=0.2)
            memory.delete_all(user=NAME)
            manager.close()
            assert other.list_memories(user=NAME) == []
        finally:
            other.close()
        assert sorted(m.content for m in memory.list_memories(user="bob")) == sorted(OTHER_TEXTS)
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(f"SELECT * FROM {table}_deletions").fetchall()
        memories = conn.execute(f"SELECT owner, id FROM {table}_memories").fetchall()
    assert rows, "the ledger has rows for other processes"
    flat = repr(rows).lower()
    assert "zoraida" not in flat and "80417" not in flat
    assert all(owner == "bob" for owner, _ in memories)


def test_postgres_lexemes_of_an_erased_user_leave_the_table_files(pg_url, encoder):
    """Hybrid search on PostgreSQL: the lexemes of the user's rows (a generated column, its GIN index) are in
    the table's files while the rows are, and in none of them after delete_all (the store's scrub)."""
    table = "x" + uuid.uuid4().hex[:12]
    with memnets.open(pg_url, encoder=encoder, table=table, search="hybrid", duplicate_threshold=None) as memory:
        fill(memory)
        assert memory.search("kiwifruit", user=NAME, k=1)[0].memory.content == TEXTS[2]
        before = relation_bytes(pg_url, table)
        assert b"kiwifruit" in before and b"flowerpot" in before  # as lexemes too: the payloads hold the text
        memory.delete_all(user=NAME)
        after = relation_bytes(pg_url, table)
        assert [n for n in needles() if n in after] == []
        assert b"miso" in after  # Bob's lexeme ("Bob's cat is called Miso") is kept


def test_state_files_are_named_by_a_collision_free_function_of_the_user(tmp_path, encoder):
    assert default_state_path(tmp_path, "a b") != default_state_path(tmp_path, "a_b")
    assert legacy_state_path(tmp_path, "a b") == legacy_state_path(tmp_path, "a_b")  # what went wrong before
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=encoder) as memory:
        managers = [memory.manager(user) for user in ("a b", "a_b")]  # held: close() saves their state
        for manager in managers:
            manager.observe(f"the note of {manager.owner!r}", id=f"note-{manager.owner}", importance=0.9)
    with memnets.open(folder, encoder=encoder) as memory:
        for user in ("a b", "a_b"):  # each restores its own tiers (the second used to overwrite the first)
            assert list(memory.manager(user)._held()) == [f"note-{user}"]
    assert not any("a b" in p.name or "a_b" in p.name for p in folder.iterdir())


def test_a_state_file_under_the_old_name_is_read_once_and_replaced(tmp_path, encoder):
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=encoder) as memory:
        manager = memory.manager("ann")
        manager.observe("Ann's old note", id="old", importance=0.9)
    default_state_path(folder, "ann").rename(legacy_state_path(folder, "ann"))  # as an older memnets left it
    with memnets.open(folder, encoder=encoder) as memory:
        again = memory.manager("ann")
        assert list(again._held()) == ["old"]
    assert default_state_path(folder, "ann").is_file() and not legacy_state_path(folder, "ann").exists()


@pytest.mark.parametrize("kind", ["archive", "postgres"])
def test_a_ledger_of_names_is_tagged_when_an_older_store_is_upgraded(request, tmp_path, kind):
    """A store from before the tags (SQLite format 3, PostgreSQL format 2) holds names in its ledger;
    the first open by this memnets replaces them by their tags, and the ledger still works."""
    import sqlite3

    from memnets.store import open_store
    from memnets.store.testing import DIM, memory_for, vector_for

    if kind == "archive":
        location, options = str(tmp_path / "store"), {}
    else:
        location, options = request.getfixturevalue("pg_url"), {"table": "g" + uuid.uuid4().hex[:12]}
    with open_store(location, DIM, **options) as store:
        store.upsert([memory_for("gone", NAME), memory_for("kept", NAME)], np.stack([vector_for("g"), vector_for("k")]))
        mark = store.deletion_mark()
        store.delete(["gone"], NAME)
    if kind == "archive":
        with sqlite3.connect(tmp_path / "store" / "archive.sqlite3") as conn:  # as format 3 wrote it
            drop_lexical(conn)  # no lexical index (format 7)
            conn.execute("UPDATE deletions SET owner = ?, id = ?", (NAME, "gone"))
            conn.execute("DROP INDEX memories_owner_expires")
            for column in ("expires_at", "expires_epoch", "ttl"):
                conn.execute(f"ALTER TABLE memories DROP COLUMN {column}")
            conn.execute("DROP INDEX memories_owner_chunked")  # nor the chunks of format 6
            conn.execute("ALTER TABLE memories DROP COLUMN chunks")
            conn.execute("ALTER TABLE reembed DROP COLUMN chunks")
            conn.execute("PRAGMA user_version = 3")
    else:
        import psycopg

        table = options["table"]
        with psycopg.connect(location, autocommit=True) as conn:  # as format 2 wrote it
            drop_lexical(conn, table)  # no lexemes (format 6)
            conn.execute(f"UPDATE {table}_deletions SET owner = %s, id = %s", (NAME, "gone"))
            conn.execute(f"ALTER TABLE {table}_memories DROP COLUMN expires_at")
            conn.execute(f"ALTER TABLE {table}_memories DROP COLUMN ttl")
            conn.execute(f"DROP INDEX {table}_chunked")  # nor the chunks of format 5
            conn.execute(f"ALTER TABLE {table}_memories DROP COLUMN chunks")
            conn.execute(f"ALTER TABLE {table}_reembed DROP COLUMN chunks")
            conn.execute(f"UPDATE {table}_meta SET value = %s WHERE key = 'format'", (b"2",))
    with open_store(location, None, **options) as store:
        held = [memory_for("gone", NAME), memory_for("kept", NAME)]
        assert store.deleted_since(mark, NAME, held)[1] == {"gone"}  # the tagged tombstone still matches
        assert [m.id for m in store.list_memories(NAME)] == ["kept"]
    if kind == "archive":
        with sqlite3.connect(tmp_path / "store" / "archive.sqlite3") as conn:
            rows = conn.execute("SELECT owner, id FROM deletions").fetchall()
    else:
        with psycopg.connect(location) as conn:
            rows = conn.execute(f"SELECT owner, id FROM {table}_deletions").fetchall()
    assert rows and NAME not in repr(rows) and "gone" not in repr(rows)


def test_a_merge_a_full_disk_stopped_runs_at_close(tmp_path, encoder, monkeypatch):
    """The lexical index's merge is part of the scrub after a deletion: where a full disk stops it, the
    deletion stands (the rows are gone for every reader) and the close, with room again, merges."""
    import sqlite3

    from memnets.store import sqlite_lexical

    real, calls = sqlite_lexical.merge, []

    def full_once(conn):
        calls.append(conn)
        if len(calls) == 1:
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorname = "SQLITE_FULL"
            raise error
        real(conn)

    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=encoder, duplicate_threshold=None) as memory:
        fill(memory)
        monkeypatch.setattr(sqlite_lexical, "merge", full_once)
        memory.delete_all(user=NAME)
        assert memory.list_memories(user=NAME) == [] and memory.store._scrub_pending
        assert any(end.encode() in lexical_index_bytes(folder) for end in WORD_ENDS)  # still in a segment
    assert len(calls) == 2 and leaks(folder) == []
