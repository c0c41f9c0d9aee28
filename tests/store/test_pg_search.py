"""The PostgreSQL store's search in one round trip (memnets.store.pg_search), on a real server.

What the client sends is read from libpq's own protocol trace of the pooled connection: a round trip
is a message the client then waits on (a Sync closing a pipeline or an extended-protocol statement, or
a simple Query). The answers are compared with the same search run statement by statement (a filter
that every memory passes takes that path)."""

from __future__ import annotations

import tempfile
import time
import uuid

import numpy as np
import pytest
from archive_helpers import DIM, memory_for, vector_for, vectors_for

from memnets.store import open_store
from memnets.store.identity import META_KEY, EncoderIdentity, EncoderMismatchError
from memnets.store.testing import hit_ids

psycopg = pytest.importorskip("psycopg")

IDENTITY = EncoderIdentity("test-encoder:8", DIM, "tests")


@pytest.fixture
def store(pg_url):
    """A store of one pooled connection (so the test can trace the one a search uses), 40 memories of "a"."""
    with open_store(pg_url, DIM, table="t" + uuid.uuid4().hex[:16], pool_size=1) as store:
        memories = [memory_for(f"m{i}", "a", minutes=i) for i in range(40)]
        store.upsert(memories, vectors_for(memories))
        store.bind_encoder(IDENTITY)
        yield store


def round_trips(store, call) -> tuple[int, object]:
    """(the messages the client waited on during ``call()`` on the store's pooled connection, its result)."""
    with tempfile.TemporaryFile() as trace:
        with store._pool.connection() as conn:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
        try:
            result = call()
        finally:
            with store._pool.connection() as conn:
                conn.pgconn.untrace()
        trace.seek(0)
        sent = [line.split("\t") for line in trace.read().decode().splitlines()]
    return sum(1 for line in sent if line[0] == "F" and line[2].strip() in ("Sync", "Query")), result


def test_an_unfiltered_search_is_one_round_trip_with_the_stepwise_answer(store):
    query = vector_for("probe")
    waits, hits = round_trips(store, lambda: store.search_with_vectors(query, 10, "a"))
    assert waits == 1  # was 10: the pool's ping, BEGIN, LOCK, check, settings, ranking, windows, check, COMMIT
    stepwise, vectors = store.search_with_vectors(query, 10, "a", filters={"kind": "observation"})
    assert hit_ids(hits[0]) == hit_ids(stepwise)
    assert [s for _, s in hits[0]] == pytest.approx([s for _, s in stepwise], abs=1e-6)
    assert np.array_equal(hits[1], vectors)  # the vectors came back in binary, as stored
    assert hits[1].dtype == np.float32


def test_fewer_rows_than_k_and_an_entering_window_are_still_answered_exactly(store):
    """The two answers the one round trip cannot give alone: the exact scan and a long memory's window."""
    assert len(store.search(vector_for("probe"), 50, "a")) == 40
    long_one = memory_for("long", "a")
    window = vector_for("probe")  # its further window is the query itself: it must rank first
    store.upsert([long_one], vectors_for([long_one]), chunks=[window[None, :]])
    hits = store.search(vector_for("probe"), 5, "a")
    assert hit_ids(hits)[0] == "long" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert hit_ids(hits) == hit_ids(store.search(vector_for("probe"), 5, "a", filters={"kind": "observation"}))


def test_a_search_after_a_swap_to_another_encoder_is_refused(store, pg_url):
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute(*store._q.set_meta(META_KEY, EncoderIdentity("another:8", DIM, "elsewhere").to_json()))
    with pytest.raises(EncoderMismatchError):
        store.search(vector_for("probe"), 5, "a")


def test_a_failed_search_leaves_its_connection_as_the_pool_lent_it(store, pg_url):
    memories, away = store._dialect.memories, f'"{store.table}_away"'
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute(f"ALTER TABLE {memories} RENAME TO {away}")
        with pytest.raises(psycopg.errors.UndefinedTable):
            store.search(vector_for("probe"), 5, "a")
        other.execute(f"ALTER TABLE {away} RENAME TO {memories}")
    with store._pool.connection() as conn:
        assert not conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert len(store.search(vector_for("probe"), 5, "a")) == 5


def test_a_connection_the_server_ended_is_replaced_not_used(store, pg_url):
    """The pool's check pings only a connection with something waiting on it: a server that ended the
    connection (as a restart does) left its goodbye there, so the search gets a fresh one."""
    with store._pool.connection() as conn:
        pid = conn.info.backend_pid
    with psycopg.connect(pg_url, autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]
    time.sleep(0.2)  # the FATAL message and the close reach the client's socket
    assert len(store.search(vector_for("probe"), 5, "a")) == 5
    with store._pool.connection() as conn:
        assert conn.info.backend_pid != pid
