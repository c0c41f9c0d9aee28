"""The archive tier: a persistent, owner-scoped memory store on SQLite with a FAISS index beside it.

SQLite (embedded, one file under the directory the user names) is the source of truth for every
memory and its vector. The FAISS index is a cache of the vectors that can always be rebuilt from
the table, kept in step through a change log (:mod:`memnets.store.faiss_sync`).

How the pieces stay consistent (see docs/security.md for the reasoning):

- Every write is one SQLite transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``) in WAL mode with
  ``synchronous=FULL``: when ``add`` returns, the memory survives a killed process and a power cut.
- Deletions zero the freed bytes (``secure_delete``), return free pages to the file system
  (incremental vacuum), truncate the WAL (checkpoint) and drop the saved index files, so deleted
  text is gone from disk, not just hidden. A replace (upsert of an existing id) scrubs the same way.
- With a key, the memory's text and its structured fields are sealed with AES-GCM; owner, id,
  t, kind, importance, superseded_by and the vector stay in clear but are bound into the
  associated data together with the archive's random id and the row's version (incremented on
  every write of the row), so editing them, swapping ciphertexts between rows, copying a row
  into another archive, or putting back an older ciphertext of a rewritten row is detected and
  names the row (the row format is shared with the PostgreSQL store: :mod:`memnets.store.rows`).
  ``last_access`` is not bound (``touch`` does not re-seal).
- :func:`rotate_key` re-encrypts every row under a new key (and the current KDF parameters) in
  one SQLite transaction: a crash leaves the archive under exactly one of the two keys.
- Without a key, an FTS5 index of the current rows' text ranks them by their words (``lexical_search``,
  :mod:`memnets.store.sqlite_lexical`): kept in step by triggers in every write's transaction, merged
  by ``compact()`` (after every deletion or replace) so that no segment keeps a deleted row's terms.
- Older versions of a memory (rows with ``superseded_by`` set) stay in the table for ``history``
  but are kept out of the FAISS index, the listings and the counts.
- Filtered searches rank exactly, so a filter never shortens the result below k when k memories
  match (:mod:`memnets.store.archive_search`).

One connection per ``Archive``, shared by its threads under a re-entrant lock that also guards
the index; several processes may open the same directory (SQLite's locks plus ``busy_timeout``).

The archive is the store core (:mod:`memnets.store.core`: writes, versions, the deletion ledger,
expiry, reads, re-embedding) handed its engine, :class:`~memnets.store.archive_search.ArchiveEngine`
(SQLite's statements, FAISS and exact ranking, FTS5's bm25), with what only the embedded store has,
here: the connection and its transactions, its FAISS index (:class:`~memnets.store.faiss_sync.FaissIndex`,
an object it holds), scrubbing the file, key rotation. The schema, format migrations and re-sealing rows
are in :mod:`memnets.store.sqlite_schema`; the index files in :mod:`memnets.store.index_files`.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from memnets.store import core_encoding, sqlite_lexical
from memnets.store import rows as rowcodec
from memnets.store.archive_search import ArchiveEngine
from memnets.store.core import SqlStore
from memnets.store.crypto import DEFAULT_KDF, RowCipher
from memnets.store.disk_reserve import RESERVE_BYTES, DiskReserve, disk_full
from memnets.store.errors import StoreError, StoreKeyError, StoreNotFoundError
from memnets.store.faiss_sync import FaissIndex
from memnets.store.index_files import INDEX_AUTH, INDEX_DIR, INDEX_MARKER, IndexFolder
from memnets.store.queries_sqlite import SqliteQueries
from memnets.store.reembed import ReembedBatch
from memnets.store.sqlite_dialect import SqliteDialect
from memnets.store.sqlite_schema import (
    CHECKS,
    DB_FILE,
    FORMAT_VERSION,
    check_file,
    open_error,
    open_schema,
    read_only_error,
    rotate_rows,
    writable,
)
from memnets.store.transaction import WriteTransaction

__all__ = ["DB_FILE", "FORMAT_VERSION", "INDEX_AUTH", "INDEX_DIR", "INDEX_MARKER", "Archive", "rotate_key"]

log = logging.getLogger(__name__)


class Archive(SqlStore):
    """Persistent memory store: SQLite records and vectors, a FAISS index for search, owner-scoped reads.

    Args:
        directory: folder of the archive (created if missing); holds ``archive.sqlite3`` and ``index/``.
        dim: vector dimension. ``None`` opens an existing archive with the dim it was created with.
        key: encryption key for memory content: 16/24/32 raw bytes (AES-GCM) or a passphrase ``str``
            (scrypt at :data:`~memnets.store.crypto.DEFAULT_KDF`, its parameters stored in the archive;
            each open pays one derivation, ~0.3-3 s; raw keys pay none). An archive created with a key
            can only be opened with that key (or the one it was rotated to, :func:`rotate_key`), and one
            created without a key cannot be opened with one.
        index: the FaissRetriever kind ("auto", "flat", "hnsw", "ivf", "ivf-sq8" or a FAISS factory
            string). The default "auto" searches exactly below 50,000 memories of an owner and with
            IVF-Flat above (recall@10 0.99 at 1M, see docs/scaling.md); an archive saved with another
            kind rebuilds its index once on open.
        busy_timeout: seconds a write waits for another process's write lock before failing.
        check: what is verified on open (:func:`~memnets.store.sqlite_schema.check_file`): "quick"
            (default: SQLite's quick_check and the (owner, id) index against the table; one or two
            reads of the file), "full" (SQLite's integrity_check) or "off" (huge stores, whose
            reading on every open costs too much; check them with "full" now and then).
            A damaged file raises StoreCorruptError, a read-only folder StoreReadOnlyError.
        reserve: bytes of disk kept in the folder (the file ``disk_reserve``) so that a deletion runs
            on a full disk (:mod:`memnets.store.disk_reserve`; default 8 MiB); 0 keeps none (and
            removes a reserve left by an earlier open).

    Implements :class:`memnets.store.MemoryStore`. Upserting a memory whose (owner, id) already
    exists replaces it (content, vector and all). Memory ids are scoped to their owner: two owners
    may use the same id without seeing each other.
    """

    supports_local_state = True  # its folder holds the managers' state files (memnets.store.protocol.LocalState)
    _scrub_pending = False  # a compact() stopped by a full disk: close() runs it again

    def __init__(
        self,
        directory: str | os.PathLike,
        dim: int | None,
        *,
        key: bytes | str | None = None,
        index: str = "auto",
        busy_timeout: float = 30.0,
        check: str = "quick",
        reserve: int = RESERVE_BYTES,
    ) -> None:
        dim = rowcodec.check_dim(dim, "Archive")
        if check not in CHECKS:
            raise ValueError(f"Archive: check must be one of {CHECKS}, got {check!r}")
        if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
            raise ValueError(f"Archive: reserve must be a number of bytes >= 0, got {reserve!r}")
        self.directory = Path(directory)
        if dim is None and not (self.directory / DB_FILE).exists():  # a typo must not leave a folder behind
            raise StoreNotFoundError(f"Archive: {self.directory} holds no archive yet; give dim to create one")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise read_only_error(self.directory) from None
            raise
        if not writable(self.directory):
            raise read_only_error(self.directory)
        self.index_kind = index
        super().__init__(ArchiveEngine(SqliteQueries(SqliteDialect())))
        self._index = FaissIndex(self)  # the FAISS index of the current rows, synced by the change log
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._conn = self._connect(busy_timeout)
        try:
            check_file(self._conn, self.directory / DB_FILE, check)
            self._reserve = DiskReserve(self.directory, reserve)
            self.dim, self._cipher, self.archive_id, self._ledger_secret = self._init_schema(dim, key)
            with self._read() as conn:
                self.supports_lexical_search = sqlite_lexical.exists(conn)
            self._reserve.ensure()
            self._index_files = IndexFolder(self.directory, self.archive_id, self._cipher)
            self.index_source = self._index.open()  # "loaded" or "rebuilt": how the index came to be
        except BaseException:
            self._conn.close()
            self._conn = None
            self._index.close()
            raise

    # ------------------------------------------------------------------ opening
    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        path = self.directory / DB_FILE
        try:
            conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
            conn.execute(*self._q.incremental_vacuum_mode())  # only takes effect on a new, empty file
            mode = conn.execute(*self._q.wal_mode()).fetchone()[0]
        except sqlite3.DatabaseError as error:
            raise open_error(error, path) from None
        if mode.lower() != "wal":
            conn.close()
            raise StoreError(
                f"{path}: could not switch SQLite to WAL mode (got {mode!r}); is the folder on a network file system?"
            )
        # FULL (not NORMAL): in WAL mode NORMAL survives a killed process but may drop the last
        # commits on power loss; an agent told "stored" must find the memory after any crash.
        # secure_delete: deleted cells and pages are overwritten with zeros
        for statement in self._q.connection_settings(busy_timeout):
            conn.execute(*statement)
        return conn

    def _init_schema(self, dim: int | None, key: bytes | str | None) -> tuple[int, RowCipher | None, str, bytes]:
        """Create the schema in a new archive, or check format, dim and key of an existing one (and upgrade it)."""
        with self._write() as conn:
            return open_schema(conn, self.directory / DB_FILE, dim, key)

    def _rotate(self, key: bytes | str, kdf: dict, progress: Callable[[int, int], None] | None) -> int:
        """Re-seal every row under ``key`` in one transaction; see :func:`rotate_key`."""
        if self._cipher is None:
            raise StoreKeyError(f"{self.directory} is not encrypted; there is no key to rotate")
        cipher, key_meta = rowcodec.new_cipher(key, kdf)
        with self._lock:
            # the saved index is authenticated under the old key: drop it first, so that whichever key the
            # archive ends under, the next open rebuilds it quietly (close() saves it under the new key)
            self._index.drop_saved()
            with self._write() as conn:
                count = rotate_rows(conn, self._cipher, cipher, key_meta, self.archive_id, progress)
            self._cipher = self._index_files.cipher = cipher
            self.compact()  # the old ciphertexts leave the WAL and the free pages
        return count

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def _transaction(self, begin: tuple[str, list], *, writes: bool) -> Iterator[sqlite3.Connection]:
        """``begin`` ... COMMIT; inside a transaction already (atomic_write, or a search's one snapshot,
        whose thread holds the lock), that transaction: a savepoint of it where the block ``writes``
        (so a failed write undoes only its own rows), the transaction itself for a read."""
        conn = self._require_open()
        if conn.in_transaction:
            if writes:
                yield from self._savepoint(conn)
            else:
                yield conn
            return
        conn.execute(*begin)
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (disk full, I/O error)
                conn.execute(*self._q.rollback())
            else:
                # a rollback SQLite made by itself inside a write of the lexical index (FTS5) leaves the pager's
                # error for the connection's next read of a table, a "disk full" of nothing; this read takes it
                with suppress(sqlite3.OperationalError):
                    conn.execute(*self._q.data_version())
            raise
        conn.execute(*self._q.commit())

    def _savepoint(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute(*self._q.savepoint())
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                for statement in self._q.rollback_to_savepoint():
                    conn.execute(*statement)
            raise
        conn.execute(*self._q.release_savepoint())

    @contextmanager
    def _held_transaction(self, held: WriteTransaction) -> Iterator[None]:
        """atomic_write's transaction: ``BEGIN IMMEDIATE`` held, with the archive's lock, for the whole block.
        If it rolls back after a search synced the index with its writes, the index is rebuilt."""
        with self._lock:
            generation = self._index.generation
            try:
                with self._write():
                    yield
            except BaseException:
                if self._index.generation != generation:
                    self._index.rebuild()
                raise

    def _write(self):
        """One write transaction, taken at once (IMMEDIATE) so concurrent writers queue, never deadlock."""
        return self._transaction(self._q.begin(immediate=True), writes=True)

    def _read(self):
        """One read transaction: every statement inside sees the same snapshot."""
        return self._transaction(self._q.begin(immediate=False), writes=False)

    def _require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"archive {self.directory} is closed")
        return self._conn

    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read transaction under the archive's lock (the store core's reads)."""
        return self._locked(self._read)

    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction under the archive's lock (the store core's writes)."""
        return self._locked(self._write)

    @contextmanager
    def _locked(self, transaction) -> Iterator[sqlite3.Connection]:
        with self._lock, transaction() as conn:
            yield conn

    def _where(self) -> str:
        return str(self.directory)

    def _is_open(self) -> bool:
        return self._conn is not None

    # ------------------------------------------------------------------ after writes: the index and the disk
    def _written(self, scrub: bool) -> None:
        with self._lock:
            if scrub:  # the old text and vector must leave the disk as after a delete
                self._index.drop_saved()
                self.compact()
            self._index.sync()

    def _delete_rows(self, *deletion) -> int:
        """The deletion's transaction; on a full disk the reserve (:mod:`memnets.store.disk_reserve`) makes room."""
        with self._lock:
            try:
                return super()._delete_rows(*deletion)
            except sqlite3.OperationalError as error:
                if not disk_full(error) or not self._reserve.release():
                    raise
                self._require_open().execute(*self._q.checkpoint())  # the log's room, for the retry
                return super()._delete_rows(*deletion)

    def _deleted(self, count: int) -> None:
        with self._lock:
            if count:
                self._index.drop_saved()
                self.compact()
            self._reserve.ensure()
            self._index.sync(check_encoder=False)  # a deletion is right under any encoder

    # ------------------------------------------------------------------ scrubbing the file
    def compact(self) -> bool:
        """Merge the lexical index (where the archive has one, :func:`~memnets.store.sqlite_lexical.merge`),
        return free pages to the file system and fold the WAL into the database, truncating it.

        Called after every deletion or replace so deleted text leaves the disk. Returns False when another
        connection's open read kept the WAL from being truncated (it is then cleared at a later
        checkpoint, at the latest when the last connection closes), or when the disk is full (the
        checkpoint may need to grow the database file; it runs again at the next compact or close).
        """
        with self._lock:
            conn = self._require_open()
            try:
                # fold the WAL in first: on a nearly full disk, the vacuum's page moves need the room it held
                conn.execute(*self._q.checkpoint())
                if self.supports_lexical_search:
                    sqlite_lexical.merge(conn)  # no older segment keeps a deleted row's words
                conn.executescript(self._q.incremental_vacuum())  # execute() would free only one page per call
                busy, _, _ = conn.execute(*self._q.checkpoint()).fetchone()
            except sqlite3.OperationalError as error:
                if not disk_full(error):
                    raise
                # the deletion itself committed (gone for every reader); the scrub waits for room
                self._scrub_pending = True
                log.warning(
                    "%s: disk full; deleted rows are gone, but their zeroed pages (and their words in the "
                    "lexical index) leave the files only at the next compact() or close() with free space",
                    self.directory,
                )
                return False
            self._scrub_pending = False
            return busy == 0

    # ------------------------------------------------------------------ the FAISS index (memnets.store.faiss_sync)
    def rebuild_index(self) -> int:
        """Rebuild the FAISS index from the SQLite table and save it; returns how many vectors it holds."""
        return self._index.rebuild_and_save()

    def save_index(self) -> None:
        """Write the index and the generation it reflects, atomically replacing the previous files."""
        self._index.save()

    def index_size(self) -> int:
        """How many vectors the in-memory FAISS index holds after catching up (equals the table's row count)."""
        return self._index.size()

    def _changing(self, conn: sqlite3.Connection, where: str, params: Sequence) -> None:
        """Record, inside the caller's transaction, the rows matching ``where`` (about to change) in the index's log."""
        self._index.changing(conn, where, params)

    # ------------------------------------------------------------------ re-embedding
    @contextmanager
    def reembed_batch(self, size: int) -> Iterator[ReembedBatch]:
        """Up to ``size`` rows without a new vector; their vectors, once the caller saved them on the
        batch, are committed when the block ends (nothing is committed if it raises)."""
        d = self._dialect
        with self._reading() as conn:
            records = conn.execute(*self._q.todo_batch(size)).fetchall()
        batch = core_encoding.reembed_batch(self, records, ("key", "version"))
        yield batch
        if batch.vectors is None or not records:
            return
        payload = [
            (row, version, d.vector_param(vector), more)
            for row, version, vector, more in core_encoding.reembedded(batch)
        ]
        with self._writing() as conn:
            # rows rewritten or deleted since they were read are skipped: the next batch embeds their new version
            conn.executemany(self._q.save_reembedded(), payload)

    def _swapped(self) -> None:
        """After a re-embedding's swap: the index in the new space, the old vectors gone from the disk."""
        with self._lock:
            self._index.drop_saved()
            self._index.rebuild()
            self.compact()

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Save the index (if it changed), close the database and the index (its background upkeep
        stopped and waited for), after the scrub a full disk stopped where it is still pending. Safe to
        call twice."""
        with self._lock:
            if self._conn is None:
                return
            try:
                if self._scrub_pending:
                    self.compact()
                self._index.save()
            finally:
                self._conn.close()
                self._conn = None
                self._index.close()


def rotate_key(
    directory: str | os.PathLike,
    old_key: bytes | str,
    new_key: bytes | str,
    *,
    kdf: dict = DEFAULT_KDF,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Re-encrypt the archive at ``directory`` in place from ``old_key`` to ``new_key``; returns how many rows.

    Every row's payload is opened with the old key and sealed again with the new one, and the
    archive's salt, KDF parameters (``kdf``, default: :data:`memnets.store.crypto.DEFAULT_KDF`)
    and key check are replaced, all in one SQLite transaction: a crash or a kill at any point
    leaves the archive readable with exactly one of the two keys (the old one until the commit,
    the new one after). Afterwards the old ciphertexts are scrubbed from the file (checkpoint,
    secure_delete) and the index files are saved again, authenticated under the new key.
    Rotating to the same passphrase re-derives its key with a new salt and ``kdf``: the way to
    raise the KDF cost of an existing archive. Copies of the folder taken before (backups) stay
    readable with the old key. ``progress(done, total)`` is called as rows are re-sealed.
    Other processes may keep the archive open; their writes wait (busy_timeout) for the
    transaction, but they hold the old key and must reopen with the new one.
    """
    if old_key is None or new_key is None:
        raise ValueError(
            "rotate_key: old_key and new_key are both required (an archive without a key has none to rotate)"
        )
    with Archive(directory, None, key=old_key) as archive:
        count = archive._rotate(new_key, kdf, progress)
    log.info("%s: %d rows re-encrypted under the new key", directory, count)
    return count
