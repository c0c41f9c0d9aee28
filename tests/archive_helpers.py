"""Shared by the archive tests: the contract suite's deterministic memories and vectors, a child runner
that can import this folder, and a single-threaded FAISS context.

Content and vector of a memory are pure functions of its id, so a parent can check what a killed
or concurrent child wrote without talking to it (see :mod:`memnets.store.testing`).
"""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager

import faiss

from memnets.store import testing
from memnets.store.testing import DIM, EPOCH, memory_for, vector_for, vectors_for

__all__ = ["DIM", "EPOCH", "memory_for", "single_threaded_faiss", "start_child", "vector_for", "vectors_for"]


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
