"""Every log line of ``memnets serve http`` names a request by its route template, never by its path:
the door guard's refusals (421, 403) and its contained failures (a 500 for an exception the app does
not take), the app's 500 line and its 503 "store unavailable" warning. The app is the one the server
runs (:func:`memnets.server.run.build_app`: the guard in front), served in process so that caplog
sees every record of every logger.

Before: those lines logged the raw path, so ``/v1/users/{user}/...`` and ``/v1/memories/{id}`` put
user names and memory ids in the log that the access log keeps them out of (an erasure cannot
reach a log)."""

from __future__ import annotations

import logging
import uuid
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from panic_helpers import PANIC_TEXT

from memnets.server.run import ServerConfig, build_app
from memnets.server.testing import wait_until_ready

SECRET_USER = "user-" + uuid.uuid4().hex  # a user name no log line may hold
SECRET_ID = "id-" + uuid.uuid4().hex  # a memory id no log line may hold


@contextmanager
def served(location: str, encoder_dir, **options):
    """A TestClient of the server's app (the door guard in front) over ``location``, reached as 127.0.0.1,
    with one memory of SECRET_USER, id SECRET_ID."""
    from starlette.testclient import TestClient

    config = ServerConfig(location=location, encoder=str(encoder_dir), options=options)
    with TestClient(build_app(config), base_url="http://127.0.0.1:8000") as client:
        wait_until_ready(client)
        added = client.post("/v1/memories", json={"user": SECRET_USER, "text": "hello world", "id": SECRET_ID})
        assert added.status_code == 200, added.text
        yield client


def server_log(caplog) -> str:
    """Every record the server's side logged, formatted with its traceback: all but the test's HTTP
    client's own (httpx logs each URL it requests)."""
    return "\n".join(caplog.handler.format(r) for r in caplog.records if not r.name.startswith("httpx"))


def assert_no_secrets(log: str) -> None:
    """No line (message or traceback) holds the user name or the memory id the requests named."""
    for secret in (SECRET_USER, SECRET_ID):
        assert secret not in log


def test_the_guards_refusals_and_failures_and_the_apps_500_name_the_route(tmp_path, panicking_encoder_dir, caplog):
    caplog.set_level(logging.DEBUG)
    memory = f"/v1/memories/{SECRET_ID}"
    manager = f"/v1/users/{SECRET_USER}/manager"
    with served(str(tmp_path / "memory"), panicking_encoder_dir) as client:
        misdirected = client.get(memory, params={"user": SECRET_USER}, headers={"Host": "evil.example"})
        assert misdirected.status_code == 421
        assert client.get(manager, headers={"Origin": "http://evil.example"}).status_code == 403
        panicked = client.post(f"/v1/users/{SECRET_USER}/observe", json={"text": PANIC_TEXT})
        assert panicked.status_code == 500  # a BaseException: contained by the guard
        client.app.app.state.memnets.memory.close()  # every later call of the memory fails
        assert client.get(manager).json()["error"]["code"] == "internal"  # answered by the app
    log = server_log(caplog)
    for line in ("refused http unmatched: misdirected", "refused http unmatched: forbidden"):
        assert line in log
    assert "http /v1/users/{user}/observe failed" in log and "GET /v1/users/{user}/manager failed" in log
    assert_no_secrets(log)


@contextmanager
def own_database(pg_url: str):
    """A database of its own on the test PostgreSQL server (with pgvector), its URL, and an admin
    connection to the server; dropped at the end."""
    import psycopg

    name = "memnets_logs_" + uuid.uuid4().hex[:8]
    url = urlunsplit(urlsplit(pg_url)._replace(path="/" + name))
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            yield name, url, admin
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_store_outage_is_logged_by_route(pg_url, tiny_model_dir, caplog):
    """A real outage: the server's database stops taking connections and ends the ones it has."""
    caplog.set_level(logging.DEBUG)
    with own_database(pg_url) as (name, url, admin), served(url, tiny_model_dir, connect_timeout=1) as client:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])
        answer = client.get(f"/v1/memories/{SECRET_ID}", params={"user": SECRET_USER})
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "unavailable", answer.text
    log = server_log(caplog)
    assert "GET /v1/memories/{id:path}: the store is unavailable" in log
    assert_no_secrets(log)


def test_the_server_process_prints_no_warning_as_it_loads_and_encodes(tmp_path, tiny_model_dir):
    """`memnets serve http` printed transformers' FutureWarning (`is_gradient_checkpointing` is deprecated) and
    its "`loss_type=None` was set in the config" notice as it started: torch.jit.trace, tracing the encoder for
    serving, reads every attribute of the backbone. Its output now holds neither, nor any other warning."""
    import httpx

    from memnets.server.testing import ServerProcess

    with ServerProcess(tmp_path / "memory", "--encoder", str(tiny_model_dir)) as process:
        process.wait_ready()
        added = httpx.post(f"{process.url}/v1/memories", json={"user": "ann", "text": "hello"}, timeout=60)
        assert added.status_code == 200, added.text
        output = process.output()
    assert "Application startup complete" in output
    noisy = [line for line in output.splitlines() if "warn" in line.lower() or "loss_type" in line]
    assert noisy == [], output
