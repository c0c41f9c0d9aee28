"""Archive: round trips, persistence of the index, deletion down to the bytes on disk, encryption, bad input."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from archive_helpers import DIM, EPOCH, memory_for, single_threaded_faiss, vector_for, vectors_for

from memnets.records import Memory
from memnets.store.archive import DB_FILE, FORMAT_VERSION, INDEX_DIR, INDEX_MARKER, Archive
from memnets.store.crypto import generate_key
from memnets.store.errors import (
    ArchiveError,
    ArchiveFormatError,
    ArchiveIntegrityError,
    ArchiveKeyError,
    InvalidMemoryError,
)


@pytest.fixture(autouse=True)
def _one_faiss_thread():
    with single_threaded_faiss():
        yield


@pytest.fixture
def archive(tmp_path):
    with Archive(tmp_path / "a", DIM) as archive:
        yield archive


def disk_bytes(directory: Path) -> bytes:
    """Every byte the archive keeps on disk (database, WAL, shared memory, index files)."""
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def test_round_trip_of_every_field_survives_reopen(tmp_path):
    aware = datetime(2024, 5, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    rich = Memory(
        id="conv-26/D1:3",
        owner="alice",
        t=aware,
        content="Alice: I adopted a cat 🐈 named Ünï",
        importance=0.75,
        kind="reflection",
        last_access=aware + timedelta(days=1),
        links=("a", "b"),
        agent="Alice",
        action="adopt",
        objects=("cat",),
        location="Zürich",
        metadata={"n": [1, 2], "x": None},
    )
    plain = memory_for("m2", "alice", minutes=5)
    with Archive(tmp_path, DIM) as archive:
        archive.upsert([rich, plain], vectors_for([rich, plain]))
        assert archive.get(["conv-26/D1:3", "m2"], "alice") == [rich, plain]
    with Archive(tmp_path, None) as archive:  # dim=None reads the stored dim
        assert archive.dim == DIM and archive.index_source == "loaded"
        assert archive.get(["m2", "missing", "conv-26/D1:3"], "alice") == [plain, rich]  # order asked, missing skipped
        assert archive.list_memories("alice") == [plain, rich] if plain.t.replace(tzinfo=UTC) < aware else [rich, plain]
        assert archive.export("alice") == archive.list_memories("alice")
        np.testing.assert_array_equal(archive.vectors(["m2"], "alice")[0], vector_for("m2"))


def test_search_ranks_by_inner_product_and_caps_k(archive):
    memories = [memory_for(f"m{i}", "alice", minutes=i) for i in range(20)]
    archive.upsert(memories, vectors_for(memories))
    query = vector_for("m7")
    hits = archive.search(query, 5, "alice")
    assert hits[0][0].id == "m7" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    expected = sorted(memories, key=lambda m: -float(vector_for(m.id) @ query))[:5]
    assert [m.id for m, _ in hits] == [m.id for m in expected]
    assert [s for _, s in hits] == sorted([s for _, s in hits], reverse=True)
    assert len(archive.search(query, 1000, "alice")) == 20
    assert archive.search(query, 3, "nobody") == []


def test_list_memories_pages_oldest_first(archive):
    memories = [memory_for(f"m{i}", "alice", minutes=i) for i in range(6)]
    archive.upsert(memories[::-1], vectors_for(memories[::-1]))
    assert [m.id for m in archive.list_memories("alice")] == [f"m{i}" for i in range(6)]
    assert [m.id for m in archive.list_memories("alice", limit=2)] == ["m0", "m1"]
    assert [m.id for m in archive.list_memories("alice", limit=2, offset=3)] == ["m3", "m4"]
    assert [m.id for m in archive.list_memories("alice", offset=5)] == ["m5"]


def test_add_replaces_same_owner_and_id(archive):
    first = memory_for("m", "alice", content="old text")
    archive.upsert([first], vector_for("old")[None])
    archive.upsert([first.replace(content="new text")], vector_for("new")[None])
    assert archive.count("alice") == 1 and archive.index_size() == 1
    assert [m.content for m in archive.get(["m"], "alice")] == ["new text"]
    assert archive.search(vector_for("old"), 5, "alice")[0][1] == pytest.approx(
        float(vector_for("old") @ vector_for("new")), abs=1e-5
    )


def test_touch_updates_last_access_only_for_the_owner(tmp_path):
    when = EPOCH + timedelta(days=3)
    with Archive(tmp_path, DIM) as archive:
        archive.upsert([memory_for("m", "alice"), memory_for("m", "bob")], vectors_for([memory_for("m", "a")] * 2))
        assert archive.touch(["m", "nope"], "alice", when) == 1
    with Archive(tmp_path, DIM) as archive:
        assert archive.get(["m"], "alice")[0].last_access == when.replace(tzinfo=UTC)
        assert archive.get(["m"], "bob")[0].last_access == EPOCH.replace(tzinfo=UTC)


def test_saved_index_is_rebuilt_when_missing_corrupt_stale_or_of_another_kind(tmp_path):
    memories = [memory_for(f"m{i}", f"o{i % 3}") for i in range(30)]
    with Archive(tmp_path, DIM) as archive:
        archive.upsert(memories, vectors_for(memories))
        expected = [[m.id for m, _ in archive.search(vector_for(f"m{i}"), 4, f"o{i % 3}")] for i in range(30)]

    def results(archive):
        return [[m.id for m, _ in archive.search(vector_for(f"m{i}"), 4, f"o{i % 3}")] for i in range(30)]

    with Archive(tmp_path, DIM) as archive:
        assert archive.index_source == "loaded" and results(archive) == expected
    marker = tmp_path / INDEX_DIR / INDEX_MARKER
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "generation": 0}))  # stale
    with Archive(tmp_path, DIM) as archive:
        assert archive.index_source == "rebuilt" and results(archive) == expected
    for faiss_file in (tmp_path / INDEX_DIR).glob("*.faiss"):
        faiss_file.write_bytes(b"garbage")  # corrupt, marker still current: caught by the checksum, never parsed
    with Archive(tmp_path, DIM) as archive:
        assert archive.index_source == "rebuilt:untrusted" and results(archive) == expected
    shutil.rmtree(tmp_path / INDEX_DIR)
    with Archive(tmp_path, DIM) as archive:
        assert archive.index_source == "rebuilt" and results(archive) == expected
    with Archive(tmp_path, DIM, index="hnsw") as archive:
        assert archive.index_source == "rebuilt" and results(archive) == expected
    with Archive(tmp_path, DIM) as archive:
        assert archive.index_source == "rebuilt" and archive.rebuild_index() == 30
    with Archive(tmp_path, DIM) as archive:
        assert archive.index_source == "loaded"


# ---------------------------------------------------------------- deletion
def test_deleted_memories_never_come_back_and_leave_no_bytes(tmp_path):
    owners = ("alice", "bob", "carol")
    memories = [
        memory_for(f"m{i}", owners[i % 3], minutes=i, content=f"SECRET-{owners[i % 3]}-{i:03d} " + "detail " * 40)
        for i in range(60)
    ]
    with Archive(tmp_path, DIM) as archive:
        archive.upsert(memories, vectors_for(memories))
        archive.save_index()
        assert archive.delete(["m0", "m3", "m1"], "alice") == 2  # m1 is bob's: untouched
        assert archive.delete_owner("bob") == 20
        assert archive.purge_older_than(EPOCH + timedelta(minutes=30), owner="carol") == 10
        assert archive.purge_older_than(EPOCH + timedelta(minutes=12)) == 2  # alice's m6, m9
        gone = {
            m.id
            for m in memories
            if m.owner == "bob" or m.id in {"m0", "m3", "m6", "m9"} or (m.owner == "carol" and int(m.id[1:]) < 30)
        }
        kept = [m for m in memories if m.id not in gone]
        assert archive.index_size() == len(kept) == archive.count("alice") + archive.count("carol")

        def check(archive):
            for owner in owners:
                ids = {m.id for m in archive.list_memories(owner)}
                assert ids == {m.id for m in kept if m.owner == owner}
                for m in memories:
                    hits = {h.id for h, _ in archive.search(vector_for(m.id), 100, owner)}
                    assert not hits & gone and hits == ids
                assert archive.get([m.id for m in memories], owner) == [m for m in kept if m.owner == owner]

        check(archive)
        raw = disk_bytes(tmp_path)
        assert all(m.content[:16].encode() not in raw for m in memories if m.id in gone)
        assert all(m.content[:16].encode() in raw for m in kept)  # the scan does see stored text
        assert not (tmp_path / INDEX_DIR).exists()  # saved index held deleted vectors: dropped
    raw = disk_bytes(tmp_path)  # after close: the index was saved again, without the deleted vectors
    assert all(vector_for(m).tobytes() not in raw for m in gone)
    assert all(vector_for(m.id).tobytes() in raw for m in kept)
    assert all(m.content[:16].encode() not in raw for m in memories if m.id in gone)
    with Archive(tmp_path, DIM) as archive:
        check(archive)


def test_purge_reads_naive_times_as_utc(archive):
    aware = memory_for("aware", "a").replace(t=datetime(2024, 1, 1, 12, tzinfo=timezone(timedelta(hours=5))))  # 07:00Z
    naive = memory_for("naive", "a").replace(t=datetime(2024, 1, 1, 9))  # 09:00Z
    archive.upsert([aware, naive], vectors_for([aware, naive]))
    assert archive.purge_older_than(datetime(2024, 1, 1, 8)) == 1
    assert [m.id for m in archive.list_memories("a")] == ["naive"]
    assert archive.purge_older_than(datetime(2024, 1, 1, 10, tzinfo=UTC), owner="a") == 1


# ---------------------------------------------------------------- encryption
def test_encrypted_content_is_not_on_disk_and_round_trips(tmp_path):
    key = generate_key()
    memories = [
        memory_for(f"m{i}", "alice", content=f"PLAINTEXT-{i} my bank pin is 4711", location="HOMEADDR")
        for i in range(10)
    ]
    with Archive(tmp_path, DIM, key=key) as archive:
        archive.upsert(memories, vectors_for(memories))
        archive.upsert([memories[0]], vectors_for(memories[:1]))  # rewrite: a fresh nonce
        raw = disk_bytes(tmp_path)
        assert b"PLAINTEXT" not in raw and b"4711" not in raw and b"HOMEADDR" not in raw
    with Archive(tmp_path, DIM, key=key) as archive:
        assert archive.get([m.id for m in memories], "alice") == memories
        assert archive.search(vector_for("m4"), 1, "alice")[0][0] == memories[4]
    payloads = [r[0] for r in sqlite3.connect(tmp_path / DB_FILE).execute("SELECT payload FROM memories")]
    nonces = {bytes(p[1:13]) for p in payloads}
    assert len(nonces) == len(payloads) == 10


def test_passphrase_keys_and_key_errors(tmp_path):
    with Archive(tmp_path / "p", DIM, key="correct horse battery staple") as archive:
        archive.upsert([memory_for("m", "a")], vectors_for([memory_for("m", "a")]))
    with Archive(tmp_path / "p", DIM, key="correct horse battery staple") as archive:
        assert archive.count("a") == 1
    with pytest.raises(ArchiveKeyError, match="wrong encryption key"):
        Archive(tmp_path / "p", DIM, key="wrong horse")
    with pytest.raises(ArchiveKeyError, match="wrong encryption key"):
        Archive(tmp_path / "p", DIM, key=generate_key())
    with pytest.raises(ArchiveKeyError, match="is encrypted"):
        Archive(tmp_path / "p", DIM)
    with Archive(tmp_path / "plain", DIM):
        pass
    with pytest.raises(ArchiveKeyError, match="created without encryption"):
        Archive(tmp_path / "plain", DIM, key=generate_key())
    for bad in (b"short", "", 12345):
        with pytest.raises(ArchiveKeyError):
            Archive(tmp_path / f"bad{len(str(bad))}", DIM, key=bad)


@pytest.mark.parametrize("attack", ["flip_byte", "swap_rows", "edit_importance", "edit_vector", "truncate"])
def test_tampered_rows_give_a_clear_error_never_garbage(tmp_path, attack):
    key = generate_key()
    memories = [memory_for("m1", "alice", content="first secret"), memory_for("m2", "alice", content="second secret")]
    with Archive(tmp_path, DIM, key=key) as archive:
        archive.upsert(memories, vectors_for(memories))
    db = sqlite3.connect(tmp_path / DB_FILE)
    (p1,), (p2,) = db.execute("SELECT payload FROM memories ORDER BY id").fetchall()
    if attack == "flip_byte":
        db.execute("UPDATE memories SET payload = ? WHERE id = 'm1'", (p1[:-1] + bytes([p1[-1] ^ 1]),))
    elif attack == "swap_rows":
        db.execute("UPDATE memories SET payload = ? WHERE id = 'm1'", (p2,))
    elif attack == "edit_importance":
        db.execute("UPDATE memories SET importance = 0.99 WHERE id = 'm1'")
    elif attack == "edit_vector":
        db.execute("UPDATE memories SET vector = ? WHERE id = 'm1'", (vector_for("other").tobytes(),))
    else:
        db.execute("UPDATE memories SET payload = ? WHERE id = 'm1'", (p1[:10],))
    db.commit()
    db.close()
    with Archive(tmp_path, DIM, key=key) as archive:
        with pytest.raises(ArchiveIntegrityError, match="'m1'"):
            archive.get(["m1"], "alice")
        assert archive.get(["m2"], "alice") == memories[1:]  # the untouched row still reads


# ---------------------------------------------------------------- bad input
def _bad_adds():
    """(label, memories, vectors) that add must refuse without storing anything."""
    ok = memory_for("ok", "alice")
    return [
        ("empty content", [ok, memory_for("e", "alice", content="")], None),
        ("whitespace content", [ok, memory_for("w", "alice", content=" \n\t\u3000 ")], None),
        ("lone surrogate in content", [ok, memory_for("s", "alice", content="caf\udce9 au lait")], None),
        ("lone surrogate in id", [ok, memory_for("id\ud800", "alice")], None),
        ("lone surrogate in owner", [ok, memory_for("o", "al\udfffice")], None),
        ("lone surrogate in metadata", [ok, memory_for("md", "alice", metadata={"k": "\ud83d"})], None),
        ("lone surrogate in links", [ok, memory_for("ln", "alice", links=("x\udc80",))], None),
        ("unserialisable metadata", [ok, memory_for("ms", "alice", metadata={"k": object()})], None),
        ("duplicate in batch", [ok, memory_for("ok", "alice")], None),
        ("not a Memory", [ok, {"id": "dict", "owner": "alice"}], None),
        ("NaN vector", [ok, memory_for("n", "alice")], np.array([vector_for("a"), np.full(DIM, np.nan)])),
        ("inf vector", [ok, memory_for("i", "alice")], np.array([vector_for("a"), np.r_[np.inf, np.zeros(DIM - 1)]])),
        ("-inf vector", [ok, memory_for("i", "alice")], np.array([vector_for("a"), np.r_[-np.inf, np.zeros(DIM - 1)]])),
        ("beyond float32", [ok, memory_for("b", "alice")], np.array([vector_for("a"), np.full(DIM, 1e39)])),
        ("wrong dim", [ok, memory_for("d", "alice")], np.zeros((2, DIM + 1))),
        ("too few vectors", [ok, memory_for("f", "alice")], np.zeros((1, DIM))),
        ("one flat vector", [ok], np.zeros(DIM)),
        ("strings as vectors", [ok], np.array([["a"] * DIM])),
    ]


BAD_ADDS = _bad_adds()


@pytest.mark.parametrize("label,memories,vectors", BAD_ADDS, ids=[b[0] for b in BAD_ADDS])
def test_bad_adds_are_refused_whole_with_a_clear_error(archive, label, memories, vectors):
    archive.upsert([memory_for("existing", "alice")], vector_for("existing")[None])
    if vectors is None:
        vectors = np.stack([vector_for(str(i)) for i in range(len(memories))])
    with pytest.raises(InvalidMemoryError) as error:
        archive.upsert(memories, vectors)
    assert "Archive.upsert" in str(error.value)
    assert [m.id for m in archive.list_memories("alice")] == ["existing"]  # nothing of the batch, nothing lost
    assert archive.index_size() == 1


BAD_CALLS = [
    ("search NaN query", lambda a: a.search(np.full(DIM, np.nan), 3, "alice"), InvalidMemoryError),
    ("search wrong dim", lambda a: a.search(np.zeros(DIM + 2), 3, "alice"), InvalidMemoryError),
    ("search k=0", lambda a: a.search(vector_for("x"), 0, "alice"), ValueError),
    ("search k=-1", lambda a: a.search(vector_for("x"), -1, "alice"), ValueError),
    ("search k='3'", lambda a: a.search(vector_for("x"), "3", "alice"), ValueError),
    ("search k=True", lambda a: a.search(vector_for("x"), True, "alice"), ValueError),
    ("search empty owner", lambda a: a.search(vector_for("x"), 3, ""), ValueError),
    ("search owner None", lambda a: a.search(vector_for("x"), 3, None), ValueError),
    ("get ids as one string", lambda a: a.get("existing", "alice"), TypeError),
    ("get non-str id", lambda a: a.get([1], "alice"), TypeError),
    ("get surrogate id", lambda a: a.get(["\ud800"], "alice"), InvalidMemoryError),
    ("delete ids as one string", lambda a: a.delete("existing", "alice"), TypeError),
    ("delete surrogate owner", lambda a: a.delete(["existing"], "\udc00"), InvalidMemoryError),
    ("delete_owner empty", lambda a: a.delete_owner(""), ValueError),
    ("purge with a string that is no time", lambda a: a.purge_older_than("last week"), ValueError),  # ISO is a time
    ("touch with a string that is no time", lambda a: a.touch(["existing"], "alice", "now"), ValueError),
    ("list negative limit", lambda a: a.list_memories("alice", limit=-1), ValueError),
    ("vectors of a missing id", lambda a: a.vectors(["nope"], "alice"), KeyError),
]


@pytest.mark.parametrize("label,call,error", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_calls_raise_and_change_nothing(archive, label, call, error):
    archive.upsert([memory_for("existing", "alice")], vector_for("existing")[None])
    with pytest.raises(error):
        call(archive)
    assert [m.id for m in archive.list_memories("alice")] == ["existing"]


def test_text_far_beyond_the_encoder_length_is_stored_whole(archive):
    huge = "word " * 200_000 + "THE END"  # ~1 MB, thousands of times an encoder's 256 tokens
    archive.upsert([memory_for("huge", "alice", content=huge)], vector_for("huge")[None])
    assert archive.get(["huge"], "alice")[0].content == huge
    assert archive.search(vector_for("huge"), 1, "alice")[0][0].content.endswith("THE END")


def test_newer_format_foreign_files_and_wrong_dim_are_refused(tmp_path):
    with Archive(tmp_path / "new", DIM) as archive:
        archive.upsert([memory_for("m", "a")], vector_for("m")[None])
    db = sqlite3.connect(tmp_path / "new" / DB_FILE)
    db.execute(f"PRAGMA user_version = {FORMAT_VERSION + 1}")
    db.close()
    with pytest.raises(ArchiveFormatError, match=f"format {FORMAT_VERSION + 1}.*Upgrade memnets"):
        Archive(tmp_path / "new", DIM)
    assert (
        sqlite3.connect(tmp_path / "new" / DB_FILE).execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION + 1
    )

    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / DB_FILE).write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(ArchiveFormatError, match="not a memnets archive"):
        Archive(tmp_path / "garbage", DIM)
    (tmp_path / "foreign").mkdir()
    sqlite3.connect(tmp_path / "foreign" / DB_FILE).execute("CREATE TABLE t (x)")
    with pytest.raises(ArchiveFormatError, match="not a memnets archive"):
        Archive(tmp_path / "foreign", DIM)

    with Archive(tmp_path / "dim", DIM):
        pass
    with pytest.raises(ArchiveFormatError, match=f"dim {DIM}.*dim={DIM + 1}"):
        Archive(tmp_path / "dim", DIM + 1)
    with pytest.raises(ValueError, match="give dim"):
        Archive(tmp_path / "empty", None)
    with pytest.raises(ValueError, match="dim"):
        Archive(tmp_path / "zero", 0)


def test_closed_archive_refuses_calls(tmp_path):
    archive = Archive(tmp_path, DIM)
    archive.close()
    archive.close()  # twice is fine
    with pytest.raises(ArchiveError, match="closed"):
        archive.count("alice")


def test_the_archive_closes_its_index_and_the_ones_a_rebuild_replaces(tmp_path):
    """Each retriever the archive made is closed (its upkeep stopped) by the time the archive is:
    a retriever still rebuilding in the background when the process exits used to crash it."""
    memories = [memory_for(f"m{i}", "alice") for i in range(10)]
    archive = Archive(tmp_path, DIM)
    archive.upsert(memories, vectors_for(memories))
    first = archive._index.retriever
    assert archive.rebuild_index() == 10
    assert first.closed and not archive._index.retriever.closed  # replaced: told to stop
    archive.close()
    assert archive._index.retriever.closed


def test_a_reader_far_behind_the_pruned_change_log_rebuilds_and_agrees(tmp_path, monkeypatch):
    import memnets.store.faiss_sync as faiss_sync

    monkeypatch.setattr(faiss_sync, "CHANGELOG_KEEP", 4)
    with Archive(tmp_path, DIM) as reader, Archive(tmp_path, DIM) as writer:
        reader.upsert([memory_for("first", "a")], vector_for("first")[None])
        for i in range(20):
            writer.upsert([memory_for(f"m{i}", "a")], vector_for(f"m{i}")[None])
        writer.delete(["m3"], "a")
        assert writer._require_open().execute("SELECT count(*) FROM changes").fetchone()[0] <= 7  # pruned
        hits = reader.search(vector_for("m7"), 30, "a")  # its log position was pruned away: full rebuild
        assert hits[0][0].id == "m7" and len(hits) == 20 and "m3" not in {m.id for m, _ in hits}
        assert reader.index_size() == writer.index_size() == 20


def test_search_and_delete_beyond_sqlite_parameter_limits(archive):
    memories = [memory_for(f"m{i}", "alice") for i in range(1200)]
    archive.upsert(memories, np.tile(vector_for("same"), (1200, 1)))
    assert len(archive.search(vector_for("same"), 5000, "alice")) == 1200
    assert len(archive.get([m.id for m in memories], "alice")) == 1200
    assert archive.delete([m.id for m in memories[:1100]], "alice") == 1100
    assert archive.count("alice") == archive.index_size() == 100
