"""The PostgreSQL store's tables: their schema, format versions and migrations, and the HNSW index.

:class:`~memnets.store.postgres.PgVectorStore` calls :func:`open_schema` when it opens: it creates the
tables of a new store, or checks the format, dim and key of an existing one and migrates an older
format step by step (:data:`MIGRATIONS`), all in one transaction under an advisory lock (one opener
at a time creates or migrates; the others wait, then find it done). A newer format is refused with a
clear error. A schema change is a new step: bump :data:`FORMAT_VERSION`, add ``MIGRATIONS[old]``.
A store without a key has the lexemes of its current rows (:mod:`memnets.store.pg_lexical`), created
with it or by the format-6 upgrade.

Statements name tables and indexes by ``{memories}``, ``{meta}``, ... (the dialect's ``names``).
"""

from __future__ import annotations

import logging
import re

from memnets.store import pg_lexical
from memnets.store import rows as rowcodec
from memnets.store.crypto import RowCipher
from memnets.store.errors import StoreError, StoreFormatError, StoreNotFoundError
from memnets.store.pg_dialect import PgDialect, as_array
from memnets.store.queries_postgres import PgQueries
from memnets.timeutil import as_utc

log = logging.getLogger(__name__)

FORMAT_VERSION = 6  # in {table}_meta; bump with a migration in MIGRATIONS when the schema changes
# a re-embedding's new vectors (memnets.store.reembed), one per row at the version it was embedded from;
# they go with their row (ON DELETE CASCADE). The encoder that filled the store is the meta key "encoder".
_REEMBED = """CREATE TABLE IF NOT EXISTS {reembed} (
        owner text NOT NULL,
        id text NOT NULL,
        version integer NOT NULL,
        embedding vector NOT NULL,
        chunks bytea,
        PRIMARY KEY (owner, id),
        FOREIGN KEY (owner, id) REFERENCES {memories} (owner, id) ON DELETE CASCADE
    )"""
# format N -> statements taking it to N + 1
MIGRATIONS: dict[int, list[str]] = {
    1: ["ALTER TABLE {memories} ADD COLUMN version integer NOT NULL DEFAULT 1"],  # + _bind_rows (store id)
    2: [  # expiry (TTL); + _tag_ledger (the deletion ledger names owners and ids by keyed hashes)
        "ALTER TABLE {memories} ADD COLUMN expires_at timestamptz",
        "ALTER TABLE {memories} ADD COLUMN ttl double precision",
        "CREATE INDEX {expires} ON {memories} (owner, expires_at) WHERE expires_at IS NOT NULL",
    ],
    3: [_REEMBED],
    4: [  # long memories: the vectors of their further windows (memnets.store.chunks), also while re-embedding
        "ALTER TABLE {memories} ADD COLUMN chunks bytea",
        "ALTER TABLE {reembed} ADD COLUMN IF NOT EXISTS chunks bytea",
        "CREATE INDEX {chunked} ON {memories} (owner) WHERE chunks IS NOT NULL",
    ],
    5: [],  # + the lexemes of a store without a key (pg_lexical.SCHEMA), computed for the rows it holds
}
HNSW = """CREATE INDEX {hnsw} ON {memories} USING hnsw (embedding vector_ip_ops)
    WITH (m = {m}, ef_construction = {ef_construction}) WHERE superseded_by IS NULL"""
_SCHEMA = [
    """CREATE TABLE {meta} (key text PRIMARY KEY, value bytea NOT NULL)""",
    """CREATE TABLE {memories} (
        seq bigint GENERATED ALWAYS AS IDENTITY,   -- write order: history lists versions by it
        owner text NOT NULL,
        id text NOT NULL,
        t timestamptz NOT NULL,
        last_access timestamptz NOT NULL,
        importance double precision NOT NULL,
        kind text NOT NULL,
        superseded_by text,                        -- id of the newer version (NULL: current)
        version integer NOT NULL DEFAULT 1,        -- +1 on every write of the row, bound into the seal
        payload bytea NOT NULL,                    -- JSON of content and fields, AES-GCM sealed with a key
        embedding vector({dim}) NOT NULL,
        expires_at timestamptz,                    -- NULL: never expires (not sealed, like last_access)
        ttl double precision,                      -- seconds a refresh on read gives the row again
        chunks bytea,                              -- float32 [m, dim]: a long memory's further windows
        PRIMARY KEY (owner, id)
    )""",
    """CREATE INDEX {expires} ON {memories} (owner, expires_at) WHERE expires_at IS NOT NULL""",
    """CREATE INDEX {owner_t} ON {memories} (owner, t, id) WHERE superseded_by IS NULL""",
    """CREATE INDEX {owner_kind} ON {memories} (owner, kind) WHERE superseded_by IS NULL""",
    """CREATE INDEX {versions} ON {memories} (owner, superseded_by) WHERE superseded_by IS NOT NULL""",
    """CREATE INDEX {chunked} ON {memories} (owner) WHERE chunks IS NOT NULL""",
    HNSW,
    _REEMBED,
]


def check_extension(conn, where: str) -> None:
    """Create pgvector in the database if it is missing (StoreError when that is not allowed); warn when it is
    older than 0.8, which has no iterative index scans."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as error:  # psycopg.Error: this module does not import the driver
            raise StoreError(
                f"PgVectorStore: the pgvector extension is not installed in {where} "
                f"and could not be created ({error}); run CREATE EXTENSION vector as an owner"
            ) from None
    version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    if tuple(int(p) for p in re.findall(r"\d+", version)[:2]) < (0, 8):
        log.warning(
            "pgvector %s has no iterative index scans (0.8+); filtered searches fall back to exact scans", version
        )


def open_schema(
    conn, d: PgDialect, dim: int | None, key, hnsw: dict, where: str
) -> tuple[int, RowCipher | None, str, bytes]:
    """Inside the caller's transaction: create the tables of a new store (``hnsw``: the index's m and
    ef_construction), or check format, dim and key of an existing one and migrate it. Returns (dim,
    cipher or None, store id, the key of the deletion ledger's tags)."""
    conn.execute(*PgQueries(d).lock("store"))
    if conn.execute("SELECT to_regclass(%s)", (f"{d.table}_meta",)).fetchone()[0] is None:
        if dim is None:
            raise StoreNotFoundError(f"PgVectorStore: {where} holds no memnets store yet; give dim to create one")
        for statement in _SCHEMA:
            conn.execute(statement.format(**d.names, dim=int(dim), **hnsw))
        cipher, key_meta = rowcodec.new_cipher(key)
        if cipher is None:
            _create_lexemes(conn, d)
        archive_id = rowcodec.new_store_id()
        secret, ledger_meta = rowcodec.ledger_secret({})
        meta = {"format": str(FORMAT_VERSION).encode(), "dim": str(dim).encode(), "archive_id": archive_id.encode()}
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {d.meta} (key, value) VALUES (%s, %s)", list({**meta, **key_meta, **ledger_meta}.items())
            )
        log.info("created memnets store %s (dim %d, encrypted %s)", where, dim, cipher is not None)
        return dim, cipher, archive_id, secret
    meta = {k: bytes(v) for k, v in conn.execute(f"SELECT key, value FROM {d.meta}")}
    stored_format, stored_dim = int(meta["format"]), int(meta["dim"])
    if stored_format > FORMAT_VERSION:
        raise StoreFormatError(
            f"{where} was written by store format {stored_format}; this memnets reads format "
            f"{FORMAT_VERSION} and older. Upgrade memnets to open it (it was not modified)."
        )
    if dim is not None and dim != stored_dim:
        raise StoreFormatError(f"{where} holds vectors of dim {stored_dim}, but was opened with dim={dim}")
    cipher = rowcodec.existing_cipher(key, meta, where)
    for step in range(stored_format, FORMAT_VERSION):
        for statement in MIGRATIONS[step]:
            conn.execute(statement.format(**d.names))
    if "archive_id" not in meta:  # format 1: give the store its id and bind every row to it
        meta["archive_id"] = _bind_rows(conn, d, cipher)
    secret, ledger_meta = rowcodec.ledger_secret(meta)
    for name, value in ledger_meta.items():
        conn.execute(f"INSERT INTO {d.meta} (key, value) VALUES (%s, %s)", (name, value))
    if stored_format < 3:
        _tag_ledger(conn, d, secret)
    if stored_format < 6 and cipher is None:
        _create_lexemes(conn, d)
    if stored_format != FORMAT_VERSION:
        conn.execute(f"UPDATE {d.meta} SET value = %s WHERE key = 'format'", (str(FORMAT_VERSION).encode(),))
        log.info("migrated memnets store %s from format %d to %d", where, stored_format, FORMAT_VERSION)
    return stored_dim, cipher, meta["archive_id"].decode(), secret


def _create_lexemes(conn, d: PgDialect) -> None:
    """The lexemes column and its index (:mod:`memnets.store.pg_lexical`), computed for every row held."""
    for statement in pg_lexical.SCHEMA:
        conn.execute(statement.format(**d.names))


def _tag_ledger(conn, d: PgDialect, secret: bytes) -> None:
    """Upgrade to format 3: the deletion ledger's owner names and ids become their keyed hashes."""
    if conn.execute(*PgQueries(d).deletions_exist()).fetchone()[0] is None:
        return
    for seq, owner, memory_id in conn.execute(f"SELECT seq, owner, id FROM {d.deletions}").fetchall():
        tagged = rowcodec.ledger_row(secret, owner, memory_id, None)[:2]
        conn.execute(f"UPDATE {d.deletions} SET owner = %s, id = %s WHERE seq = %s", (*tagged, seq))


def _bind_rows(conn, d: PgDialect, cipher: RowCipher | None) -> bytes:
    """Upgrade to format 2 inside the open's transaction: a new store id, and with a key every row
    re-sealed from the old associated data (no store id, no version) to the new one."""
    from pgvector.psycopg import register_vector  # the open's own connection reads vectors here

    archive_id = rowcodec.new_store_id().encode()
    conn.execute(f"INSERT INTO {d.meta} (key, value) VALUES ('archive_id', %s)", (archive_id,))
    if cipher is None:
        return archive_id
    register_vector(conn)
    for record in conn.execute(f"SELECT {d.select()} FROM {d.memories}").fetchall():  # migrated to the last format
        row = rowcodec.named(record)
        fields = (
            row["owner"],
            row["id"],
            as_utc(row["t"]).isoformat(),
            row["kind"],
            row["importance"],
            as_array(row["vector"]).astype("<f4").tobytes(),
            row["superseded_by"],
        )
        what = f"memory {row['id']!r} of owner {row['owner']!r}"
        plaintext = cipher.open(
            bytes(row["payload"]), rowcodec.row_aad(*fields, store_id=None, version=None), what=what
        )
        sealed = cipher.seal(plaintext, rowcodec.row_aad(*fields, store_id=archive_id.decode(), version=row["version"]))
        conn.execute(
            f"UPDATE {d.memories} SET payload = %s WHERE owner = %s AND id = %s", (sealed, row["owner"], row["id"])
        )
    return archive_id
