"""Shared by the archive tests: deterministic memories and vectors, and a child-process runner.

Content and vector of a memory are pure functions of its id, so a parent can check what a killed
or concurrent child wrote without talking to it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from contextlib import contextmanager
from datetime import datetime, timedelta

import faiss
import numpy as np

from memnets.records import Memory

DIM = 16
EPOCH = datetime(2024, 1, 1)


def vector_for(memory_id: str, dim: int = DIM) -> np.ndarray:
    """A unit float32 vector determined by the id (distinct ids give distinct vectors)."""
    seed = int.from_bytes(hashlib.sha256(memory_id.encode("utf-8", "surrogatepass")).digest()[:8], "little")
    vector = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def memory_for(memory_id: str, owner: str, minutes: int = 0, **fields) -> Memory:
    """A memory whose content names its id and owner (so a leak is visible in the text)."""
    fields.setdefault("content", f"[{owner}] memory {memory_id}: the user said something worth keeping")
    return Memory(id=memory_id, owner=owner, t=EPOCH + timedelta(minutes=minutes), **fields)


def vectors_for(memories) -> np.ndarray:
    return np.stack([vector_for(m.id) for m in memories]) if memories else np.zeros((0, DIM), np.float32)


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
    """Run ``code`` in a fresh Python (argv[1:] = args), stdout line-buffered back to the test.

    Each ``print(..., flush=True)`` of the child reaches the pipe in one write, so a child killed
    mid-print leaves no torn line. That holds only with buffered stdout: PYTHONUNBUFFERED (set in
    many containers, CI's included) makes print write its pieces one by one, and a kill between
    them left "begin-add c296 c2" for the batch c296 c297.
    """
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]),
    )
    env.pop("PYTHONUNBUFFERED", None)
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        env=env,
    )
