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
from contextlib import contextmanager
from pathlib import Path

import faiss
import pytest

from memnets.store import testing
from memnets.store.testing import DIM, EPOCH, memory_for, vector_for, vectors_for

__all__ = [
    "DIM",
    "EPOCH",
    "fill",
    "memory_for",
    "mount",
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


def start_child(code: str, *args: str) -> subprocess.Popen:
    """:func:`memnets.store.testing.start_child` with this folder on the child's path (``import archive_helpers``)."""
    return testing.start_child(code, *args, path=[os.path.dirname(__file__)])


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
