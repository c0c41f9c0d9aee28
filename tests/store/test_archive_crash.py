"""Durability: a child process ingesting memories is killed with SIGKILL at random points, many times.

The child acknowledges each write on stdout only after ``add``/``delete`` returned, and announces
each write before it starts. After every kill the test reopens the archive and checks:
every acknowledged memory is there, byte-exact (content and vector); every acknowledged deletion
stuck; the one write in flight is all there or all absent (a batch is never half written); nothing
else appeared; SQLite's integrity check passes; and the FAISS index agrees with the table (same
size, and an owner's exhaustive search returns exactly that owner's rows).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time

import numpy as np
import pytest
from archive_helpers import DIM, memory_for, single_threaded_faiss, start_child, vector_for

from memnets.store.archive import DB_FILE, Archive


@pytest.fixture(autouse=True)
def _one_faiss_thread():
    with single_threaded_faiss():
        yield


OWNERS = ("u0", "u1", "u2")

CHILD = r"""
import sys
import numpy as np
from archive_helpers import DIM, memory_for, vector_for
from memnets.store.archive import Archive

directory, start, key, batch, save_every = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None, int(sys.argv[4]), int(sys.argv[5])
owners = ("u0", "u1", "u2")
archive = Archive(directory, DIM, key=key)
print("open", archive.index_source, flush=True)
acked = []
step = start
while True:
    if acked and step % 7 == 0:  # now and then delete an earlier memory
        victim = acked.pop(step % len(acked))
        print("begin-delete", victim, flush=True)
        archive.delete([victim], owners[int(victim[1:]) % 3])
        print("ack-delete", victim, flush=True)
    ids = [f"c{j}" for j in range(step, step + batch)]
    memories = [memory_for(i, owners[int(i[1:]) % 3]) for i in ids]
    print("begin-add", *ids, flush=True)
    archive.upsert(memories, np.stack([vector_for(i) for i in ids]))
    print("ack-add", *ids, flush=True)
    acked += ids
    step += batch
    if save_every and (step // batch) % save_every == 0:
        archive.save_index()
"""


def owner_of(memory_id: str) -> str:
    return OWNERS[int(memory_id[1:]) % 3]


def run_trials(directory, trials: int, seed: int) -> dict:
    """Kill the ingesting child ``trials`` times, checking the archive after each; returns counts."""
    rng = random.Random(seed)
    key = "trial passphrase" if seed % 2 else ""
    alive: set[str] = set()  # acknowledged adds minus acknowledged deletes: must all be there
    stats = {
        "trials": 0,
        "acked_writes": 0,
        "in_flight_add_landed": 0,
        "in_flight_add_absent": 0,
        "in_flight_delete": 0,
        "killed_between_writes": 0,
        "reopen_loaded": 0,
        "reopen_rebuilt": 0,
    }
    next_id = 0
    for trial in range(trials):
        batch = rng.choice([1, 1, 3, 8])
        child = start_child(CHILD, str(directory), str(next_id), key, str(batch), str(rng.choice([0, 2, 5])))
        kill_after, acks, in_flight = rng.randint(1, 25), 0, None

        def read(line: str) -> None:
            nonlocal in_flight, acks
            assert line.endswith("\n"), f"torn line from the killed child: {line!r}"
            word, *ids = line.split()
            if word.startswith("begin"):
                in_flight = (word, ids)
                return
            in_flight = None
            acks += 1
            stats["acked_writes"] += 1
            if word == "ack-add":
                alive.update(ids)  # noqa: B023 (read runs within the iteration that binds alive)
            else:
                alive.discard(ids[0])  # noqa: B023

        try:
            assert child.stdout.readline().startswith("open"), child.stderr.read()
            for line in child.stdout:
                read(line)
                if acks >= kill_after:
                    time.sleep(rng.random() * 0.01)  # the kill lands anywhere in the writes that follow
                    break
            else:
                pytest.fail(f"child exited on its own: {child.stderr.read()}")
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        for line in child.stdout:  # what it printed before dying: the acks and the write in flight
            read(line)
        child.stdout.close()
        child.stderr.close()

        with Archive(directory, DIM, key=key or None) as archive:
            stats["reopen_" + archive.index_source] += 1
            present = {m.id for owner in OWNERS for m in archive.list_memories(owner)}
            maybe_gone = maybe_new = set()
            if in_flight is None:
                stats["killed_between_writes"] += 1
            elif in_flight[0] == "begin-add":
                maybe_new = set(in_flight[1])
                landed = maybe_new <= present
                assert landed or maybe_new.isdisjoint(present), f"trial {trial}: batch {in_flight[1]} half written"
                stats["in_flight_add_landed" if landed else "in_flight_add_absent"] += 1
            else:
                maybe_gone = set(in_flight[1])
                stats["in_flight_delete"] += 1
            assert not (alive - maybe_gone) - present, (
                f"trial {trial}: lost acknowledged {(alive - maybe_gone) - present}"
            )
            assert not present - alive - maybe_new, f"trial {trial}: unexpected {present - alive - maybe_new}"
            for owner in OWNERS:  # what is there is byte-exact, and the index agrees with the table
                mine = archive.list_memories(owner)
                assert all(m == memory_for(m.id, owner) for m in mine)
                if mine:
                    np.testing.assert_array_equal(
                        archive.vectors([m.id for m in mine], owner), np.stack([vector_for(m.id) for m in mine])
                    )
                    hits = archive.search(vector_for(mine[0].id), 10_000, owner)
                    assert sorted(h.id for h, _ in hits) == sorted(m.id for m in mine)
            assert archive.index_size() == len(present)
        alive = present
        next_id = max([next_id, *(int(i[1:]) + 1 for i in present | maybe_new)])
        db = sqlite3.connect(directory / DB_FILE)
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        db.close()
        stats["trials"] += 1
    stats["memories_at_end"] = len(alive)
    return stats


@pytest.mark.parametrize("seed", [0, 1])
def test_sigkill_mid_ingest_loses_nothing_acknowledged(tmp_path, seed):
    stats = run_trials(tmp_path, trials=6, seed=seed)
    print(f"\ncrash trials (seed {seed}): {stats}")
    assert stats["trials"] == 6 and stats["acked_writes"] >= 6


@pytest.mark.slow
@pytest.mark.parametrize("seed", [10, 11])
def test_sigkill_mid_ingest_many_trials(tmp_path, seed):
    stats = run_trials(tmp_path, trials=60, seed=seed)
    print(f"\ncrash trials (seed {seed}): {stats}")
    assert stats["trials"] == 60
