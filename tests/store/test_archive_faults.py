"""Faults of the embedded archive (issue 25): a damaged file, a read-only folder, a full disk.

Real files and real mounts: a byte flipped in the SQLite file of a closed archive, a read-only
bind mount (or, without root, a folder without write permission), and a small tmpfs filled to
the last block. The mount tests need root and skip, with the reason, without it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from archive_helpers import DIM, fill, memory_for, mount, vector_for, vectors_for

from memnets.store.archive import DB_FILE, Archive
from memnets.store.disk_reserve import RESERVE_FILE
from memnets.store.errors import StoreCorruptError, StoreError, StoreFormatError, StoreReadOnlyError

IDS = [f"key-{i:04d}" for i in range(40)]


def _filled(folder: Path) -> None:
    with Archive(folder, DIM) as archive:
        memories = [memory_for(i, "alice", minutes=n) for n, i in enumerate(IDS)]
        archive.upsert(memories, vectors_for(memories))


def _flip_in_unique_index(folder: Path, needle: bytes) -> None:
    """Flip one bit of ``needle`` (a key) inside the root page of the (owner, id) index, the file closed."""
    path = folder / DB_FILE
    with contextlib.closing(sqlite3.connect(path)) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_memories_1'").fetchone()
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    start = (root[0] - 1) * size
    offset = data.index(needle, start, start + size)
    data[offset + len(needle) - 1] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_the_owner_id_index_is_reported_on_open(tmp_path):
    _filled(tmp_path)
    _flip_in_unique_index(tmp_path, b"key-0007")
    with pytest.raises(StoreCorruptError, match=r"damaged .*\(owner, id\) index.*backup") as raised:
        Archive(tmp_path, DIM)
    assert "not a memnets archive" not in str(raised.value)
    with pytest.raises(StoreCorruptError, match="integrity_check"):
        Archive(tmp_path, DIM, check="full")
    # check="off" (documented for huge stores) opens it, and shows what the check protects against:
    with Archive(tmp_path, DIM, check="off") as archive:
        assert archive.get(["key-0007"], "alice") == []  # the row is there, but the index lookup misses it
        assert [m.id for m, _ in archive.search(vector_for("key-0007"), 1, "alice")] == ["key-0007"]


def test_a_healthy_archive_passes_every_check_and_a_bad_check_value_is_refused(tmp_path):
    _filled(tmp_path)
    for check in ("quick", "full", "off"):
        with Archive(tmp_path, DIM, check=check) as archive:
            assert archive.count("alice") == len(IDS)
    with pytest.raises(ValueError, match="check must be one of"):
        Archive(tmp_path, DIM, check="fast")


@contextlib.contextmanager
def _read_only_view(folder: Path, view: Path):
    """``folder`` seen through a read-only bind mount at ``view`` (root), or ``folder`` itself made read-only."""
    view.mkdir()
    if os.geteuid() == 0:
        mount("--bind", str(folder), str(view))
        try:
            mount("-o", "remount,bind,ro", str(view))
            yield view
        finally:
            subprocess.run(["umount", str(view)], check=True)
        return
    for path in (folder, *folder.iterdir()):
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield folder
    finally:
        for path in (folder, *folder.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_read_only_folder_is_reported_as_read_only_not_as_a_foreign_file(tmp_path):
    store = tmp_path / "store"
    _filled(store)
    with _read_only_view(store, tmp_path / "view") as view:
        with pytest.raises(StoreReadOnlyError, match="read-only.*nothing was changed") as raised:
            Archive(view, DIM)
        assert "not a memnets archive" not in str(raised.value)
        with pytest.raises(StoreReadOnlyError):
            Archive(view / "new", DIM)  # nor can one be created there
    with Archive(store, DIM) as archive:  # the store itself is untouched
        assert archive.count("alice") == len(IDS)


def test_an_archive_opened_on_a_full_disk_says_so_not_that_it_is_foreign(tmp_path):
    """Before: StoreFormatError "... is not a memnets archive (SQLite says: database or disk is full)"."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk))
    try:
        fill(disk)
        with pytest.raises(StoreError, match="its disk is full .*free space") as raised:
            Archive(disk / "store", DIM)
        assert not isinstance(raised.value, StoreFormatError)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@contextlib.contextmanager
def _full_disk(tmp_path: Path, reserve: int):
    """An archive of 1,500 memories on a 24 MiB tmpfs, then the disk filled to the last block."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk))
    archive = None
    try:
        store = disk / "store"
        archive = Archive(store, DIM, reserve=reserve)
        memories = [memory_for(f"m{i:04d}", "alice", minutes=i, content=f"note {i} " + "x" * 900) for i in range(1500)]
        for start in range(0, len(memories), 250):
            archive.upsert(memories[start : start + 250], vectors_for(memories[start : start + 250]))
        assert (store / RESERVE_FILE).is_file() == (reserve > 0)
        fill(disk)
        yield disk, store, archive
    finally:
        if archive is not None:
            archive.close()
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_without_a_reserve_deletion_fails_on_a_full_disk(tmp_path):
    """What the reserve is for: the same deletion as below, with reserve=0, cannot run."""
    with _full_disk(tmp_path, reserve=0) as (_, _, archive):
        with pytest.raises(sqlite3.OperationalError, match="full"):
            archive.delete([f"m{i:04d}" for i in range(0, 1500, 3)], "alice")
        assert archive.count("alice") == 1500


def test_deletion_works_on_a_full_disk(tmp_path):
    with _full_disk(tmp_path, reserve=8 << 20) as (disk, store, archive):
        with pytest.raises(sqlite3.OperationalError, match="full"):  # writing really fails now
            archive.upsert([memory_for("late", "alice", content="y" * 4000)], vector_for("late")[None])
        assert archive.delete([f"m{i:04d}" for i in range(0, 1500, 3)], "alice") == 500
        assert archive.delete_owner("alice") == 1000
        assert archive.count("alice") == 0 and archive.get(["m0001"], "alice") == []
        (disk / "filler").unlink()
        archive.close()  # with room again, the close's checkpoint finishes the scrub
        on_disk = b"".join(path.read_bytes() for path in store.rglob("*") if path.is_file())
        assert b"note 3 " not in on_disk and b"note 1499 " not in on_disk
        assert b"note" not in on_disk  # nor the words in the lexical index (merged by the close's scrub)
        with Archive(store, DIM) as reopened:
            assert reopened.count("alice") == 0 and reopened.owners() == []
            assert (store / RESERVE_FILE).is_file()  # put back once there was room
