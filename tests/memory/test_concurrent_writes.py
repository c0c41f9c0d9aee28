"""Writes are serialised per user only (issue 53): two users' writes never wait for each other; one user's
concurrent writes still queue, losing no version and numbering none twice (the store numbers them).

A write is held inside its transaction by a supersession judge that waits on an event (a judge is a plug-in
of the write path, run in the write's transaction); threads and events, not timings, show who waited.
"""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest

import memnets

EXACT = 0.9999  # the tiny random encoder puts every text near every other: merge identical texts only
HOLD = "[held]"  # a text with this is held in its write's transaction until the test releases it
WAIT_S = 30  # a bound on every wait, so that a failure ends the test instead of hanging it


class HoldingJudge:
    """A supersession judge that ends nothing; judging a newer text with :data:`HOLD`, it says so
    (``judging``) and waits for ``release``: that write holds its user's write lock meanwhile."""

    threshold = 0.5

    def __init__(self):
        self.judging, self.release = threading.Event(), threading.Event()

    def score(self, older: str, newer: str) -> float:
        if HOLD in newer:
            self.judging.set()
            assert self.release.wait(WAIT_S), "the test never released the held write"
        return 0.0


def in_thread(call, *args, **kwargs) -> tuple[threading.Thread, list]:
    """``call`` started in a thread; the list gets its result (or the exception it raised)."""
    out: list = []

    def run():
        try:
            out.append(call(*args, **kwargs))
        except BaseException as error:  # handed to the test, which asserts on it
            out.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def awaited_advisory_locks(url: str) -> int:
    """How many advisory locks sessions of the server wait for (not granted)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[0]


def test_two_users_writes_do_not_wait_for_each_other_and_one_users_do(pg_url, encoder):
    judge = HoldingJudge()
    table = "t" + uuid.uuid4().hex[:16]
    # scrub="vacuum": a deletion's default scrub rewrites the table (VACUUM FULL), which waits for every open
    # transaction on it, another user's too (docs/security.md): that is the scrub's wait, not a write lock's
    options = dict(table=table, duplicate_threshold=EXACT, supersession=judge, scrub="vacuum")
    memory = memnets.open(pg_url, encoder=encoder, **options)
    try:
        memory.add("ann lives in Paris", user="ann")  # the candidate that ann's held write is judged against
        held, held_out = in_thread(memory.add, f"ann moved to Berlin {HOLD}", user="ann")
        assert judge.judging.wait(WAIT_S)  # ann's write is inside its transaction, holding ann's lock

        # bob's writes go through while ann's is held: add, update, delete
        bob = memory.add("bob has a cat named Tom", user="bob")
        assert (
            bob.outcome == "added" and memory.update(bob.id, "bob has a cat named Tim", user="bob").outcome == "updated"
        )
        assert memory.delete(bob.id, user="bob") and memory.get(bob.id, user="bob") is None
        assert held.is_alive() and not held_out  # ann's write is still held: bob's did not wait for it

        # a write of ann's through another handle on the store (another process's, say) waits for ann's lock in
        # the store: its session is seen waiting for an advisory lock in pg_locks
        other = memnets.open(pg_url, encoder=encoder, table=table, duplicate_threshold=EXACT)
        queued, queued_out = in_thread(other.add, "ann has a dog named Rex", user="ann")
        deadline = time.monotonic() + WAIT_S
        while awaited_advisory_locks(pg_url) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert awaited_advisory_locks(pg_url) == 1 and queued.is_alive() and not queued_out

        judge.release.set()
        held.join(WAIT_S)
        queued.join(WAIT_S)
        other.close()
        assert [m.outcome for m in held_out + queued_out] == ["added", "added"]
        assert sorted(m.content for m in memory.list_memories(user="ann")) == [
            "ann has a dog named Rex",
            "ann lives in Paris",
            f"ann moved to Berlin {HOLD}",
        ]
    finally:
        judge.release.set()
        memory.close()
    with pytest.raises(RuntimeError, match="closed"):
        memory.add("after close", user="ann")


THREADS, UPDATES = 6, 5


def test_one_users_concurrent_writes_keep_every_version_numbered_once(location, encoder):
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, **options) as memory:
        first = memory.add("version zero", user="ann")
        barrier = threading.Barrier(THREADS)

        def update(n: int) -> list[str]:
            barrier.wait(WAIT_S)
            return [memory.update(first.id, f"writer {n} version {i}", user="ann").outcome for i in range(UPDATES)]

        def add_same(n: int):
            barrier.wait(WAIT_S)
            return memory.add("the same sentence from every thread", user="ann").outcome

        writers = [in_thread(update, n) for n in range(THREADS)]
        for thread, _ in writers:
            thread.join(120)
        assert [out for _, out in writers] == [[["updated"] * UPDATES]] * THREADS

        history = memory.history(first.id, user="ann")
        total = THREADS * UPDATES
        assert [m.id for m in history[:-1]] == [f"{first.id}~{n}" for n in range(1, total + 1)]  # none lost, none twice
        contents = [m.content for m in history]
        assert len(set(contents)) == total + 1 and contents[0] == "version zero"
        for n in range(THREADS):  # each writer's versions in the order it wrote them
            assert [c for c in contents if c.startswith(f"writer {n} ")] == [
                f"writer {n} version {i}" for i in range(UPDATES)
            ]

        adders = [in_thread(add_same, n) for n in range(THREADS)]
        for thread, _ in adders:
            thread.join(120)
        assert sorted(out[0] for _, out in adders) == ["added"] + ["unchanged"] * (THREADS - 1)  # one check-and-write
        assert memory.store.count("ann") == 2
