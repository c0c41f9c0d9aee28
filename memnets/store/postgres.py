"""The memory store on PostgreSQL + pgvector, for deployments that outgrow one machine.

Picked by ``memnets.open("postgresql://...")`` / :func:`memnets.store.open_store`; needs the
``pgvector`` extra (psycopg 3, psycopg-pool, pgvector) and a server with the ``vector``
extension (pgvector >= 0.8 for iterative index scans).

Layout (``{table}`` defaults to ``memnets``):

- ``{table}_memories``: one row per memory *and* its vector, so a write and a delete are each one
  transaction and nothing can be left half-deleted between a record store and a vector store.
  Primary key (owner, id); clear columns owner, id, t, last_access, importance, kind,
  superseded_by, version (+1 on every write of the row); ``payload`` is the JSON of content and
  structured fields, sealed with AES-GCM when the store has a key, exactly as the embedded archive
  does it (:mod:`memnets.store.rows`: the seal binds the clear fields, the store's random id and
  the row's version); ``embedding`` is ``vector(dim)``.
- An HNSW index (``vector_ip_ops``: inner product on unit vectors) over current rows only
  (``WHERE superseded_by IS NULL``), a btree on (owner, t, id) for listings and owner scans and one
  on (owner, superseded_by) for history.
- ``{table}_meta``: format version, dim, the store's random id, the key check, KDF salt and parameters. Opening checks the format:
  an older one is migrated in the opening transaction, a newer one is refused with a clear error.

Search, always owner-scoped and filtered before ranking:

- No filter, or one on clear columns only (kind, time range): one SQL query ranks the matching
  rows by ``embedding <#> query``. The planner either walks the HNSW index with
  ``hnsw.iterative_scan = relaxed_order`` (the scan continues past ``ef_search`` candidates until
  k rows pass the WHERE clause; results are re-sorted exactly) or, for a small owner, reads the
  owner's rows by the btree and sorts them exactly. With a kind/time filter the store first counts
  the matching rows (bounded at ``EXACT_BELOW`` + 1) and ranks them exactly when at most
  ``EXACT_BELOW`` match: the iterative scan loses recall under selective filters. If the index scan still
  returns fewer than k rows (it stops after ``hnsw.max_scan_tuples``), the query is re-run as an
  exact scan, so k results come back whenever k rows match.
- A metadata filter: metadata lives in the (possibly encrypted) payload, so the server cannot
  evaluate it. The rows passing the clear-column part are ranked exactly in SQL and streamed
  best first through a server-side cursor; each is decrypted and checked with
  :meth:`MemoryFilter.matches` until k match. The cost grows with the rows ranked ahead of the k-th
  match, never with a shortened result.

Deletion: a DELETE is final for every connection once it commits (MVCC: no reader after the commit
sees the row, no index returns it). The bytes stay in dead tuples until (auto)vacuum reclaims them;
:meth:`PgVectorStore.compact` runs VACUUM on the table at once.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Self

import numpy as np

import memnets.timeutil as timeutil
from memnets.records import Memory
from memnets.store import rows as rowcodec
from memnets.store.chunks import best_scores, check_chunks, from_blob, merge, to_blob
from memnets.store.crypto import RowCipher
from memnets.store.errors import StoreError, StoreFormatError, StoreUnavailableError
from memnets.store.filters import MemoryFilter
from memnets.store.identity import META_KEY, TARGET_KEY, EncoderIdentity, check_identity
from memnets.store.reembed import ReembedBatch
from memnets.timeutil import as_utc

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"the PostgreSQL store needs the pgvector extra: pip install 'memnets[pgvector]' (missing: {error.name})"
    ) from None

log = logging.getLogger(__name__)

FORMAT_VERSION = 5  # in {table}_meta; bump with a migration in _MIGRATIONS when the schema changes
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
# format N -> statements taking it to N + 1 (table names substituted as in _SCHEMA)
_MIGRATIONS: dict[int, list[str]] = {
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
}
_SCRUBS = ("full", "vacuum", "off")  # PgVectorStore(scrub=...): the upkeep after a deletion
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,40}")
_COLUMNS = (
    "owner, id, t, last_access, importance, kind, superseded_by, payload, embedding, version, expires_at, ttl, chunks"
)
_CURRENT = "superseded_by IS NULL"
_LIVE = "(expires_at IS NULL OR expires_at > %s)"  # not expired at the time bound to the "%s"
# A search with a kind/time filter ranks the matching rows exactly when at most this many match
# (counted with a bounded index scan first). Measured (docs/scaling.md): at 1M memories a kind
# filter matching 10,000 rows had recall@10 0.48 through the HNSW iterative scan. 20,000 is also
# pgvector's hnsw.max_scan_tuples, the most rows an iterative scan visits.
EXACT_BELOW = 20_000
# pgvector's range of hnsw.ef_search: a search sets max(ef_search, k) capped here (SET refuses 1001 and up);
# a k beyond it is still filled, by the iterative scan past ef_search or else the exact fallback
EF_SEARCH_MAX = 1000
_STREAM_BATCH = 256  # rows fetched per round trip when metadata is checked client-side
# How long a call waits for a pooled connection while the server is known to be unreachable (the
# pool failed to connect, or a connection was lost), instead of the whole connect_timeout. Calls
# that run one after another each waited the whole timeout: the memory API's writer lock holds the
# store calls of one add at a time, so with the server down the n-th queued add was answered after
# n x connect_timeout (8 writers, connect_timeout 2: adds waited over 10 s). Now the first call
# waits connect_timeout and the ones queued behind it fail at once (n x this wait, 1.3 s for the
# server's 64 request threads); a connection the pool hands out again (it reconnects by itself in
# the background, and a ready connection is handed out in microseconds) ends the state.
UNREACHABLE_WAIT_S = 0.02

# one row written: inserted, or over the stored (owner, id)
_UPSERT = (
    "INSERT INTO {memories} (owner, id, t, last_access, importance, kind, superseded_by, payload, embedding, "
    "version, expires_at, ttl, chunks) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (owner, id) DO UPDATE SET "
    "t = excluded.t, last_access = excluded.last_access, importance = excluded.importance, kind = excluded.kind, "
    "superseded_by = excluded.superseded_by, payload = excluded.payload, embedding = excluded.embedding, "
    "version = excluded.version, expires_at = excluded.expires_at, ttl = excluded.ttl, chunks = excluded.chunks"
)
_HNSW = """CREATE INDEX {hnsw} ON {memories} USING hnsw (embedding vector_ip_ops)
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
    _HNSW,
    _REEMBED,
]


class PgVectorStore:
    """Memories and their vectors in one PostgreSQL table with a pgvector HNSW index (implements MemoryStore).

    Args:
        url: ``postgresql://user:password@host:port/dbname`` (any libpq connection string).
        dim: vector dimension; None opens an existing store with the dim it was created with.
        key: encryption key, as for :class:`~memnets.store.archive.Archive` (16/24/32 raw bytes or
            a passphrase); a store created with a key opens only with it.
        table: name prefix of the store's tables (several stores may share a database).
        pool_size: most connections the pool opens (one per concurrent call).
        m, ef_construction: HNSW build parameters (used when the table is created).
        ef_search: HNSW candidate list per search, 1 .. ``EF_SEARCH_MAX`` (pgvector's range; raised to k
            when k is larger, up to that bound). 100, not pgvector's
            40: at 100k memnets memories it lifts recall@10 from 0.92 to 0.97 for no measurable
            latency (docs/scaling.md).
        connect_timeout: seconds to wait for the server and for a pooled connection (default 5: a
            call while the server is down fails after about this long with StoreUnavailableError,
            "database unavailable", and the store recovers by itself once the server is back).
            Once the server is known to be unreachable, calls wait at most ``UNREACHABLE_WAIT_S``
            for a connection until one is handed out again (see :meth:`_connection`).
        scrub: what a deletion does once it committed, so that the deleted text leaves the table
            files (docs/security.md): "full" (default) rewrites the table (``VACUUM FULL``: the
            deleted rows' bytes are in no table file after it; other calls on the table wait for
            the rewrite, seconds per 100,000 rows, and it needs free disk space of the table's
            size); "vacuum" runs a plain ``VACUUM`` (no lock, the space is reused, but PostgreSQL
            does not zero freed space: part of the deleted text stays readable in the files until
            overwritten); "off" leaves it to autovacuum. What stays in the WAL and in backups is
            the same for all three (docs/security.md).
    """

    # optional capabilities this store declares (memnets.store.protocol)
    supports_deletion_ledger = True
    supports_compaction = True
    supports_index_rebuild = True
    supports_encoder_binding = True
    supports_reembed = True
    supports_expiry = True
    supports_chunks = True

    def __init__(
        self,
        url: str,
        dim: int | None,
        *,
        key: bytes | str | None = None,
        table: str = "memnets",
        pool_size: int = 4,
        m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 100,
        connect_timeout: float = 5.0,
        scrub: str = "full",
    ) -> None:
        dim = rowcodec.check_dim(dim, "PgVectorStore")
        if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
            raise ValueError(
                f"PgVectorStore: table must be a lower-case SQL name ([a-z_][a-z0-9_]*, <= 41 chars), got {table!r}"
            )
        for name, value, low in (
            ("pool_size", pool_size, 1),
            ("m", m, 2),
            ("ef_construction", ef_construction, 4),
            ("ef_search", ef_search, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"PgVectorStore: {name} must be an int >= {low}, got {value!r}")
        if ef_search > EF_SEARCH_MAX:
            raise ValueError(
                f"PgVectorStore: ef_search must be at most {EF_SEARCH_MAX} (pgvector's range), got {ef_search}"
            )
        if scrub not in _SCRUBS:
            raise ValueError(f"PgVectorStore: scrub must be one of {_SCRUBS}, got {scrub!r}")
        if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, (int, float)) or connect_timeout <= 0:
            raise ValueError(f"PgVectorStore: connect_timeout must be a number of seconds > 0, got {connect_timeout!r}")
        self.scrub = scrub
        self.url = url
        self.table = table
        self.ef_search = ef_search
        self.m, self.ef_construction = m, ef_construction
        self._deletions_exist = False  # see _has_deletions
        self._names = {
            "memories": sql.Identifier(f"{table}_memories"),
            "meta": sql.Identifier(f"{table}_meta"),
            "owner_t": sql.Identifier(f"{table}_owner_t"),
            "owner_kind": sql.Identifier(f"{table}_owner_kind"),
            "versions": sql.Identifier(f"{table}_versions"),
            "hnsw": sql.Identifier(f"{table}_hnsw"),
            "reembed": sql.Identifier(f"{table}_reembed"),
            "expires": sql.Identifier(f"{table}_expires"),
            "chunked": sql.Identifier(f"{table}_chunked"),
        }
        self._encoder: EncoderIdentity | None = None  # bound by bind_encoder (None: unchecked)
        self._connect_timeout = float(connect_timeout)
        self._unreachable = False  # see _connection
        self._connect_errors = 0  # the pool's failed connection attempts counted so far (_connect_failed)
        self._pool: ConnectionPool | None = None
        self.dim, self._cipher, self.archive_id, self._ledger_secret = self._init_schema(dim, key, connect_timeout)
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            timeout=connect_timeout,
            open=False,
            kwargs={"connect_timeout": max(1, int(connect_timeout))},
            configure=_configure,
            check=ConnectionPool.check_connection,  # a connection broken by a server restart is replaced, not used
            name=f"memnets-{table}",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except (psycopg.Error, PoolTimeout) as error:
            self._pool.close()
            self._pool = None
            raise self._unavailable(error) from None

    # ------------------------------------------------------------------ opening
    def _where(self) -> str:
        """The server and table for messages, without credentials."""
        try:
            info = psycopg.conninfo.conninfo_to_dict(self.url)
        except psycopg.ProgrammingError:
            return f"table {self.table}"
        return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')} table {self.table}"

    def _sql(self, template: str, **extra) -> sql.Composed:
        return sql.SQL(template).format(**self._names, **extra)

    def _init_schema(self, dim: int | None, key, connect_timeout: float) -> tuple[int, RowCipher | None, str, bytes]:
        """Create the tables in an empty database, or check format, dim and key of existing ones (migrating older formats)."""
        try:
            conn = psycopg.connect(self.url, connect_timeout=max(1, int(connect_timeout)), autocommit=True)
        except psycopg.OperationalError as error:
            raise self._unavailable(error) from None
        with conn:
            if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except psycopg.Error as error:
                    raise StoreError(
                        f"PgVectorStore: the pgvector extension is not installed in {self._where()} "
                        f"and could not be created ({error}); run CREATE EXTENSION vector as an owner"
                    ) from None
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
            if tuple(int(p) for p in re.findall(r"\d+", version)[:2]) < (0, 8):
                log.warning(
                    "pgvector %s has no iterative index scans (0.8+); filtered searches fall back to exact scans",
                    version,
                )
            with conn.transaction():
                # one opener at a time creates or migrates (others wait here, then find it done)
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memnets-store-{self.table}",))
                exists = conn.execute("SELECT to_regclass(%s)", (f"{self.table}_meta",)).fetchone()[0] is not None
                if not exists:
                    if dim is None:
                        raise ValueError(
                            f"PgVectorStore: {self._where()} holds no memnets store yet; give dim to create one"
                        )
                    for statement in _SCHEMA:
                        conn.execute(
                            self._sql(
                                statement,
                                dim=sql.Literal(dim),
                                m=sql.Literal(self.m),
                                ef_construction=sql.Literal(self.ef_construction),
                            )
                        )
                    cipher, key_meta = rowcodec.new_cipher(key)
                    archive_id = rowcodec.new_store_id()
                    secret, ledger_meta = rowcodec.ledger_secret({})
                    meta = {
                        "format": str(FORMAT_VERSION).encode(),
                        "dim": str(dim).encode(),
                        "archive_id": archive_id.encode(),
                        **key_meta,
                        **ledger_meta,
                    }
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            self._sql("INSERT INTO {meta} (key, value) VALUES (%s, %s)"), list(meta.items())
                        )
                    log.info("created memnets store %s (dim %d, encrypted %s)", self._where(), dim, cipher is not None)
                    return dim, cipher, archive_id, secret
                meta = {k: bytes(v) for k, v in conn.execute(self._sql("SELECT key, value FROM {meta}"))}
                stored_format, stored_dim = int(meta["format"]), int(meta["dim"])
                if stored_format > FORMAT_VERSION:
                    raise StoreFormatError(
                        f"{self._where()} was written by store format {stored_format}; this memnets reads format "
                        f"{FORMAT_VERSION} and older. Upgrade memnets to open it (it was not modified)."
                    )
                if dim is not None and dim != stored_dim:
                    raise StoreFormatError(
                        f"{self._where()} holds vectors of dim {stored_dim}, but was opened with dim={dim}"
                    )
                cipher = rowcodec.existing_cipher(key, meta, self._where())
                for step in range(stored_format, FORMAT_VERSION):
                    for statement in _MIGRATIONS[step]:
                        conn.execute(self._sql(statement))
                if "archive_id" not in meta:  # format 1: give the store its id and bind every row to it
                    meta["archive_id"] = self._bind_rows(conn, cipher)
                secret, ledger_meta = rowcodec.ledger_secret(meta)
                for name, value in ledger_meta.items():
                    conn.execute(self._sql("INSERT INTO {meta} (key, value) VALUES (%s, %s)"), (name, value))
                if stored_format < 3:
                    self._tag_ledger(conn, secret)
                if stored_format != FORMAT_VERSION:
                    conn.execute(
                        self._sql("UPDATE {meta} SET value = %s WHERE key = 'format'"), (str(FORMAT_VERSION).encode(),)
                    )
                    log.info(
                        "migrated memnets store %s from format %d to %d", self._where(), stored_format, FORMAT_VERSION
                    )
                return stored_dim, cipher, meta["archive_id"].decode(), secret

    def _tag_ledger(self, conn: psycopg.Connection, secret: bytes) -> None:
        """Upgrade to format 3: the deletion ledger's owner names and ids become their keyed hashes."""
        if conn.execute("SELECT to_regclass(%s)", (f"{self.table}_deletions",)).fetchone()[0] is None:
            return
        rows = conn.execute(sql.SQL("SELECT seq, owner, id FROM {}").format(self._deletions)).fetchall()
        for seq, owner, memory_id in rows:
            tagged = rowcodec.ledger_row(secret, owner, memory_id, None)[:2]
            conn.execute(
                sql.SQL("UPDATE {} SET owner = %s, id = %s WHERE seq = %s").format(self._deletions), (*tagged, seq)
            )

    def _bind_rows(self, conn: psycopg.Connection, cipher: RowCipher | None) -> bytes:
        """Upgrade to format 2 inside the open's transaction: a new store id, and with a key every row
        re-sealed from the old associated data (no store id, no version) to the new one."""
        archive_id = rowcodec.new_store_id().encode()
        conn.execute(self._sql("INSERT INTO {meta} (key, value) VALUES ('archive_id', %s)"), (archive_id,))
        if cipher is not None:
            register_vector(conn)
            records = conn.execute(self._sql(f"SELECT {_COLUMNS} FROM {{memories}}")).fetchall()
            for owner, memory_id, t, _, importance, kind, superseded_by, payload, embedding, version in (
                record[:10] for record in records
            ):
                fields = (
                    owner,
                    memory_id,
                    as_utc(t).isoformat(),
                    kind,
                    importance,
                    _array(embedding).astype("<f4").tobytes(),
                    superseded_by,
                )
                plaintext = cipher.open(
                    bytes(payload),
                    rowcodec.row_aad(*fields, store_id=None, version=None),
                    what=f"memory {memory_id!r} of owner {owner!r}",
                )
                sealed = cipher.seal(
                    plaintext, rowcodec.row_aad(*fields, store_id=archive_id.decode(), version=version)
                )
                conn.execute(
                    self._sql("UPDATE {memories} SET payload = %s WHERE owner = %s AND id = %s"),
                    (sealed, owner, memory_id),
                )
        return archive_id

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection]:
        """A pooled connection inside one transaction (committed on success, rolled back on error).

        A lost or unreachable server (psycopg's OperationalError, AdminShutdown among them, or the
        pool's PoolTimeout) becomes StoreUnavailableError; the pool replaces broken connections, so
        the next call after the server is back works.
        """
        with self._connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection (see :meth:`_transaction` for the errors).

        The wait for it is ``connect_timeout``, or ``UNREACHABLE_WAIT_S`` while the server is known
        to be unreachable: a connection was lost, or the pool timed out after failed attempts to
        connect (a timeout with every connection busy and no failed attempt is load, not an
        outage, and changes nothing). So a call while the server is down fails within about
        connect_timeout however many calls queue before it, and the first connection handed out
        again (the pool reconnects in the background) ends the state.
        """
        pool = self._pool
        if pool is None:
            raise StoreError(f"PgVectorStore {self._where()} is closed")
        wait = min(UNREACHABLE_WAIT_S, self._connect_timeout) if self._unreachable else None
        try:
            with pool.connection(timeout=wait) as conn:
                if self._unreachable:
                    self._unreachable = False
                    log.info("PostgreSQL at %s answers again", self._where())
                yield conn
        except PoolTimeout as error:
            if self._connect_failed(pool):
                self._mark_unreachable(error)
            raise self._unavailable(error) from None
        except psycopg.OperationalError as error:
            if isinstance(error, (psycopg.errors.TransactionRollback, psycopg.errors.QueryCanceled)):
                raise  # a conflict or a timeout of this statement, not a lost server
            self._mark_unreachable(error)
            raise self._unavailable(error) from None

    def _connect_failed(self, pool: ConnectionPool) -> bool:
        """Whether the pool failed an attempt to connect since this was last asked (its public stats)."""
        errors = pool.get_stats().get("connections_errors", 0)
        failed, self._connect_errors = errors > self._connect_errors, errors
        return failed

    def _mark_unreachable(self, error: Exception) -> None:
        if not self._unreachable:
            self._unreachable = True
            log.warning(
                "PostgreSQL at %s is unreachable (%s): calls wait at most %.2f s for a connection until it answers",
                self._where(),
                type(error).__name__,
                min(UNREACHABLE_WAIT_S, self._connect_timeout),
            )

    def _unavailable(self, error: Exception) -> StoreUnavailableError:
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return StoreUnavailableError(f"database unavailable: PostgreSQL at {self._where()} ({detail})")

    # ------------------------------------------------------------------ writes
    def upsert(self, memories: Sequence[Memory], vectors, *, chunks=None) -> None:
        """Store memories with their vectors [N, dim] in one transaction; an existing (owner, id) is replaced
        (an expired one's older versions go with it, as in :meth:`memnets.store.archive.Archive.upsert`).
        ``chunks``: as :meth:`memnets.store.archive.Archive.upsert` (a long memory's further windows)."""
        memories, array = rowcodec.check_batch(memories, vectors, self.dim, "PgVectorStore.upsert")
        extra = check_chunks(chunks, len(memories), self.dim, "PgVectorStore.upsert")
        rows = [
            _with_chunks(rowcodec.encode_row(memory, vector, "PgVectorStore.upsert"), more)
            for memory, vector, more in zip(memories, array, extra)
        ]
        if not rows:
            return
        order = sorted(range(len(rows)), key=lambda i: (rows[i].owner, rows[i].id))  # one lock order: no deadlocks
        statement = self._sql(_UPSERT)
        with self._transaction() as conn, conn.cursor() as cursor:
            self._check_encoder(conn, record=True)
            stored: dict[tuple[str, str], int] = {}
            for owner in sorted({row.owner for row in rows}):  # lock the rows to rewrite, in the same order
                ids = sorted(row.id for row in rows if row.owner == owner)
                stored.update(
                    ((owner, memory_id), version)
                    for memory_id, version in conn.execute(
                        self._sql(
                            "SELECT id, version FROM {memories} WHERE owner = %s AND id = ANY(%s) ORDER BY id FOR UPDATE"
                        ),
                        (owner, ids),
                    )
                )
            self._drop_expired_histories(conn, rows)
            params = [
                _params(
                    rowcodec.seal_row(
                        rows[i], self._cipher, self.archive_id, stored.get((rows[i].owner, rows[i].id), 0) + 1
                    ),
                    array[i],
                )
                for i in order
            ]
            cursor.executemany(statement, params)
            for owner in sorted({owner for owner, _ in stored}):  # a pending re-embedding's vector of the old text
                conn.execute(
                    self._sql("DELETE FROM {reembed} WHERE owner = %s AND id = ANY(%s)"),
                    (owner, [i for o, i in stored if o == owner]),
                )

    def _drop_expired_histories(self, conn: psycopg.Connection, rows: Sequence[rowcodec.Row]) -> None:
        """Inside an upsert's transaction, with its rows locked and before it writes: the older versions of
        an expired memory whose id a current row takes (as :meth:`memnets.store.archive.Archive.upsert`)."""
        taken = [(row.owner, row.id) for row in rows if row.superseded_by is None]
        conn.execute(
            self._sql(
                "DELETE FROM {memories} m USING unnest(%s::text[], %s::text[]) AS g(owner, id), {memories} e "
                "WHERE e.owner = g.owner AND e.id = g.id AND e.expires_at <= %s "
                "AND m.owner = g.owner AND m.superseded_by = g.id"
            ),
            ([owner for owner, _ in taken], [memory_id for _, memory_id in taken], timeutil.now()),
        )

    def new_version(self, memory: Memory, vector, *, chunks=None) -> Memory:
        """Make ``memory`` the current version of its (owner, id), keeping the current one as history: one atomic step.

        Same contract as :meth:`memnets.store.archive.Archive.new_version`. The current row is
        locked (``SELECT ... FOR UPDATE``) before anything is read, so concurrent calls on one id
        from any connection queue behind it; the older version is a new row ``{id}~{n}`` (its
        ``seq`` orders the history). KeyError when there is no current memory ``id``. ``chunks``
        [m, dim]: the new text's further windows (the older version keeps none).
        """
        array = rowcodec.check_new_version(memory, vector, self.dim, "PgVectorStore.new_version")
        extra = check_chunks(None if chunks is None else [chunks], 1, self.dim, "PgVectorStore.new_version")[0]
        new = _with_chunks(rowcodec.encode_row(memory, array, "PgVectorStore.new_version"), extra)
        with self._transaction() as conn:
            self._check_encoder(conn)  # a re-embedding swapped encoders elsewhere: write nothing
            record = conn.execute(
                self._sql(
                    f"SELECT {_COLUMNS} FROM {{memories}} WHERE owner = %s AND id = %s AND {_CURRENT} AND {_LIVE} "
                    "FOR UPDATE"
                ),
                (new.owner, new.id, timeutil.now()),
            ).fetchone()
            if record is None:
                raise KeyError(f"PgVectorStore.new_version: owner {new.owner!r} has no current memory {new.id!r}")
            count = conn.execute(
                self._sql("SELECT count(*) FROM {memories} WHERE owner = %s AND superseded_by = %s"),
                (new.owner, new.id),
            ).fetchone()[0]
            older = rowcodec.older_version(
                self._decode(record),
                count,
                lambda memory_id: (
                    conn.execute(
                        self._sql("SELECT 1 FROM {memories} WHERE owner = %s AND id = %s"), (new.owner, memory_id)
                    ).fetchone()
                    is not None
                ),
            )
            old_vector = _array(record[8])
            old = rowcodec.encode_row(older, old_vector, "PgVectorStore.new_version")
            statement = self._sql(_UPSERT)
            conn.execute(statement, _params(rowcodec.seal_row(old, self._cipher, self.archive_id, 1), old_vector))
            conn.execute(
                statement, _params(rowcodec.seal_row(new, self._cipher, self.archive_id, record[9] + 1), array)
            )
        return older

    def touch(self, ids: Iterable[str], owner: str, when: datetime) -> int:
        """Set last_access of the owner's memories with these ids; returns how many were updated."""
        ids = rowcodec.check_ids(ids, "PgVectorStore.touch")
        rowcodec.check_owner(owner, "PgVectorStore.touch")
        when = as_utc(when, "PgVectorStore.touch: when")
        with self._transaction() as conn:
            return conn.execute(
                self._sql("UPDATE {memories} SET last_access = %s WHERE owner = %s AND id = ANY(%s)"),
                (when, owner, list(dict.fromkeys(ids))),
            ).rowcount

    def refresh_expiry(self, ids: Iterable[str], owner: str, now: datetime) -> int:
        """Move the expiry of the owner's unexpired memories with these ids and a TTL to ``now + ttl``; returns how many."""
        ids = rowcodec.check_ids(ids, "PgVectorStore.refresh_expiry")
        rowcodec.check_owner(owner, "PgVectorStore.refresh_expiry")
        now = as_utc(now, "PgVectorStore.refresh_expiry: now")
        with self._transaction() as conn:
            return conn.execute(
                self._sql(
                    "UPDATE {memories} SET expires_at = %s + ttl * interval '1 second' "
                    f"WHERE owner = %s AND id = ANY(%s) AND ttl IS NOT NULL AND {_LIVE}"
                ),
                (now, owner, list(dict.fromkeys(ids)), now),
            ).rowcount

    def expired(self, now: datetime, owner: str | None = None) -> list[tuple[str, str]]:
        """(owner, id) of every stored row (older versions too) expired at ``now``, of one owner or all, sorted."""
        now = as_utc(now, "PgVectorStore.expired: now")
        where, params = "expires_at <= %s", [now]
        if owner is not None:
            rowcodec.check_owner(owner, "PgVectorStore.expired")
            where, params = "owner = %s AND expires_at <= %s", [owner, now]
        with self._transaction() as conn:
            return [
                tuple(r)
                for r in conn.execute(
                    self._sql(
                        f'SELECT owner, id FROM {{memories}} WHERE {where} ORDER BY owner COLLATE "C", id COLLATE "C"'
                    ),
                    params,
                )
            ]

    def delete(self, ids: Iterable[str], owner: str) -> int:
        """Delete the owner's memories with these ids and their older versions; returns how many rows."""
        return self._delete_ids(ids, owner, "PgVectorStore.delete")

    def delete_expired(self, id: str, owner: str, now: datetime, *, with_ids: Iterable[str] = ()) -> int:
        """The expiry sweep's deletion, as :meth:`memnets.store.archive.Archive.delete_expired`: nothing
        unless ``id`` is still expired at ``now`` (its row is locked for the check, so a put or refresh
        committed meanwhile is seen, and one arriving later waits for the deletion)."""
        return self._delete_ids(
            [id, *with_ids], owner, "PgVectorStore.delete_expired", as_utc(now, "PgVectorStore.delete_expired: now")
        )

    def _delete_ids(self, ids: Iterable[str], owner: str, where: str, expired_at: datetime | None = None) -> int:
        """:meth:`delete` (``where`` names the caller in errors); ``expired_at``: only while ``ids[0]`` is
        expired then (:meth:`delete_expired`)."""
        ids = list(dict.fromkeys(rowcodec.check_ids(ids, where)))
        rowcodec.check_owner(owner, where)
        with self._transaction() as conn:
            if (
                expired_at is not None
                and not conn.execute(
                    self._sql("SELECT 1 FROM {memories} WHERE owner = %s AND id = %s AND expires_at <= %s FOR UPDATE"),
                    (owner, ids[0], expired_at),
                ).fetchone()
            ):
                return 0
            self._record_tombstones(conn, [(owner, i, None) for i in ids])
            deleted = conn.execute(
                self._sql("DELETE FROM {memories} WHERE owner = %s AND (id = ANY(%s) OR superseded_by = ANY(%s))"),
                (owner, ids, ids),
            ).rowcount
        return self._scrubbed(deleted)

    def delete_owner(self, owner: str) -> int:
        """Delete every memory of an owner; returns how many rows."""
        rowcodec.check_owner(owner, "PgVectorStore.delete_owner")
        with self._transaction() as conn:
            self._record_tombstones(conn, [(owner, None, None)], erase_owner=True)
            deleted = conn.execute(self._sql("DELETE FROM {memories} WHERE owner = %s"), (owner,)).rowcount
        return self._scrubbed(deleted)

    def purge_older_than(self, cutoff: datetime, owner: str | None = None) -> int:
        """Delete memories with t < cutoff and their older versions, of one owner or of all; returns how many rows."""
        cutoff = as_utc(cutoff, "PgVectorStore.purge_older_than: cutoff")
        where, params = "t < %s", [cutoff]
        if owner is not None:
            rowcodec.check_owner(owner, "PgVectorStore.purge_older_than")
            where, params = "owner = %s AND t < %s", [owner, cutoff]
        with self._transaction() as conn:
            self._record_tombstones(conn, [(owner, None, cutoff)])
            gone = conn.execute(
                self._sql(f"DELETE FROM {{memories}} WHERE {where} AND {_CURRENT} RETURNING owner, id"), params
            ).fetchall()
            deleted = len(gone) + conn.execute(self._sql(f"DELETE FROM {{memories}} WHERE {where}"), params).rowcount
            if gone:
                deleted += conn.execute(
                    self._sql(
                        "DELETE FROM {memories} m USING unnest(%s::text[], %s::text[]) AS g(owner, id) "
                        "WHERE m.owner = g.owner AND m.superseded_by = g.id"
                    ),
                    ([o for o, _ in gone], [i for _, i in gone]),
                ).rowcount
        return self._scrubbed(deleted)

    # ------------------------------------------------------------------ deletion ledger (API helper)
    def _record_tombstones(
        self, conn: psycopg.Connection, tombstones: Sequence[tuple], *, erase_owner: bool = False
    ) -> None:
        """Append (owner or None = all, id or None = all, t cutoff or None) tombstones in the deletion's
        transaction, owners and ids by their ledger tags; the table is created on first use (under
        the store's advisory lock). ``erase_owner``: the one tombstone takes every row of its owner,
        so the owner's earlier tombstones (which name its ids) are dropped first."""
        tombstones = [rowcodec.ledger_row(self._ledger_secret, *stone) for stone in tombstones]
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memnets-store-{self.table}",))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                "owner text, id text, before timestamptz)"
            ).format(self._deletions)
        )
        if erase_owner:
            conn.execute(sql.SQL("DELETE FROM {} WHERE owner = %s").format(self._deletions), (tombstones[0][0],))
        with conn.cursor() as cursor:
            cursor.executemany(
                sql.SQL("INSERT INTO {} (owner, id, before) VALUES (%s, %s, %s)").format(self._deletions),
                list(tombstones),
            )

    def _has_deletions(self, conn: psycopg.Connection) -> bool:
        """Whether the tombstone table exists yet (the first delete creates it); a yes is remembered,
        since the table is never dropped, so readers of the ledger stop asking the catalog."""
        if not self._deletions_exist:
            found = conn.execute("SELECT to_regclass(%s)", (f"{self.table}_deletions",)).fetchone()[0]
            self._deletions_exist = found is not None
        return self._deletions_exist

    @property
    def _deletions(self) -> sql.Identifier:
        return sql.Identifier(f"{self.table}_deletions")

    def deletion_mark(self) -> int:
        """The newest tombstone's sequence number (0: nothing deleted yet); see :meth:`deleted_since`."""
        with self._transaction() as conn:
            if not self._has_deletions(conn):
                return 0
            return int(
                conn.execute(sql.SQL("SELECT coalesce(max(seq), 0) FROM {}").format(self._deletions)).fetchone()[0]
            )

    def deleted_since(self, mark: int, owner: str, memories: Sequence[Memory]) -> tuple[int, set[str]]:
        """Which of ``memories`` (the owner's, held by a writer) were deleted after ``mark``, and the newest mark.

        Same contract as :meth:`memnets.store.archive.Archive.deleted_since`: every delete,
        delete_owner and purge records tombstones in its transaction, also for ids the table never
        held, so a manager never writes back what another connection deleted.
        """
        rowcodec.check_owner(owner, "PgVectorStore.deleted_since")
        with self._transaction() as conn:
            if not self._has_deletions(conn):
                return int(mark), set()
            # the newest mark of every owner (as the Archive): a caller never re-reads others' tombstones
            newest = conn.execute(sql.SQL("SELECT coalesce(max(seq), 0) FROM {}").format(self._deletions)).fetchone()[0]
            stones = conn.execute(
                sql.SQL(
                    "SELECT id, before FROM {} WHERE seq > %s AND seq <= %s AND (owner = %s OR owner IS NULL)"
                ).format(self._deletions),
                (int(mark), newest, rowcodec.ledger_tag(self._ledger_secret, owner)),
            ).fetchall()
        forgotten = rowcodec.deleted_by_tombstones(memories, stones, lambda memory: memory.t, self._ledger_secret)
        return max(int(mark), int(newest)), forgotten

    def compact(self, *, full: bool = False) -> None:
        """VACUUM the table now (autovacuum does it later otherwise); ``full``: VACUUM FULL, a rewrite that
        leaves no byte of deleted rows in the table files (see ``scrub`` of the constructor)."""
        with self._connection() as conn:
            conn.autocommit = True  # VACUUM cannot run inside a transaction
            try:
                conn.execute(self._sql("VACUUM FULL {memories}" if full else "VACUUM {memories}"))
            finally:
                conn.autocommit = False

    def _scrubbed(self, deleted: int) -> int:
        """After a deletion committed: the upkeep of ``scrub`` (when rows went); returns ``deleted``."""
        if deleted and self.scrub != "off":
            self.compact(full=self.scrub == "full")
        return deleted

    def rebuild_index(self, maintenance_work_mem: str = "1GB") -> None:
        """(Re)build the HNSW index from the table with this store's m and ef_construction.

        Inserting into a live HNSW index costs far more than building it once (docs/scaling.md has
        the figures), so a bulk import drops the index (``DROP INDEX {table}_hnsw``), loads, and
        calls this. Searches keep working meanwhile, as exact scans.
        """
        if not re.fullmatch(r"\d+(kB|MB|GB)", maintenance_work_mem):
            raise ValueError(
                f"PgVectorStore.rebuild_index: maintenance_work_mem must look like '512MB' or '2GB', got {maintenance_work_mem!r}"
            )
        with self._transaction() as conn:
            conn.execute(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'")
            conn.execute(self._sql("DROP INDEX IF EXISTS {hnsw}"))
            conn.execute(self._sql(_HNSW, m=sql.Literal(self.m), ef_construction=sql.Literal(self.ef_construction)))
            conn.execute(self._sql("ANALYZE {memories}"))  # fresh statistics, or the planner may not pick the index

    # ------------------------------------------------------------------ reads (all owner-scoped)
    def get(self, ids: Iterable[str], owner: str, *, include_expired: bool = False) -> list[Memory]:
        """The owner's memories with these ids (older versions included), in the order asked; unknown ids are skipped.
        ``include_expired``: as :meth:`memnets.store.archive.Archive.get` (for checks of who may use an id)."""
        ids = rowcodec.check_ids(ids, "PgVectorStore.get")
        rowcodec.check_owner(owner, "PgVectorStore.get")
        live, now = ("", []) if include_expired else (f" AND {_LIVE}", [timeutil.now()])
        with self._transaction() as conn:
            records = conn.execute(
                self._sql(f"SELECT {_COLUMNS} FROM {{memories}} WHERE owner = %s AND id = ANY(%s){live}"),
                (owner, list(dict.fromkeys(ids)), *now),
            ).fetchall()
        found = {record[1]: self._decode(record) for record in records}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def vectors(self, ids: Iterable[str], owner: str) -> np.ndarray:
        """The stored vectors [N, dim] of these ids, in order (KeyError naming the first missing one)."""
        ids, found = self._column_by_id("embedding", ids, owner, "PgVectorStore.vectors")
        return np.stack([_array(found[i]) for i in ids]) if ids else np.zeros((0, self.dim), np.float32)

    def chunk_vectors(self, ids: Iterable[str], owner: str) -> list[np.ndarray]:
        """The further window vectors [m, dim] of these ids, in order (KeyError naming the first missing one)."""
        ids, found = self._column_by_id("chunks", ids, owner, "PgVectorStore.chunk_vectors")
        return [from_blob(found[i], self.dim) for i in ids]

    def _column_by_id(self, column: str, ids: Iterable[str], owner: str, where: str) -> tuple[list[str], dict]:
        """(the checked ids, {id: the column's value}) of the owner's rows; KeyError naming the first id it lacks."""
        ids = rowcodec.check_ids(ids, where)
        rowcodec.check_owner(owner, where)
        with self._transaction() as conn:
            found = dict(
                conn.execute(
                    self._sql(
                        "SELECT id, {column} FROM {memories} WHERE owner = %s AND id = ANY(%s)",
                        column=sql.Identifier(column),
                    ),
                    (owner, list(dict.fromkeys(ids))),
                ).fetchall()
            )
        missing = [i for i in ids if i not in found]
        if missing:
            raise KeyError(f"{where}: owner {owner!r} has no memory {missing[0]!r}")
        return ids, found

    def search(self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None) -> list[tuple[Memory, float]]:
        """The owner's k current memories passing ``filters`` of highest inner product with ``vector``, best first.

        k results whenever k match (see the module docstring for how each kind of filter runs).
        """
        rowcodec.check_owner(owner, "PgVectorStore.search")
        k = rowcodec.check_k(k, "PgVectorStore.search")
        query = rowcodec.check_vectors(vector, 1, self.dim, "PgVectorStore.search", single=True)[0]
        filters = MemoryFilter.parse(filters)
        where, params = _clear_conditions(owner, filters, timeutil.now())
        with self._transaction() as conn:
            # A re-embedding's swap may commit at any moment. Taking the table's ACCESS SHARE lock
            # before checking the encoder makes a swap that changes the dim (it drops the column
            # under ACCESS EXCLUSIVE) wait for this search, or come before the check; checking again
            # after the ranking catches a same-dim swap that committed while it ran. Either way the
            # answer is from one space, or EncoderMismatchError.
            conn.execute(self._sql("LOCK TABLE {memories} IN ACCESS SHARE MODE"))
            self._check_encoder(conn)
            found = self._ranked(conn, query, k, where, params, filters)
            best = best_scores(  # a long memory's further windows (memnets.store.chunks)
                conn.execute(
                    self._sql(f"SELECT id, chunks FROM {{memories}} WHERE {where} AND chunks IS NOT NULL"), params
                ),
                query,
                self.dim,
            )
            found = merge(found, best, k, lambda ids: self._matching(conn, ids, owner, filters))
            self._check_encoder(conn)
        return found

    def _matching(self, conn, ids: list[str], owner: str, filters: MemoryFilter | None) -> list[Memory]:
        """The owner's current, unexpired memories with these ids that pass ``filters``."""
        records = conn.execute(
            self._sql(
                f"SELECT {_COLUMNS} FROM {{memories}} WHERE owner = %s AND id = ANY(%s) AND {_CURRENT} AND {_LIVE}"
            ),
            (owner, ids, timeutil.now()),
        ).fetchall()
        memories = [self._decode(record) for record in records]
        return [m for m in memories if filters is None or filters.matches(m)]

    def _ranked(
        self, conn, query: np.ndarray, k: int, where: str, params: list, filters: MemoryFilter | None
    ) -> list[tuple[Memory, float]]:
        """Inside search's transaction: the k best (memory, score) of the rows matching ``where`` and ``filters``
        by their main vector."""
        if filters is not None and filters.needs_payload:
            return self._search_streaming(conn, query, k, where, params, filters)
        # a filter on clear columns: rank exactly when few rows match (the planner misjudges
        # owner-and-kind selectivity, and an index scan under a selective filter loses recall)
        exact = (
            filters is not None
            and conn.execute(
                self._sql(f"SELECT count(*) FROM (SELECT 1 FROM {{memories}} WHERE {where} LIMIT %s) AS matching"),
                [*params, EXACT_BELOW + 1],
            ).fetchone()[0]
            <= EXACT_BELOW
        )
        records = []
        if not exact:
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            ef_search = min(max(self.ef_search, k), EF_SEARCH_MAX)
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)))
            records = conn.execute(
                self._sql(
                    f"WITH hits AS MATERIALIZED (SELECT {_COLUMNS}, embedding <#> %s AS distance FROM {{memories}} "
                    f"WHERE {where} ORDER BY distance LIMIT %s) SELECT * FROM hits ORDER BY distance"
                ),
                [query, *params, k],
            ).fetchall()
        if len(records) < k:  # exact by choice, or the index scan gave up early (max_scan_tuples)
            records = conn.execute(
                self._sql(
                    f"SELECT {_COLUMNS}, embedding <#> %s AS distance FROM {{memories}} WHERE {where} "
                    "ORDER BY (embedding <#> %s) + 0 LIMIT %s"
                ),
                [query, *params, query, k],
            ).fetchall()
        return [(self._decode(record[:-1]), -float(record[-1])) for record in records]

    def _search_streaming(
        self, conn, query: np.ndarray, k: int, where: str, params: list, filters: MemoryFilter
    ) -> list[tuple[Memory, float]]:
        """Exact ranking in SQL, metadata checked on the decoded rows best first until k match."""
        found: list[tuple[Memory, float]] = []
        with conn.cursor(name="memnets_ranked") as cursor:
            cursor.itersize = _STREAM_BATCH
            # "+ 0" keeps the planner off the HNSW index: the ranking must be exact to stream it
            cursor.execute(
                self._sql(
                    f"SELECT {_COLUMNS}, embedding <#> %s AS distance FROM {{memories}} "
                    f"WHERE {where} ORDER BY (embedding <#> %s) + 0"
                ),
                [query, *params, query],
            )
            for record in cursor:
                memory = self._decode(record[:-1])
                if filters.matches(memory):
                    found.append((memory, -float(record[-1])))
                    if len(found) == k:
                        break
        return found

    def list_memories(
        self, owner: str, *, limit: int | None = None, offset: int = 0, filters: MemoryFilter | None = None
    ) -> list[Memory]:
        """The owner's current memories passing ``filters``, ordered by (t, id); ``offset`` skipped, at most ``limit``."""
        rowcodec.check_owner(owner, "PgVectorStore.list_memories")
        rowcodec.check_page(limit, offset, "PgVectorStore.list_memories")
        filters = MemoryFilter.parse(filters)
        where, params = _clear_conditions(owner, filters, timeutil.now())
        query = f"SELECT {_COLUMNS} FROM {{memories}} WHERE {where} ORDER BY t, id"
        with self._transaction() as conn:
            if filters is None or not filters.needs_payload:
                return [
                    self._decode(r)
                    for r in conn.execute(self._sql(f"{query} LIMIT %s OFFSET %s"), [*params, limit, offset])
                ]
            out: list[Memory] = []
            skipped = 0
            with conn.cursor(name="memnets_listing") as cursor:
                cursor.itersize = _STREAM_BATCH
                cursor.execute(self._sql(query), params)
                for record in cursor:
                    if limit is not None and len(out) >= limit:
                        break
                    memory = self._decode(record)
                    if filters.matches(memory):
                        if skipped < offset:
                            skipped += 1
                        else:
                            out.append(memory)
            return out

    def export(self, owner: str) -> list[Memory]:
        """Every stored row of the owner (older versions and rows expired but not swept too), decrypted, by
        (t, id): the right-of-access dump, read by one statement, so one snapshot (as ``Archive.export``)."""
        rowcodec.check_owner(owner, "PgVectorStore.export")
        with self._transaction() as conn:
            return [
                self._decode(r)
                for r in conn.execute(
                    self._sql(f"SELECT {_COLUMNS} FROM {{memories}} WHERE owner = %s ORDER BY t, id"), (owner,)
                )
            ]

    def history(self, id: str, owner: str) -> list[Memory]:
        """The older versions of the owner's memory ``id`` (rows superseded by it), first written first."""
        rowcodec.check_ids([id], "PgVectorStore.history")
        rowcodec.check_owner(owner, "PgVectorStore.history")
        with self._transaction() as conn:
            return [
                self._decode(r)
                for r in conn.execute(
                    self._sql(
                        f"SELECT {_COLUMNS} FROM {{memories}} WHERE owner = %s AND superseded_by = %s ORDER BY seq"
                    ),
                    (owner, id),
                )
            ]

    def count(self, owner: str) -> int:
        """How many current (not superseded, not expired) memories the owner has."""
        rowcodec.check_owner(owner, "PgVectorStore.count")
        with self._transaction() as conn:
            return conn.execute(
                self._sql(f"SELECT count(*) FROM {{memories}} WHERE owner = %s AND {_CURRENT} AND {_LIVE}"),
                (owner, timeutil.now()),
            ).fetchone()[0]

    def owners(self) -> list[str]:
        """Every owner with at least one stored memory, sorted."""
        with self._transaction() as conn:
            return [
                r[0]
                for r in conn.execute(
                    self._sql(f"SELECT DISTINCT owner FROM {{memories}} WHERE {_LIVE} ORDER BY owner"),
                    (timeutil.now(),),
                )
            ]

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection pool. Safe to call twice."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ encoder identity and re-embedding
    def _meta_identity(self, conn: psycopg.Connection, key: str) -> EncoderIdentity | None:
        row = conn.execute(self._sql("SELECT value FROM {meta} WHERE key = %s"), (key,)).fetchone()
        return None if row is None else EncoderIdentity.from_json(bytes(row[0]), self._where())

    def _set_meta(self, conn: psycopg.Connection, key: str, value: str) -> None:
        conn.execute(
            self._sql(
                "INSERT INTO {meta} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ),
            (key, value.encode()),
        )

    def _check_encoder(self, conn: psycopg.Connection, record: bool = False) -> None:
        """Inside a transaction: the bound encoder is still the store's (``record``: write it if none is)."""
        if self._encoder is None:
            return
        stored = self._meta_identity(conn, META_KEY)
        check_identity(stored, self._encoder, self._where())
        if stored is None and record:
            conn.execute(
                self._sql("INSERT INTO {meta} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"),
                (META_KEY, self._encoder.to_json().encode()),
            )
            check_identity(self._meta_identity(conn, META_KEY), self._encoder, self._where())  # a racing writer

    def encoder_identity(self) -> EncoderIdentity | None:
        """The encoder that filled the store (None before the first vector); see memnets.store.identity."""
        with self._transaction() as conn:
            return self._meta_identity(conn, META_KEY)

    def bind_encoder(self, identity: EncoderIdentity) -> None:
        """As :meth:`memnets.store.archive.Archive.bind_encoder`: refuse another encoder's store, record with the first vector."""
        with self._transaction() as conn:
            stored = self._meta_identity(conn, META_KEY)
            check_identity(stored, identity, self._where())
            if stored is None and conn.execute(self._sql("SELECT 1 FROM {memories} LIMIT 1")).fetchone() is not None:
                log.warning(
                    "%s was filled before memnets recorded encoders; recording %s as its encoder",
                    self._where(),
                    identity.describe(),
                )
                self._set_meta(conn, META_KEY, identity.to_json())
        self._encoder = identity

    def reembed_start(self, identity: EncoderIdentity) -> str:
        """Begin or resume re-embedding to ``identity`` ("started", "resumed", "current"); workers share it."""
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memnets-reembed-{self.table}",))
            target = self._meta_identity(conn, TARGET_KEY)
            if target is not None and target.fingerprint == identity.fingerprint:
                return "resumed"
            conn.execute(self._sql("DELETE FROM {reembed}"))
            current = self._meta_identity(conn, META_KEY)
            if current is not None and current.fingerprint == identity.fingerprint:
                conn.execute(self._sql("DELETE FROM {meta} WHERE key = %s"), (TARGET_KEY,))
                return "current"
            self._set_meta(conn, TARGET_KEY, identity.to_json())
            return "started"

    _TODO = (
        "FROM {memories} m WHERE NOT EXISTS (SELECT 1 FROM {reembed} r "
        "WHERE r.owner = m.owner AND r.id = m.id AND r.version = m.version)"
    )

    @contextmanager
    def reembed_batch(self, size: int) -> Iterator[ReembedBatch]:
        """Claim up to ``size`` rows without a new vector (``FOR UPDATE SKIP LOCKED``: concurrent workers
        take other rows; writers of these rows wait for the batch) and commit their new vectors when
        the block ends, in the same transaction."""
        with self._transaction() as conn:
            records = self._claim_unembedded(conn, size)
            batch = ReembedBatch(
                [self._decode(r).content for r in records],
                [(r[0], r[1], r[9]) for r in records],
                [r[6] is None for r in records],
            )
            yield batch
            if batch.vectors is not None and records:
                with conn.cursor() as cursor:
                    cursor.executemany(
                        self._sql(
                            "INSERT INTO {reembed} (owner, id, version, embedding, chunks) VALUES (%s, %s, %s, %s, %s) "
                            "ON CONFLICT (owner, id) DO UPDATE SET version = excluded.version, "
                            "embedding = excluded.embedding, chunks = excluded.chunks"
                        ),
                        [
                            (*key, vector, to_blob(more))
                            for key, vector, more in zip(batch.keys, batch.vectors, batch.chunks)
                        ],
                    )

    def _claim_unembedded(self, conn, size: int) -> list:
        """Lock up to ``size`` rows that have no new vector yet, for this transaction.

        The claim's NOT EXISTS reads the snapshot its statement started with; a row another worker
        embedded and committed while this statement waited for or skipped its lock is then taken
        too (READ COMMITTED re-checks a locked row, not the subquery). Once the rows are locked, a
        fresh statement sees every such commit: those rows are dropped, and the claim is made again
        if none is left."""
        columns = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
        while True:
            records = conn.execute(
                self._sql(f"SELECT {columns} {self._TODO} ORDER BY m.owner, m.id LIMIT %s FOR UPDATE OF m SKIP LOCKED"),
                (size,),
            ).fetchall()
            if not records:
                return records
            done = set(
                conn.execute(
                    self._sql("SELECT owner, id, version FROM {reembed} WHERE owner = ANY(%s) AND id = ANY(%s)"),
                    ([r[0] for r in records], [r[1] for r in records]),
                ).fetchall()
            )
            fresh = [r for r in records if (r[0], r[1], r[9]) not in done]
            if fresh:
                return fresh

    def reembed_progress(self) -> tuple[int, int]:
        """(rows with their new vector, rows in the store)."""
        with self._transaction() as conn:
            total = conn.execute(self._sql("SELECT count(*) FROM {memories}")).fetchone()[0]
            left = conn.execute(self._sql(f"SELECT count(*) {self._TODO}")).fetchone()[0]
        return total - left, total

    def reembed_finish(self) -> bool:
        """Swap to the new vectors and encoder in one transaction if no row is left; True if it swapped.

        Writers wait during the swap (``SHARE ROW EXCLUSIVE``); readers keep reading the old vectors
        until it commits, except when the dim changes: the column and its HNSW index are then
        rebuilt under an exclusive lock, and searches wait for the swap.
        """
        columns = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
        with self._transaction() as conn:
            conn.execute(self._sql("LOCK TABLE {memories} IN SHARE ROW EXCLUSIVE MODE"))
            target = self._meta_identity(conn, TARGET_KEY)
            if target is None or conn.execute(self._sql(f"SELECT 1 {self._TODO} LIMIT 1")).fetchone() is not None:
                return False
            records = conn.execute(
                self._sql(
                    f"SELECT {columns}, r.embedding, r.chunks FROM {{memories}} m JOIN {{reembed}} r USING (owner, id)"
                )
            ).fetchall()
            params = []
            for record in records:
                vector = _array(record[-2])
                row = rowcodec.encode_row(self._decode(record[:-2]), vector, "PgVectorStore.reembed")
                row = dataclasses.replace(row, chunks=None if record[-1] is None else bytes(record[-1]))
                row = rowcodec.seal_row(row, self._cipher, self.archive_id, record[9] + 1)
                params.append((row.payload, vector, row.chunks, row.version, record[0], record[1]))
            resized = target.dim != self.dim
            if resized:  # another dim: a new column (and index) of that dim
                conn.execute(self._sql("DROP INDEX IF EXISTS {hnsw}"))
                conn.execute(self._sql("ALTER TABLE {memories} DROP COLUMN embedding"))
                conn.execute(
                    self._sql("ALTER TABLE {memories} ADD COLUMN embedding vector({dim})", dim=sql.Literal(target.dim))
                )
            with conn.cursor() as cursor:
                cursor.executemany(
                    self._sql(
                        "UPDATE {memories} SET payload = %s, embedding = %s, chunks = %s, version = %s "
                        "WHERE owner = %s AND id = %s"
                    ),
                    params,
                )
            if resized:
                conn.execute(self._sql("ALTER TABLE {memories} ALTER COLUMN embedding SET NOT NULL"))
                conn.execute(self._sql(_HNSW, m=sql.Literal(self.m), ef_construction=sql.Literal(self.ef_construction)))
            conn.execute(self._sql("DELETE FROM {reembed}"))
            conn.execute(self._sql("DELETE FROM {meta} WHERE key = %s"), (TARGET_KEY,))
            self._set_meta(conn, META_KEY, target.to_json())
            self._set_meta(conn, "dim", str(target.dim))
        self.dim = target.dim
        log.info("%s: re-embedded %d rows; now %s", self._where(), len(records), target.describe())
        return True

    def __repr__(self) -> str:
        state = "closed" if self._pool is None else "open"
        return f"PgVectorStore({self._where()!r}, dim={self.dim}, encrypted={self._cipher is not None}, {state})"

    def _decode(self, record: Sequence) -> Memory:
        owner, memory_id, t, last_access, importance, kind, superseded_by, payload, embedding, version, expires, ttl = (
            record[:12]
        )
        return rowcodec.decode_row(
            self._cipher,
            store_id=self.archive_id,
            version=version,
            owner=owner,
            memory_id=memory_id,
            t=as_utc(t).isoformat(),
            last_access=as_utc(last_access).isoformat(),
            importance=importance,
            kind=kind,
            superseded_by=superseded_by,
            payload=payload,
            vector=_array(embedding).astype("<f4").tobytes(),
            expires_at=None if expires is None else as_utc(expires).isoformat(),
            ttl=ttl,
            chunks=None if record[12] is None else bytes(record[12]),
        )


def _params(row: rowcodec.Row, vector: np.ndarray) -> tuple:
    """The parameters of ``_UPSERT`` for a sealed row and its vector."""
    return (
        row.owner,
        row.id,
        datetime.fromisoformat(row.t),
        datetime.fromisoformat(row.last_access),
        row.importance,
        row.kind,
        row.superseded_by,
        row.payload,
        vector,
        row.version,
        None if row.expires_at is None else datetime.fromisoformat(row.expires_at),
        row.ttl,
        row.chunks,
    )


def _with_chunks(row: rowcodec.Row, chunks: np.ndarray) -> rowcodec.Row:
    """``row`` with its further window vectors (a current memory's only: an older version keeps none)."""
    return dataclasses.replace(row, chunks=to_blob(chunks) if row.superseded_by is None else None)


def _array(embedding) -> np.ndarray:
    """A pgvector value as float32 numpy (the text loader gives arrays, the binary one Vector objects)."""
    return np.asarray(embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding, dtype=np.float32)


def _configure(conn: psycopg.Connection) -> None:
    """Set up a new pooled connection: pgvector's types, and back to idle (the pool requires it)."""
    register_vector(conn)
    conn.commit()


def _clear_conditions(owner: str, filters: MemoryFilter | None, now: datetime) -> tuple[str, list]:
    """SQL conditions (and parameters) for the owner's current rows, unexpired at ``now``, passing the
    clear-column part of ``filters``."""
    where, params = [f"owner = %s AND {_CURRENT} AND {_LIVE}"], [owner, now]
    if filters is not None:
        if filters.kinds is not None:
            where.append("kind = ANY(%s)")
            params.append(list(filters.kinds))
        if filters.since is not None:
            where.append("t >= %s")
            params.append(filters.since)
        if filters.until is not None:
            where.append("t < %s")
            params.append(filters.until)
    return " AND ".join(where), params
