"""Shared by the archive tests: the contract suite's deterministic memories and vectors, a child runner
that can import this folder, a single-threaded FAISS context, and real mounts (a tmpfs filled to its
last block) for the tests of a full disk.

Content and vector of a memory are pure functions of its id, so a parent can check what a killed
or concurrent child wrote without talking to it (see :mod:`memnets.store.testing`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

import faiss
import pytest

from memnets.store import testing
from memnets.store.testing import DIM, EPOCH, memory_for, vector_for, vectors_for

__all__ = [
    "DIM",
    "EPOCH",
    "drop_lexical",
    "fill",
    "memory_for",
    "mount",
    "relation_bytes",
    "single_threaded_faiss",
    "start_child",
    "vector_for",
    "vectors_for",
]


@contextmanager
def single_threaded_faiss():
    """Run FAISS on one OpenMP thread: on a loaded 2-core machine its thread pool turns a
    microsecond search of a tiny index into ~15 ms of waiting, which is all these tests would measure."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def drop_lexical(conn, table: str | None = None) -> None:
    """Take a store back to before its lexical index (archive format 6, PostgreSQL format 5): an archive's
    FTS table, its view and triggers (``table`` None, ``conn`` an sqlite3 connection), or the PostgreSQL
    store's lexemes column, index and function (``table``: its prefix, ``conn`` a psycopg connection)."""
    if table is None:
        for trigger in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER memories_fts_{trigger}")
        conn.execute("DROP TABLE memories_fts")
        conn.execute("DROP VIEW memories_text")
    else:
        conn.execute(f"DROP INDEX {table}_lexical")
        conn.execute(f"ALTER TABLE {table}_memories DROP COLUMN lexemes")
        conn.execute(f"DROP FUNCTION {table}_content")


def relation_bytes(url: str, table: str) -> bytes:
    """Every byte of a table's heap, TOAST and index files on the server's disk, after a checkpoint."""
    import glob

    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        data_dir = conn.execute("SHOW data_directory").fetchone()[0]
        relations = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relname LIKE %s "
            "OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE relname = %s)",
            (f"{table}%", f"{table}_memories"),
        ).fetchall()
    files = [f for (relative,) in relations if relative for f in glob.glob(os.path.join(data_dir, relative) + "*")]
    assert files, f"no relation files found for {table}"
    return b"".join(open(f, "rb").read() for f in files)


def start_child(code: str, *args: str, path: Iterable[str] = ()) -> subprocess.Popen:
    """:func:`memnets.store.testing.start_child` with this folder (``import archive_helpers``) and ``path``
    (a test's own folder, for a child that imports the test module) on the child's path."""
    return testing.start_child(code, *args, path=[os.path.dirname(__file__), *path])


def mount(*args: str) -> None:
    """``mount ARGS``; the calling test skips, with the reason, where it cannot (it needs root)."""
    result = subprocess.run(["mount", *args], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount here (needs root): {result.stderr.strip()}")


def fill(folder: Path) -> None:
    """Write a file into ``folder`` until the file system has no block left."""
    chunk = b"\0" * (64 << 10)
    with open(folder / "filler", "wb", buffering=0) as handle:
        with contextlib.suppress(OSError):
            while True:
                handle.write(chunk)
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 512)
    with pytest.raises(OSError) as raised, open(folder / "one-more", "wb", buffering=0) as handle:
        handle.write(b"\0" * 4096)
    assert raised.value.errno == errno.ENOSPC
