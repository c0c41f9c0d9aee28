"""The PostgreSQL store seals rows like the archive: a rolled-back or transplanted row fails, naming it.

Runs on the real PostgreSQL that the ``pg_url`` fixture starts (skipped with the reason when it
cannot); each test uses its own table prefix.
"""

from __future__ import annotations

import uuid

import pytest
from archive_helpers import DIM, memory_for, vectors_for

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
    from memnets.store.postgres import PgVectorStore
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
        conn.execute(f"DELETE FROM {table}_meta WHERE key IN ('archive_id', 'ledger_secret')")
        conn.execute(f"UPDATE {table}_meta SET value = %s WHERE key = 'format'", (b"1",))
    with PgVectorStore(pg_url, None, key=key, table=table, pool_size=1) as upgraded:
        assert [m.id for m in upgraded.list_memories("alice")] == ["m0", "m1", "m2"]
        assert upgraded.archive_id != meta["archive_id"].decode()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute(f"SELECT value FROM {table}_meta WHERE key = 'format'").fetchone()[0] == b"3"
