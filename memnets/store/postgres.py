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
- Without a key: ``lexemes``, a generated ``tsvector`` column of the current rows' text, with a GIN index,
  which ``lexical_search`` ranks by BM25 over the owner's rows (:mod:`memnets.store.pg_search`).
- ``{table}_meta``: format version, dim, the store's random id, the key check, KDF salt and parameters.
  Opening checks the format: an older one is migrated in the opening transaction, a newer one is
  refused with a clear error (:mod:`memnets.store.pg_schema`).

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

A search without a filter sends its transaction's statements together and reads them once: one
round trip to the server (:mod:`memnets.store.pg_search`, which holds the search code).

Deletion: a DELETE is final for every connection once it commits (MVCC: no reader after the commit
sees the row, no index returns it). The bytes stay in dead tuples until (auto)vacuum reclaims them;
:meth:`PgVectorStore.compact` runs VACUUM on the table at once.

The store is the store core (:mod:`memnets.store.core`: writes, versions, the deletion ledger, expiry,
reads, re-embedding) handed its engine, :class:`~memnets.store.pg_search.PgEngine` (PostgreSQL's
statements, pgvector ranking, BM25), with what only the PostgreSQL store has, here: the connection pool
and its handling of an unreachable server, VACUUM and the HNSW index.
"""

from __future__ import annotations

import logging
import re
import select
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from memnets.extras import needs_extra
from memnets.store import core_encoding
from memnets.store import rows as rowcodec
from memnets.store.core import SqlStore
from memnets.store.crypto import RowCipher
from memnets.store.errors import StoreError, StoreUnavailableError
from memnets.store.identity import EncoderIdentity
from memnets.store.pg_dialect import PgDialect
from memnets.store.pg_schema import FORMAT_VERSION, check_extension, open_schema
from memnets.store.pg_search import EF_SEARCH_MAX, EXACT_BELOW, STREAM_BATCH, PgEngine
from memnets.store.queries_postgres import PgQueries
from memnets.store.reembed import ReembedBatch
from memnets.store.transaction import WriteTransaction

with needs_extra("the PostgreSQL store", "pgvector"):
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg_pool import ConnectionPool, PoolTimeout

__all__ = ["EF_SEARCH_MAX", "EXACT_BELOW", "FORMAT_VERSION", "UNREACHABLE_WAIT_S", "PgVectorStore"]

log = logging.getLogger(__name__)

_SCRUBS = ("full", "vacuum", "off")  # PgVectorStore(scrub=...): the upkeep after a deletion
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,40}")
# How long a call waits for a pooled connection while the server is known to be unreachable (the
# pool failed to connect, or a connection was lost), instead of the whole connect_timeout. Calls
# that run one after another each waited the whole timeout: the memory API's writer lock holds the
# store calls of one add at a time, so with the server down the n-th queued add was answered after
# n x connect_timeout (8 writers, connect_timeout 2: adds waited over 10 s). Now the first call
# waits connect_timeout and the ones queued behind it fail at once (n x this wait, 1.3 s for the
# server's 64 request threads); a connection the pool hands out again (it reconnects by itself in
# the background, and a ready connection is handed out in microseconds) ends the state.
UNREACHABLE_WAIT_S = 0.02


class PgVectorStore(SqlStore):
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
            when k is larger, up to that bound). 100, not pgvector's 40: at 100k memnets memories it lifts recall@10 from 0.92 to 0.97 for no measurable
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
        super().__init__(PgEngine(PgQueries(PgDialect(table))))
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
            check=_check,  # a connection broken by a server restart is replaced, not used
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

    def _init_schema(self, dim: int | None, key, connect_timeout: float) -> tuple[int, RowCipher | None, str, bytes]:
        """Create the tables in an empty database, or check format, dim and key of existing ones (migrating older formats)."""
        try:
            conn = psycopg.connect(self.url, connect_timeout=max(1, int(connect_timeout)), autocommit=True)
        except psycopg.OperationalError as error:
            raise self._unavailable(error) from None
        with conn:
            check_extension(conn, self._q, self._where())
            with conn.transaction():
                hnsw = {"m": self.m, "ef_construction": self.ef_construction}
                opened = open_schema(conn, self._q, dim, key, hnsw, self._where())
                self.supports_lexical_search = conn.execute(*self._q.lexemes_exist()).fetchone() is not None
                return opened

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection]:
        """A pooled connection inside one transaction (committed on success, rolled back on error).

        A lost or unreachable server (psycopg's OperationalError, AdminShutdown among them, or the
        pool's PoolTimeout) becomes StoreUnavailableError; the pool replaces broken connections, so
        the next call after the server is back works. Inside :meth:`atomic_write` it is a savepoint of
        the block's transaction, on its connection.
        """
        held = self._writes.current()
        if held is not None:
            with held.conn.transaction():
                yield held.conn
            return
        with self._connection() as conn, conn.transaction():
            yield conn

    _reading = _writing = _transaction  # the core's reads and writes: a pooled transaction each

    @contextmanager
    def _one_round_trip(self, conn: psycopg.Connection) -> Iterator[None]:
        """On an idle pooled connection: the statements of the block are sent together when it ends, as one
        transaction, in one round trip (psycopg's ``transaction()`` waits for its BEGIN, and so does the
        implicit one of a connection outside autocommit). Read the cursors' results after the block; an
        error in any statement rolls the transaction back and is raised when the block ends."""
        conn.autocommit = True  # BEGIN and COMMIT go in the pipeline, not waited for
        try:
            with conn.pipeline():
                conn.execute(*self._q.begin())
                yield
                conn.execute(*self._q.commit())
        finally:
            with suppress(psycopg.Error):  # a broken connection: the pool replaces it
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.rollback()
                conn.autocommit = False

    @contextmanager
    def _held_transaction(self, held: WriteTransaction) -> Iterator[None]:
        """atomic_write's transaction: one pooled connection for the whole block, kept on ``held`` (its advisory
        lock is the owner's write lock, see SqlStore._lock_writes)."""
        with self._connection() as conn, conn.transaction():
            held.conn = conn
            yield

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

    def _is_open(self) -> bool:
        return self._pool is not None

    def compact(self, *, full: bool = False) -> None:
        """VACUUM the table now (autovacuum does it later otherwise); ``full``: VACUUM FULL, a rewrite that
        leaves no byte of deleted rows in the table files (see ``scrub`` of the constructor)."""
        with self._connection() as conn:
            conn.autocommit = True  # VACUUM cannot run inside a transaction
            try:
                conn.execute(*self._q.vacuum(full))
            finally:
                conn.autocommit = False

    def _deleted(self, count: int) -> None:
        """After a deletion committed: the upkeep of ``scrub`` (when rows went)."""
        if count and self.scrub != "off":
            self.compact(full=self.scrub == "full")

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
            conn.execute(*self._q.maintenance_memory(maintenance_work_mem))
            self._create_hnsw(conn)
            conn.execute(*self._q.analyze())  # fresh statistics, or the planner may not pick the index

    def _create_hnsw(self, conn: psycopg.Connection) -> None:
        """(Re)create the HNSW index with this store's m and ef_construction."""
        conn.execute(*self._q.drop_hnsw())
        conn.execute(*self._q.create_hnsw(self.m, self.ef_construction))

    # ------------------------------------------------------------------ listing
    def _stream(self, conn: psycopg.Connection, query: str, params) -> Iterator:
        """A large read through a server-side cursor, fetched ``STREAM_BATCH`` rows per round trip."""
        with conn.cursor(name="memnets_listing") as cursor:
            cursor.itersize = STREAM_BATCH
            cursor.execute(query, params)
            yield from cursor

    # ------------------------------------------------------------------ re-embedding
    @contextmanager
    def reembed_batch(self, size: int) -> Iterator[ReembedBatch]:
        """Claim up to ``size`` rows without a new vector (``FOR UPDATE SKIP LOCKED``: concurrent workers
        take other rows; writers of these rows wait for the batch) and commit their new vectors when
        the block ends, in the same transaction."""
        with self._transaction() as conn:
            records = self._claim_unembedded(conn, size)
            batch = core_encoding.reembed_batch(self, records, ("owner", "id", "version"))
            yield batch
            if batch.vectors is not None and records:
                self._run_many(conn, self._q.save_reembedded(), core_encoding.reembedded(batch))

    def _claim_unembedded(self, conn, size: int) -> list:
        """Lock up to ``size`` rows that have no new vector yet, for this transaction.

        The claim's NOT EXISTS reads the snapshot its statement started with; a row another worker
        embedded and committed while this statement waited for or skipped its lock is then taken
        too (READ COMMITTED re-checks a locked row, not the subquery). Once the rows are locked, a
        fresh statement sees every such commit: those rows are dropped, and the claim is made again
        if none is left."""
        while True:
            records = conn.execute(*self._q.claim_todo(size)).fetchall()
            if not records:
                return records
            keys = [rowcodec.named(r) for r in records]
            claimed = self._q.reembedded_versions([k["owner"] for k in keys], [k["id"] for k in keys])
            done = set(conn.execute(*claimed).fetchall())
            fresh = [r for r, k in zip(records, keys) if (k["owner"], k["id"], k["version"]) not in done]
            if fresh:
                return fresh

    def _swap_vectors(self, conn: psycopg.Connection, target: EncoderIdentity, updates: list[tuple]) -> None:
        """The swap's writes (writers wait, ``SHARE ROW EXCLUSIVE``; readers keep the old vectors until it
        commits). Another dim: the column and its HNSW index are rebuilt under an exclusive lock, and
        searches wait for the swap."""
        resized = target.dim != self.dim
        if resized:  # another dim: a new column (and index) of that dim
            for statement in self._q.resize_embedding(target.dim):
                conn.execute(*statement)
        super()._swap_vectors(conn, target, updates)
        if resized:
            conn.execute(*self._q.embedding_required())
            self._create_hnsw(conn)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection pool. Safe to call twice."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _configure(conn: psycopg.Connection) -> None:
    """Set up a new pooled connection: pgvector's types, and back to idle (the pool requires it)."""
    register_vector(conn)
    conn.commit()


def _check(conn: psycopg.Connection) -> None:
    """The pool's check of an idle connection before it hands it out: raises if the server closed it.

    An idle connection receives nothing until its next statement, unless the server ended it (a restart,
    an administrator's terminate, an idle timeout): the FATAL message and the close are then waiting
    on its socket. Only then is psycopg_pool's own check run (an empty statement, which raises on a
    broken connection, so the pool replaces it). A ping on every hand-out cost a round trip per
    store call: on a loaded machine, a wait for the server process to be scheduled each time.
    """
    if _readable(conn.fileno()):
        ConnectionPool.check_connection(conn)


def _readable(fd: int) -> bool:
    """Whether something waits to be read on ``fd``, without waiting (poll: any fd number; select elsewhere)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])
