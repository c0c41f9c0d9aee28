"""The archive under attack by someone who can write its folder but does not hold the key.

One test per attack of issue 17 (each fails on the code before the fix): a tampered index file,
a rolled-back row, a row transplanted from another archive, a replace that left the old text and
vector on disk. Also: the KDF parameters stored and old archives upgraded, key rotation (with a
SIGKILL in the middle), and the rules the index check applies to file names and links.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from archive_helpers import DIM, memory_for, start_child, vector_for, vectors_for

from memnets.store.archive import DB_FILE, FORMAT_VERSION, INDEX_AUTH, INDEX_DIR, Archive, rotate_key
from memnets.store.crypto import DEFAULT_KDF, generate_key
from memnets.store.errors import ArchiveIntegrityError, ArchiveKeyError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "archive_format2"
COLUMNS = ("payload", "vector", "t", "t_epoch", "importance", "kind", "last_access", "superseded_by")


def _archive(path, key, n=12, owner="alice"):
    memories = [memory_for(f"m{i}", owner, minutes=i) for i in range(n)]
    with Archive(path, DIM, key=key) as archive:
        archive.upsert(memories, vectors_for(memories))
    return memories


def _row(path, memory_id):
    with sqlite3.connect(path / DB_FILE) as conn:
        return conn.execute(f"SELECT {', '.join(COLUMNS)} FROM memories WHERE id = ?", (memory_id,)).fetchone()


def _write_row(path, memory_id, values):
    with sqlite3.connect(path / DB_FILE) as conn:
        conn.execute(f"UPDATE memories SET {', '.join(c + ' = ?' for c in COLUMNS)} WHERE id = ?", (*values, memory_id))


# ------------------------------------------------------------------------------ tampered index
def _plant(path, victim, planted):
    """Overwrite the victim's vector inside the saved FAISS file with ``planted`` (what the issue's probe did)."""
    target = vector_for(victim).astype("<f4").tobytes()
    for faiss_file in (path / INDEX_DIR).glob("*.faiss"):
        data = faiss_file.read_bytes()
        if target in data:
            faiss_file.write_bytes(data.replace(target, planted.astype("<f4").tobytes()))
            return
    raise AssertionError("the victim's vector is not in the saved index")


@pytest.mark.parametrize("key", [generate_key(), None], ids=["keyed", "unkeyed"])
def test_a_tampered_index_file_is_not_trusted_and_the_planted_vector_answers_nothing(tmp_path, key, caplog):
    _archive(tmp_path, key)
    planted = vector_for("what the attacker wants found")
    _plant(tmp_path, "m3", planted)
    with caplog.at_level(logging.WARNING, logger="memnets.store.archive"), Archive(tmp_path, DIM, key=key) as archive:
        assert archive.index_source == "rebuilt:untrusted"
        hits = archive.search(planted, 3, "alice")
        for memory, score in hits:  # every score is the true inner product with the stored vector
            assert score == pytest.approx(float(vector_for(memory.id) @ planted), abs=1e-5)
        assert max(score for _, score in hits) < 0.99
    assert "failed their check" in caplog.text and "sha256 differs" in caplog.text
    with Archive(tmp_path, DIM, key=key) as archive:  # the rebuilt index was saved, authenticated, on close
        assert archive.index_source == "loaded"


def test_with_a_key_a_recomputed_checksum_does_not_help_the_forger(tmp_path):
    key = generate_key()
    _archive(tmp_path, key)
    _plant(tmp_path, "m3", vector_for("planted"))
    auth_path = tmp_path / INDEX_DIR / INDEX_AUTH
    auth = json.loads(auth_path.read_text())
    from memnets.safefiles import copy_verified

    auth["files"] = {name: copy_verified(tmp_path / INDEX_DIR, name, None) for name in auth["files"]}
    auth_path.write_text(json.dumps(auth))  # every digest right, but the HMAC needs the key
    with Archive(tmp_path, DIM, key=key) as archive:
        assert archive.index_source == "rebuilt:untrusted"
    # an index folder copied from another archive under the same key is refused too (the MAC binds the archive id)
    _archive(tmp_path / "other", key)
    shutil.rmtree(tmp_path / INDEX_DIR)
    shutil.copytree(tmp_path / "other" / INDEX_DIR, tmp_path / INDEX_DIR)
    with Archive(tmp_path, DIM, key=key) as archive:
        assert archive.index_source == "rebuilt:untrusted"


@pytest.mark.parametrize("attack", ["symlink", "symlinked-marker", "unlisted", "bad-name", "retriever-name"])
def test_index_files_must_be_plain_listed_files_inside_the_folder(tmp_path, attack):
    """Without a key a writer can recompute checksums, so the names are checked on their own."""
    _archive(tmp_path, None)
    folder = tmp_path / INDEX_DIR
    auth = json.loads((folder / INDEX_AUTH).read_text())
    if attack == "symlink":
        faiss_file = next(folder.glob("*.faiss"))
        shutil.move(faiss_file, tmp_path / "outside.faiss")
        faiss_file.symlink_to(tmp_path / "outside.faiss")
    elif attack == "symlinked-marker":
        marker = folder / "archive_generation.json"
        shutil.move(marker, tmp_path / "marker.json")
        marker.symlink_to(tmp_path / "marker.json")
    elif attack == "unlisted":
        (folder / "extra.faiss").write_bytes(b"x")
    else:
        import hashlib

        from memnets.retrieval.faiss_files import MANIFEST

        if attack == "bad-name":
            auth["files"]["../archive.sqlite3"] = auth["files"].pop(MANIFEST)
        else:
            manifest = json.loads((folder / MANIFEST).read_text())
            entry = manifest["owners"][0]
            entry["file" if "file" in entry else "master"] = "../../outside.faiss"
            (folder / MANIFEST).write_text(json.dumps(manifest))
            auth["files"][MANIFEST] = hashlib.sha256((folder / MANIFEST).read_bytes()).hexdigest()
        body = json.dumps({"archive_id": _archive_id(tmp_path), "files": auth["files"]}, sort_keys=True).encode()
        auth["checksum_sha256"] = hashlib.sha256(body).hexdigest()  # the forger recomputes the plain checksum
        (folder / INDEX_AUTH).write_text(json.dumps(auth))
    with Archive(tmp_path, DIM) as archive:
        assert archive.index_source == "rebuilt:untrusted"
        assert archive.search(vector_for("m1"), 1, "alice")[0][0].id == "m1"


def _archive_id(path):
    with sqlite3.connect(path / DB_FILE) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'archive_id'").fetchone()[0]


# ------------------------------------------------------------------------------ rows
def test_a_rolled_back_row_fails_naming_the_row(tmp_path):
    """Put back the older ciphertext (and its clear fields) of a row after it was rewritten."""
    key = generate_key()
    _archive(tmp_path, key)
    before = _row(tmp_path, "m2")
    with Archive(tmp_path, DIM, key=key) as archive:
        archive.upsert(
            [memory_for("m2", "alice", minutes=2, content="corrected: the user is allergic to nuts")],
            vectors_for([memory_for("m2", "alice")]),
        )
    _write_row(tmp_path, "m2", before)
    with Archive(tmp_path, DIM, key=key) as archive:
        with pytest.raises(ArchiveIntegrityError, match=r"memory 'm2' of owner 'alice' \(row version 2\).*rolled back"):
            archive.get(["m2"], "alice")
        assert archive.get(["m1"], "alice")[0].id == "m1"  # the other rows still read


def test_a_row_transplanted_from_another_archive_under_the_same_key_fails_naming_the_row(tmp_path):
    key = generate_key()
    _archive(tmp_path / "a", key)
    _archive(tmp_path / "b", key, owner="alice")
    with sqlite3.connect(tmp_path / "a" / DB_FILE) as source, sqlite3.connect(tmp_path / "b" / DB_FILE) as target:
        values = source.execute(f"SELECT {', '.join(COLUMNS)} FROM memories WHERE id = 'm5'").fetchone()
        target.execute("DELETE FROM memories WHERE id = 'm5'")
        target.execute(
            f"INSERT INTO memories (owner, id, {', '.join(COLUMNS)}) VALUES ('alice', 'm5', "
            f"{', '.join('?' * len(COLUMNS))})",
            values,
        )
    with (
        Archive(tmp_path / "b", DIM, key=key) as archive,
        pytest.raises(ArchiveIntegrityError, match=r"memory 'm5' of owner 'alice'.*copied from another archive"),
    ):
        archive.get(["m5"], "alice")


def test_the_seal_binds_the_version_so_a_payload_moved_between_versions_fails(tmp_path):
    key = generate_key()
    _archive(tmp_path, key, n=3)
    with sqlite3.connect(tmp_path / DB_FILE) as conn:
        conn.execute("UPDATE memories SET version = version + 1 WHERE id = 'm0'")
    with Archive(tmp_path, DIM, key=key) as archive, pytest.raises(ArchiveIntegrityError, match="'m0'"):
        archive.get(["m0"], "alice")


def test_each_write_of_a_row_increments_its_version_and_touch_does_not(tmp_path):
    _archive(tmp_path, None, n=2)
    with Archive(tmp_path, DIM) as archive:
        archive.upsert([memory_for("m0", "alice", content="again")], vectors_for([memory_for("m0", "alice")]))
        archive.upsert([memory_for("m0", "alice", content="and again")], vectors_for([memory_for("m0", "alice")]))
        archive.touch(["m0", "m1"], "alice", memory_for("x", "alice", minutes=50).t)
    with sqlite3.connect(tmp_path / DB_FILE) as conn:
        assert dict(conn.execute("SELECT id, version FROM memories")) == {"m0": 3, "m1": 1}


# ------------------------------------------------------------------------------ replace scrubs
def test_a_replace_scrubs_the_old_text_and_vector_like_a_delete(tmp_path):
    secret = "ORIGINAL-SECRET-7f3a: my card PIN is 4321"
    old = memory_for("m0", "alice", content=secret)
    with Archive(tmp_path, DIM) as archive:
        archive.upsert([old, memory_for("m1", "alice")], np.stack([vector_for("old vector"), vector_for("m1")]))
    old_vector = vector_for("old vector").astype("<f4").tobytes()
    assert any(old_vector in f.read_bytes() for f in (tmp_path / INDEX_DIR).glob("*.faiss"))  # saved on close

    def on_disk(needle: bytes) -> list[str]:
        return [str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*") if f.is_file() and needle in f.read_bytes()]

    with Archive(tmp_path, DIM) as archive:
        archive.upsert([memory_for("m0", "alice", content="nothing to see")], vectors_for([memory_for("m0", "alice")]))
        assert on_disk(secret.encode()) == [] and on_disk(old_vector) == []
        assert archive.get(["m0"], "alice")[0].content == "nothing to see"
    assert on_disk(secret.encode()) == [] and on_disk(old_vector) == []


# ------------------------------------------------------------------------------ KDF and old archives
def test_new_archives_store_the_kdf_parameters(tmp_path):
    with Archive(tmp_path, DIM, key="a passphrase"):
        pass
    with sqlite3.connect(tmp_path / DB_FILE) as conn:
        kdf = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'kdf'").fetchone()[0])
    assert kdf == DEFAULT_KDF == {"name": "scrypt", "n": 2**17, "r": 8, "p": 1}


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "scrypt", "n": 2, "r": 8, "p": 1},
        {"name": "scrypt", "n": 2**30, "r": 8, "p": 1},
        {"name": "pbkdf2"},
        "not json",
    ],
)
def test_stored_kdf_parameters_out_of_bounds_are_refused(tmp_path, bad):
    """A writer of the folder could lower the cost (a downgrade) or raise it to exhaust memory."""
    with Archive(tmp_path, DIM, key="a passphrase"):
        pass
    with sqlite3.connect(tmp_path / DB_FILE) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'kdf'", (bad if isinstance(bad, str) else json.dumps(bad),))
    with pytest.raises(ArchiveIntegrityError, match="stored KDF parameters are unusable"):
        Archive(tmp_path, DIM, key="a passphrase")


@pytest.mark.parametrize("name, key", [("encrypted", "legacy passphrase"), ("plain", None)])
def test_a_format_2_archive_opens_and_is_upgraded(tmp_path, name, key):
    shutil.copy(FIXTURES / f"{name}.sqlite3", tmp_path / DB_FILE)
    with Archive(tmp_path, None, key=key) as archive:
        assert [m.content for m in archive.list_memories("alice")] == [
            "legacy memory number 0",
            "legacy memory number 1",
        ]
        assert archive.history("m0", "alice")[0].content == "an older version"
        assert archive.get(["m2"], "bob")[0].metadata == {"n": 2}
        archive_id = archive.archive_id
    with sqlite3.connect(tmp_path / DB_FILE) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION
        assert conn.execute("SELECT value FROM meta WHERE key = 'kdf'").fetchone() is None  # still the legacy cost
    with Archive(tmp_path, None, key=key) as archive:  # re-sealed to the archive id: opens again, same id
        assert archive.archive_id == archive_id and archive.count("alice") == 2
    if key is not None:
        with pytest.raises(ArchiveKeyError):
            Archive(tmp_path, None, key="wrong")


# ------------------------------------------------------------------------------ key rotation
def test_rotate_key_re_encrypts_in_place_and_raises_the_kdf_of_an_old_archive(tmp_path):
    shutil.copy(FIXTURES / "encrypted.sqlite3", tmp_path / DB_FILE)
    assert rotate_key(tmp_path, "legacy passphrase", "legacy passphrase") == 4  # same passphrase, new salt and cost
    with sqlite3.connect(tmp_path / DB_FILE) as conn:
        assert json.loads(conn.execute("SELECT value FROM meta WHERE key = 'kdf'").fetchone()[0]) == DEFAULT_KDF
    new_key = generate_key()
    before = _row(tmp_path, "m1")
    assert rotate_key(tmp_path, "legacy passphrase", new_key) == 4
    assert _row(tmp_path, "m1")[0] != before[0]  # the ciphertext changed
    with pytest.raises(ArchiveKeyError, match="wrong encryption key"):
        Archive(tmp_path, None, key="legacy passphrase")
    with Archive(tmp_path, None, key=new_key) as archive:
        assert archive.get(["m1"], "alice")[0].content == "legacy memory number 1"
        assert archive.index_source == "loaded"  # saved again by the rotation, authenticated under the new key
    with pytest.raises(ValueError, match="both required"):
        rotate_key(tmp_path, new_key, None)
    plain = tmp_path / "plain"
    _archive(plain, None, n=1)
    with pytest.raises(ArchiveKeyError, match="created without encryption"):
        rotate_key(plain, new_key, generate_key())


_ROTATE_CHILD = """
import sys
from memnets.store.archive import rotate_key

def progress(done, total):
    print("progress", done, total, flush=True)

rotate_key(sys.argv[1], bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]), progress=progress)
print("done", flush=True)
"""


def _opens_with(path, key) -> bool:
    try:
        with Archive(path, DIM, key=key) as archive:
            return archive.count("alice") == 1500 and archive.get(["m7"], "alice")[0].id == "m7"
    except ArchiveKeyError:
        return False


@pytest.mark.parametrize("kill_after", ["first-progress", 0.2, 0.6, 1.5])
def test_a_rotation_killed_at_any_point_leaves_an_archive_under_exactly_one_key(tmp_path, kill_after):
    old, new = generate_key(), generate_key()
    _archive(tmp_path, old, n=1500)
    child = start_child(_ROTATE_CHILD, str(tmp_path), old.hex(), new.hex())
    try:
        if kill_after == "first-progress":  # deterministic: inside the transaction, before the commit
            assert child.stdout.readline().startswith("progress")
        else:
            try:
                child.wait(kill_after)
            except Exception:  # noqa: BLE001 (subprocess.TimeoutExpired: still running, as intended)
                pass
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    under_old, under_new = _opens_with(tmp_path, old), _opens_with(tmp_path, new)
    assert under_old != under_new, f"old key opens: {under_old}, new key opens: {under_new}"
    if kill_after == "first-progress":
        assert under_old


def test_the_rotate_key_command(tmp_path, monkeypatch, capsys):
    from memnets.cli import main

    _archive(tmp_path, "old passphrase", n=3)
    monkeypatch.setenv("OLD_PASS", "old passphrase")
    monkeypatch.setenv("NEW_PASS", "new passphrase")
    assert main(["archive", "rotate-key", str(tmp_path), "--old-key-env", "OLD_PASS", "--new-key-env", "NEW_PASS"]) == 0
    assert "re-encrypted 3 memories" in capsys.readouterr().out
    with Archive(tmp_path, DIM, key="new passphrase") as archive:
        assert archive.count("alice") == 3
    key_file = tmp_path / "raw.key"
    key_file.write_bytes(generate_key())
    os.chmod(key_file, 0o600)
    assert (
        main(["archive", "rotate-key", str(tmp_path), "--old-key-env", "NEW_PASS", "--new-key-file", str(key_file)])
        == 0
    )
    with Archive(tmp_path, DIM, key=key_file.read_bytes()) as archive:
        assert archive.count("alice") == 3
    assert (
        main(["archive", "rotate-key", str(tmp_path), "--old-key-env", "UNSET_VARIABLE_X", "--new-key-env", "NEW_PASS"])
        == 2
    )
    assert "UNSET_VARIABLE_X" in capsys.readouterr().err
    assert main(["archive", "rotate-key", str(tmp_path), "--old-key-env", "NEW_PASS", "--new-key-env", "NEW_PASS"]) == 1
    assert "wrong encryption key" in capsys.readouterr().err
