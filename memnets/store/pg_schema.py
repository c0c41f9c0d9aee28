"""The PostgreSQL store's tables: their schema, format versions and migrations, and the HNSW index.

:class:`~memnets.store.postgres.PgVectorStore` calls :func:`open_schema` when it opens: it creates the
tables of a new store, or checks the format, dim and key of an existing one and migrates an older
format step by step (the builder's migrations and the steps here), all in one transaction under an advisory lock (one opener
at a time creates or migrates; the others wait, then find it done). A newer format is refused with a
clear error. A schema change is a new step: bump :data:`FORMAT_VERSION`, add its statements to the builder.
A store without a key has the lexemes of its current rows (:mod:`memnets.store.pg_search`), created
with it or by the format-6 upgrade.

Every statement is built by :class:`~memnets.store.queries_postgres.PgQueries` (the schema's too).
"""

from __future__ import annotations

import logging
import re

from memnets.store import rows as rowcodec
from memnets.store.crypto import RowCipher
from memnets.store.errors import StoreError, StoreFormatError, StoreNotFoundError
from memnets.store.pg_dialect import as_array
from memnets.store.queries_postgres import PgQueries
from memnets.timeutil import as_utc

log = logging.getLogger(__name__)

FORMAT_VERSION = 6  # in {table}_meta; bump with a migration (the builder's) when the schema changes


def check_extension(conn, q: PgQueries, where: str) -> None:
    """Create pgvector in the database if it is missing (StoreError when that is not allowed); warn when it is
    older than 0.8, which has no iterative index scans."""
    if conn.execute(*q.extension_version()).fetchone() is None:
        try:
            conn.execute(*q.create_extension())
        except Exception as error:  # psycopg.Error: this module does not import the driver
            raise StoreError(
                f"PgVectorStore: the pgvector extension is not installed in {where} "
                f"and could not be created ({error}); run {q.create_extension()[0]} as an owner of the database"
            ) from None
    version = conn.execute(*q.extension_version()).fetchone()[0]
    if tuple(int(p) for p in re.findall(r"\d+", version)[:2]) < (0, 8):
        log.warning(
            "pgvector %s has no iterative index scans (0.8+); filtered searches fall back to exact scans", version
        )


def open_schema(
    conn, q: PgQueries, dim: int | None, key, hnsw: dict, where: str
) -> tuple[int, RowCipher | None, str, bytes]:
    """Inside the caller's transaction: create the tables of a new store (``hnsw``: the index's m and
    ef_construction), or check format, dim and key of an existing one and migrate it. Returns (dim,
    cipher or None, store id, the key of the deletion ledger's tags)."""
    conn.execute(*q.lock("store"))
    if conn.execute(*q.meta_exists()).fetchone()[0] is None:
        if dim is None:
            raise StoreNotFoundError(f"PgVectorStore: {where} holds no memnets store yet; give dim to create one")
        for statement in q.schema(dim, **hnsw):
            conn.execute(*statement)
        cipher, key_meta = rowcodec.new_cipher(key)
        if cipher is None:
            _create_lexemes(conn, q)
        archive_id = rowcodec.new_store_id()
        secret, ledger_meta = rowcodec.ledger_secret({})
        meta = {"format": str(FORMAT_VERSION).encode(), "dim": str(dim).encode(), "archive_id": archive_id.encode()}
        with conn.cursor() as cursor:
            cursor.executemany(q.add_meta(), list({**meta, **key_meta, **ledger_meta}.items()))
        log.info("created memnets store %s (dim %d, encrypted %s)", where, dim, cipher is not None)
        return dim, cipher, archive_id, secret
    meta = {k: bytes(v) for k, v in conn.execute(*q.all_meta())}
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
        for statement in q.migration(step):
            conn.execute(*statement)
    if "archive_id" not in meta:  # format 1: give the store its id and bind every row to it
        meta["archive_id"] = _bind_rows(conn, q, cipher)
    secret, ledger_meta = rowcodec.ledger_secret(meta)
    for name, value in ledger_meta.items():
        conn.execute(q.add_meta(), (name, value))
    if stored_format < 3:
        _tag_ledger(conn, q, secret)
    if stored_format < 6 and cipher is None:
        _create_lexemes(conn, q)
    if stored_format != FORMAT_VERSION:
        conn.execute(*q.set_format(FORMAT_VERSION))
        log.info("migrated memnets store %s from format %d to %d", where, stored_format, FORMAT_VERSION)
    return stored_dim, cipher, meta["archive_id"].decode(), secret


def _create_lexemes(conn, q: PgQueries) -> None:
    """The lexemes column and its index (:mod:`memnets.store.pg_search`), computed for every row held."""
    for statement in q.lexical_schema():
        conn.execute(*statement)


def _tag_ledger(conn, q: PgQueries, secret: bytes) -> None:
    """Upgrade to format 3: the deletion ledger's owner names and ids become their keyed hashes."""
    if conn.execute(*q.deletions_exist()).fetchone()[0] is None:
        return
    for seq, owner, memory_id in conn.execute(*q.tombstones()).fetchall():
        tagged = rowcodec.ledger_row(secret, owner, memory_id, None)[:2]
        conn.execute(q.tag_tombstone(), (*tagged, seq))


def _bind_rows(conn, q: PgQueries, cipher: RowCipher | None) -> bytes:
    """Upgrade to format 2 inside the open's transaction: a new store id, and with a key every row
    re-sealed from the old associated data (no store id, no version) to the new one."""
    from pgvector.psycopg import register_vector  # the open's own connection reads vectors here

    archive_id = rowcodec.new_store_id().encode()
    conn.execute(q.add_meta(), ("archive_id", archive_id))
    if cipher is None:
        return archive_id
    register_vector(conn)
    for record in conn.execute(*q.all_records()).fetchall():  # migrated to the last format
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
        conn.execute(*q.set_payload(row["owner"], row["id"], sealed))
    return archive_id
