"""Concurrency: threads and processes writing and reading one archive lose nothing and read consistently.

Each writer adds memories one at a time to a shared owner (and its own), searches for what it just
wrote (read-your-writes through the FAISS index), and deletes some of its earlier memories. Readers
meanwhile check that every row they see is whole. At the end every writer's surviving memories,
and no deleted one, are in the table and in every instance's index.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

import numpy as np
import pytest
from archive_helpers import DIM, memory_for, single_threaded_faiss, start_child, vector_for

from memnets.store.archive import Archive


@pytest.fixture(autouse=True)
def _one_faiss_thread():
    with single_threaded_faiss():
        yield


N_PER_WRITER = 40


def writer_ids(tag: str, n: int = N_PER_WRITER) -> tuple[set[str], set[str]]:
    """(surviving ids, deleted ids) of a writer: every fifth step deletes the memory of two steps before."""
    deleted = {f"{tag}-{i - 2}" for i in range(n) if i % 5 == 4}
    return {f"{tag}-{i}" for i in range(n)} - deleted, deleted


def write(archive: Archive, tag: str, ops: Counter, n: int = N_PER_WRITER) -> None:
    """One writer's work; asserts read-your-writes after every add."""
    for i in range(n):
        memory_id = f"{tag}-{i}"
        archive.upsert(
            [memory_for(memory_id, "shared"), memory_for(memory_id, tag)], np.stack([vector_for(memory_id)] * 2)
        )
        ops["add"] += 2
        hit, score = archive.search(vector_for(memory_id), 1, "shared")[0]
        assert hit.id == memory_id and score == pytest.approx(1.0, abs=1e-5)
        assert archive.get([memory_id], tag) == [memory_for(memory_id, tag)]
        ops["search"] += 1
        ops["get"] += 1
        if i % 5 == 4:
            assert archive.delete([f"{tag}-{i - 2}"], "shared") == 1
            assert archive.delete([f"{tag}-{i - 2}"], tag) == 1
            ops["delete"] += 2


CHILD = r"""
import sys
from collections import Counter
import time
from archive_helpers import DIM, vector_for
from test_archive_concurrency import write, writer_ids
from memnets.store.archive import Archive

directory, tag, other = sys.argv[1:4]
ops = Counter()
with Archive(directory, DIM) as archive:
    write(archive, tag, ops)
    expected = writer_ids(tag)[0] | writer_ids(other)[0]
    deadline = time.time() + 120
    while {m.id for m in archive.list_memories("shared")} != expected:  # wait for the other process to finish
        assert time.time() < deadline, "the other writer never finished"
        ops["list"] += 1
        time.sleep(0.05)
    for memory_id in sorted(writer_ids(other)[0]):  # the other process's writes are in OUR index
        assert archive.search(vector_for(memory_id), 1, "shared")[0][0].id == memory_id
        ops["search"] += 1
    for memory_id in sorted(writer_ids(other)[1]):  # and its deletions are gone from it
        assert memory_id not in {m.id for m, _ in archive.search(vector_for(memory_id), 3, "shared")}
        ops["search"] += 1
print("ok", sum(ops.values()), flush=True)
"""


def check_final(directory, tags) -> None:
    with Archive(directory, DIM) as archive:
        survivors = set().union(*(writer_ids(t)[0] for t in tags))
        assert {m.id for m in archive.list_memories("shared")} == survivors
        for tag in tags:
            assert {m.id for m in archive.list_memories(tag)} == writer_ids(tag)[0]
        assert archive.index_size() == 2 * len(survivors)
        assert all(m == memory_for(m.id, "shared") for m in archive.list_memories("shared"))


def test_threads_sharing_and_not_sharing_an_instance(tmp_path):
    tags = ["t0", "t1", "t2", "t3"]
    shared = Archive(tmp_path, DIM)
    own = [Archive(tmp_path, DIM) for _ in range(2)]  # separate connections in the same process
    instances = [shared, shared, own[0], own[1]]
    ops: Counter = Counter()
    errors: list[BaseException] = []
    done = threading.Event()

    def guarded(fn, *args):
        try:
            fn(*args)
        except BaseException as error:  # surfaced below; a thread cannot fail the test itself
            errors.append(error)

    def read(archive: Archive) -> None:
        seen = 0
        while not done.is_set():
            memories = archive.list_memories("shared")
            assert all(m == memory_for(m.id, "shared") for m in memories)  # never a torn row
            for memory, _ in archive.search(vector_for("t0-0"), 5, "shared"):
                assert memory == memory_for(memory.id, "shared")
            seen = max(seen, len(memories))
            ops["list"] += 1
            ops["search"] += 1

    threads = [threading.Thread(target=guarded, args=(write, a, t, ops)) for a, t in zip(instances, tags)]
    readers = [threading.Thread(target=guarded, args=(read, a)) for a in (shared, own[0])]
    for thread in threads + readers:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    done.set()
    for thread in readers:
        thread.join(timeout=30)
    assert not errors, errors[0]
    for archive in instances:  # every instance's index caught up with every writer
        assert archive.index_size() == 2 * sum(len(writer_ids(t)[0]) for t in tags)
        for memory_id in sorted(set().union(*(writer_ids(t)[0] for t in tags)))[::7]:
            assert archive.search(vector_for(memory_id), 1, "shared")[0][0].id == memory_id
    for archive in (shared, *own):
        archive.close()
    check_final(tmp_path, tags)
    print(f"\nthread operations: {sum(ops.values())} {dict(ops)}")


def test_two_processes_writing_and_reading(tmp_path):
    # both children race to create the archive, too
    here = [os.path.dirname(__file__)]  # the children import this module
    children = [start_child(CHILD, str(tmp_path), t, o, path=here) for t, o in (("pA", "pB"), ("pB", "pA"))]
    finished = [child.communicate(timeout=240) for child in children]
    # every child's error, not only the first's: one waits for the other, so the other's is the cause
    assert [child.returncode for child in children] == [0, 0], "\n".join(err for _, err in finished)
    outputs = [out for out, _ in finished]
    total = sum(int(out.split()[1]) for out in outputs)
    check_final(tmp_path, ["pA", "pB"])
    print(f"\nprocess operations: {total}")
