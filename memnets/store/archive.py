"""The archive tier: a persistent, owner-scoped memory store on SQLite with a FAISS index beside it.

SQLite (embedded, one file under the directory the user names) is the source of truth for every
memory and its vector. The FAISS index (:class:`~memnets.retrieval.faiss_retriever.FaissRetriever`)
is a cache of the vectors that can always be rebuilt from the table.

How the pieces stay consistent (see docs/security.md for the reasoning):

- Every write is one SQLite transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``) in WAL mode with
  ``synchronous=FULL``: when ``add`` returns, the memory survives a killed process and a power cut.
- Every write that changes which vectors exist appends the touched row numbers to a ``changes``
  table in the same transaction. Its highest sequence number is the archive's *generation*.
  Before each search the in-memory index replays the changes it has not seen, so writes from
  other threads and other processes are visible and nothing half-written is ever indexed.
- The index is saved on ``close`` together with the generation it reflects. On open it is loaded
  only when that generation equals the database's and its size matches the table; otherwise (a
  crash after the last save, a deletion, a foreign or corrupt file) it is rebuilt from SQLite.
- Row numbers (``AUTOINCREMENT``) are never reused, so a stale index can never map an old vector
  to a different memory; every read also re-checks the owner in SQL.
- Deletions zero the freed bytes (``secure_delete``), return free pages to the file system
  (incremental vacuum), truncate the WAL (checkpoint) and drop the saved index files, so deleted
  text is gone from disk, not just hidden.
- With a key, the memory's text and its structured fields are sealed with AES-GCM; owner, id,
  t, kind, importance, superseded_by and the vector stay in clear but are bound into the
  associated data together with the archive's random id and the row's version (incremented on
  every write of the row), so editing them, swapping ciphertexts between rows, copying a row
  into another archive, or putting back an older ciphertext of a rewritten row is detected and
  names the row (the row format is shared with the PostgreSQL store: :mod:`memnets.store.rows`).
  ``last_access`` is not bound (``touch`` does not re-seal).
- A replace (upsert of an existing id) scrubs like a delete: the old text and vector leave the
  SQLite file (secure_delete + checkpoint) and the saved index files are dropped.
- The saved index files are authenticated before FAISS parses any of them (an HMAC under a key
  derived from the archive key, or a checksum without one; :mod:`memnets.store.index_files`). A
  file that fails makes the open rebuild the index from SQLite and say so (a warning, and
  ``index_source == "rebuilt:untrusted"``).
- :func:`rotate_key` re-encrypts every row under a new key (and the current KDF parameters) in
  one SQLite transaction: a crash leaves the archive under exactly one of the two keys.
- Older versions of a memory (rows with ``superseded_by`` set) stay in the table for ``history``
  but are kept out of the FAISS index, the listings and the counts.
- Filtered searches rank exactly: SQL selects the owner's current rows that pass the clear-column
  conditions (kind, time range), their vectors are scored with one matrix product, and rows are
  decoded best first, metadata conditions checked on the decoded (decrypted) record, until k
  match. So a filter never shortens the result below k when k memories match.

One connection per ``Archive``, shared by its threads under a re-entrant lock that also guards
the index; several processes may open the same directory (SQLite's locks plus ``busy_timeout``).

This module is the Archive itself: the connection, the change-log sync of the index, reads and
writes. The SQLite schema, format migrations and re-sealing rows (key rotation) are in
:mod:`memnets.store.sqlite_schema`; sealing, checking and saving the index files in
:mod:`memnets.store.index_files`.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Self

import numpy as np

import memnets.timeutil as timeutil
from memnets.progress import track
from memnets.records import Memory
from memnets.retrieval.faiss_retriever import FaissRetriever
from memnets.store import rows as rowcodec
from memnets.store.chunks import best_scores, check_chunks, from_blob, merge, to_blob
from memnets.store.crypto import DEFAULT_KDF, RowCipher
from memnets.store.disk_reserve import RESERVE_BYTES, DiskReserve
from memnets.store.errors import StoreError, StoreIntegrityError, StoreKeyError
from memnets.store.filters import MemoryFilter
from memnets.store.identity import META_KEY, TARGET_KEY, EncoderIdentity, check_identity
from memnets.store.index_files import INDEX_AUTH, INDEX_DIR, INDEX_MARKER, IndexFolder, UntrustedIndex
from memnets.store.reembed import ReembedBatch
from memnets.store.sqlite_schema import (
    CHECKS,
    COLUMNS,
    CURRENT,
    DB_FILE,
    FORMAT_VERSION,
    LIVE,
    check_file,
    chunks,
    open_error,
    open_schema,
    read_only_error,
    rotate_rows,
    writable,
)
from memnets.timeutil import as_utc

__all__ = ["DB_FILE", "FORMAT_VERSION", "INDEX_AUTH", "INDEX_DIR", "INDEX_MARKER", "Archive", "rotate_key"]

CHANGELOG_KEEP = 100_000  # change-log rows kept for other processes to catch up; older ones force a rebuild
_REBUILD_PROGRESS_FROM = 50_000  # show a progress bar when rebuilding at least this many vectors
log = logging.getLogger(__name__)


class Archive:
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
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise read_only_error(self.directory) from None
            raise
        if not writable(self.directory):
            raise read_only_error(self.directory)
        self.index_kind = index
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._encoder: EncoderIdentity | None = None  # the encoder bound by bind_encoder (None: unchecked)
        self._conn = self._connect(busy_timeout)
        try:
            check_file(self._conn, self.directory / DB_FILE, check)
            self._reserve = DiskReserve(self.directory, reserve)
            self.dim, self._cipher, self.archive_id, self._ledger_secret = self._init_schema(dim, key)
            self._reserve.ensure()
            self._index_files = IndexFolder(self.directory, self.archive_id, self._cipher)
            self._retriever: FaissRetriever
            self._generation = 0  # the change-log position the in-memory index reflects
            self._saved_generation = -1  # the generation of the index files on disk (-1: none/unknown)
            self.index_source = self._open_index()  # "loaded" or "rebuilt": how the index came to be
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    # ------------------------------------------------------------------ opening
    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        path = self.directory / DB_FILE
        try:
            conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only takes effect on a new, empty file
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.DatabaseError as error:
            raise open_error(error, path) from None
        if mode.lower() != "wal":
            conn.close()
            raise StoreError(
                f"{path}: could not switch SQLite to WAL mode (got {mode!r}); is the folder on a network file system?"
            )
        # FULL (not NORMAL): in WAL mode NORMAL survives a killed process but may drop the last
        # commits on power loss; an agent told "stored" must find the memory after any crash.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA secure_delete = ON")  # deleted cells and pages are overwritten with zeros
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
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
            self._drop_saved_index()
            with self._write() as conn:
                count = rotate_rows(conn, self._cipher, cipher, key_meta, self.archive_id, progress)
            self._cipher = self._index_files.cipher = cipher
            self.compact()  # the old ciphertexts leave the WAL and the free pages
        return count

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        conn = self._require_open()
        conn.execute(begin)
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (disk full, I/O error)
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction, taken at once (IMMEDIATE) so concurrent writers queue, never deadlock."""
        return self._transaction("BEGIN IMMEDIATE")

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        """One read transaction: every statement inside sees the same snapshot."""
        return self._transaction("BEGIN")

    def _require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"archive {self.directory} is closed")
        return self._conn

    # ------------------------------------------------------------------ the index
    def _db_generation(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
        return int(row[0]) if row else 0

    def _open_index(self) -> str:
        """Load the saved index when it reflects the current generation, else rebuild it from SQLite."""
        with self._read() as conn:
            generation = self._db_generation(conn)
            count = conn.execute(f"SELECT count(*) FROM memories WHERE {CURRENT}").fetchone()[0]
        expected = {"generation": generation, "count": count, "dim": self.dim, "index": self.index_kind}
        try:
            retriever = self._index_files.load(expected)
        except UntrustedIndex as error:
            log.warning(
                "%s: the saved index files failed their check (%s); rebuilding the index from SQLite",
                self._index_files.folder,
                error,
            )
            self._rebuild()
            return "rebuilt:untrusted"
        if retriever is not None and len(retriever) == count and retriever.dim == self.dim:
            self._retriever, self._generation = retriever, generation
            self._saved_generation = generation
            self._sync()
            return "loaded"
        self._rebuild()
        return "rebuilt"

    def _rebuild(self) -> None:
        """A fresh index of every vector in the table, at one consistent snapshot."""
        retriever = FaissRetriever(self.dim, index=self.index_kind)
        with self._read() as conn:
            generation = self._db_generation(conn)
            total = conn.execute(f"SELECT count(*) FROM memories WHERE {CURRENT}").fetchone()[0]
            rows = conn.execute(f"SELECT row, owner, vector FROM memories WHERE {CURRENT} ORDER BY owner, row")
            with track(
                total=total, desc="rebuilding memory index", unit="mem", disable=total < _REBUILD_PROGRESS_FROM
            ) as progress:
                for owner, ids, vectors in _group_by_owner(rows, self.dim):
                    retriever.add(ids, vectors, owner)
                    progress.update(len(ids))
        self._retriever, self._generation = retriever, generation

    def _sync(self, check_encoder: bool = True) -> None:
        """Replay the changes this process's index has not seen (its own writes and other processes'),
        first checking (``check_encoder``) that no re-embedding elsewhere moved the archive to another encoder."""
        with self._read() as conn:
            generation = self._db_generation(conn)
            if generation == self._generation:
                return
            if check_encoder:
                self._check_encoder(conn)
            if int(conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()[0]) != self.dim:
                return  # re-embedded elsewhere to another dim: this index stays in the old space (to be reopened)
            pruned = conn.execute("SELECT value FROM meta WHERE key = 'pruned_through'").fetchone()
            if pruned is not None and self._generation < int(pruned[0]):
                changed = None  # the log no longer reaches back to our position
            else:
                changed = [
                    r[0]
                    for r in conn.execute(
                        "SELECT DISTINCT row FROM changes WHERE seq > ? AND seq <= ?", (self._generation, generation)
                    )
                ]
                present = conn.execute(
                    f"SELECT row, owner, vector FROM memories WHERE {CURRENT} AND row IN "
                    "(SELECT row FROM changes WHERE seq > ? AND seq <= ?) ORDER BY owner, row",
                    (self._generation, generation),
                ).fetchall()
        if changed is None:
            self._rebuild()
            return
        self._retriever.remove([str(row) for row in changed], missing_ok=True)
        for owner, ids, vectors in _group_by_owner(present, self.dim):
            self._retriever.add(ids, vectors, owner)
        self._generation = generation

    def _log_changes(self, conn: sqlite3.Connection, where: str, params: Sequence) -> None:
        """Record, inside the caller's transaction, the rows matching ``where`` (about to change)."""
        conn.execute(f"INSERT INTO changes (row) SELECT row FROM memories WHERE {where}", params)
        self._prune_changes(conn)

    def _prune_changes(self, conn: sqlite3.Connection) -> None:
        """Keep the change log near CHANGELOG_KEEP rows; a process further behind rebuilds its index."""
        generation = self._db_generation(conn)
        oldest = conn.execute("SELECT min(seq) FROM changes").fetchone()[0]
        if oldest is not None and generation - oldest > CHANGELOG_KEEP * 3 // 2:
            cutoff = generation - CHANGELOG_KEEP
            conn.execute("DELETE FROM changes WHERE seq <= ?", (cutoff,))
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('pruned_through', ?)", (cutoff,))

    def rebuild_index(self) -> int:
        """Rebuild the FAISS index from the SQLite table and save it; returns how many vectors it holds."""
        with self._lock:
            self._rebuild()
            self._saved_generation = -1
            self.save_index()
            return len(self._retriever)

    def save_index(self) -> None:
        """Write the index and the generation it reflects, atomically replacing the previous files."""
        with self._lock:
            self._sync(check_encoder=False)  # saving what this process holds is no search
            if self._saved_generation == self._generation:
                return
            with self._read() as conn:
                count = conn.execute(f"SELECT count(*) FROM memories WHERE {CURRENT}").fetchone()[0]
                if self._db_generation(conn) != self._generation or count != len(self._retriever):
                    return  # another process wrote meanwhile; the next open rebuilds or a later save wins
            marker = {"generation": self._generation, "count": count, "dim": self.dim, "index": self.index_kind}
            if not self._index_files.save(self._retriever, marker):
                return  # another process saved or deleted at the same moment; the next open decides
            with self._read() as conn:
                if self._db_generation(conn) != self._generation:
                    # another process wrote (maybe deleted) while we saved: these files are already
                    # stale and might hold a deleted vector, so do not leave them on disk
                    self._drop_saved_index()
                    return
            self._saved_generation = self._generation

    def _drop_saved_index(self) -> None:
        """Delete the index files on disk (they hold vectors of deleted memories); the next open rebuilds."""
        self._index_files.drop()
        self._saved_generation = -1

    # ------------------------------------------------------------------ writes
    def upsert(self, memories: Sequence[Memory], vectors, *, chunks=None) -> None:
        """Store memories with their vectors [N, dim] in one transaction (all or nothing).

        A memory whose (owner, id) exists already is replaced; over an expired row not swept yet, the
        expired memory's older versions go too (:meth:`_drop_expired_histories`). Raises InvalidMemoryError, naming
        the memory, for empty/whitespace content, text that is not valid Unicode, a vector with
        NaN/inf or of the wrong dim, a repeated (owner, id) in the batch, or unserialisable metadata.
        Content of any length is stored whole; ``chunks`` (one array [m, dim] per memory) are the
        vectors of a long memory's further windows (:mod:`memnets.store.chunks`; kept for current
        memories only, none given: none kept).
        """
        memories, array = rowcodec.check_batch(memories, vectors, self.dim, "Archive.upsert")
        extra = check_chunks(chunks, len(memories), self.dim, "Archive.upsert")
        rows = [
            _with_chunks(rowcodec.encode_row(memory, vector, "Archive.upsert"), more)
            for memory, vector, more in zip(memories, array, extra)
        ]
        if not rows:
            return
        with self._lock:
            replaced = 0
            with self._write() as conn:
                self._check_encoder(conn, record=True)
                self._drop_expired_histories(conn, rows)
                for row in rows:
                    stored = conn.execute(
                        "SELECT version FROM memories WHERE owner = ? AND id = ?", (row.owner, row.id)
                    ).fetchone()
                    replaced += stored is not None
                    row = rowcodec.seal_row(row, self._cipher, self.archive_id, 1 if stored is None else stored[0] + 1)
                    conn.execute(_UPSERT, vars(row))  # an update keeps the row number: log it afterwards
                    self._log_changes(conn, "owner = ? AND id = ?", (row.owner, row.id))
                    if stored is not None:  # a pending re-embedding's vector of the old text goes with it
                        self._drop_reembedded(conn, "owner = ? AND id = ?", (row.owner, row.id))
            if replaced:  # the old text and vector must leave the disk as after a delete
                self._drop_saved_index()
                self.compact()
            self._sync()

    def _drop_expired_histories(self, conn: sqlite3.Connection, rows: Sequence[rowcodec.Row]) -> None:
        """Inside an upsert's transaction, before it writes: a current row written over an expired one (not
        swept yet) takes a dead memory's id, so that memory's older versions go, as the sweep would have
        taken them: the new memory starts without them (no one reads another memory's history as its own)."""
        now = timeutil.now().timestamp()
        for row in rows:
            if (
                row.superseded_by is None
                and conn.execute(
                    "SELECT 1 FROM memories WHERE owner = ? AND id = ? AND expires_epoch <= ?", (row.owner, row.id, now)
                ).fetchone()
            ):
                versions = "owner = ? AND superseded_by = ?"
                self._log_changes(conn, versions, (row.owner, row.id))
                self._drop_reembedded(conn, versions, (row.owner, row.id))
                conn.execute(f"DELETE FROM memories WHERE {versions}", (row.owner, row.id))

    def new_version(self, memory: Memory, vector, *, chunks=None) -> Memory:
        """Make ``memory`` the current version of its (owner, id), keeping the current one as history: one atomic step.

        Inside one ``BEGIN IMMEDIATE`` transaction (the write lock is taken before anything is
        read, so concurrent calls from any thread or process queue): the current row is copied to
        a new row ``{id}~{n}`` superseded by ``id`` (n: the next free version number) and
        ``memory`` with ``vector`` [dim] is written over it. Returns that older version. KeyError
        when the owner has no current memory ``id`` (never stored, deleted, or an older version),
        so a deletion is never undone by an update. ``chunks`` [m, dim]: the new text's further
        windows (the older version keeps none). Like every write, it checks the bound encoder inside
        its transaction: after a re-embedding swapped the archive to another encoder (another process,
        or another handle), EncoderMismatchError, and nothing is written.
        """
        array = rowcodec.check_new_version(memory, vector, self.dim, "Archive.new_version")
        extra = check_chunks(None if chunks is None else [chunks], 1, self.dim, "Archive.new_version")[0]
        new = _with_chunks(rowcodec.encode_row(memory, array, "Archive.new_version"), extra)
        with self._lock:
            with self._write() as conn:
                self._check_encoder(conn)  # a re-embedding swapped encoders elsewhere: write nothing
                record = conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE owner = ? AND id = ? AND {CURRENT} AND {LIVE}",
                    (new.owner, new.id, timeutil.now().timestamp()),
                ).fetchone()
                if record is None:
                    raise KeyError(f"Archive.new_version: owner {new.owner!r} has no current memory {new.id!r}")
                count = conn.execute(
                    "SELECT count(*) FROM memories WHERE owner = ? AND superseded_by = ?", (new.owner, new.id)
                ).fetchone()[0]
                older = rowcodec.older_version(
                    self._decode(record),
                    count,
                    lambda memory_id: (
                        conn.execute(
                            "SELECT 1 FROM memories WHERE owner = ? AND id = ?", (new.owner, memory_id)
                        ).fetchone()
                        is not None
                    ),
                )
                old = rowcodec.encode_row(older, _unpack_vector(record[8], self.dim, older.id), "Archive.new_version")
                for row in (
                    rowcodec.seal_row(old, self._cipher, self.archive_id, 1),
                    rowcodec.seal_row(new, self._cipher, self.archive_id, record[10] + 1),
                ):
                    conn.execute(_UPSERT, vars(row))
                self._log_changes(conn, "owner = ? AND id = ?", (new.owner, new.id))  # its vector changed
            self._sync()
        return older

    def touch(self, ids: Iterable[str], owner: str, when: datetime) -> int:
        """Set last_access of the owner's memories with these ids; returns how many were updated."""
        ids = rowcodec.check_ids(ids, "Archive.touch")
        rowcodec.check_owner(owner, "Archive.touch")
        when = as_utc(when, "Archive.touch: when")
        with self._lock, self._write() as conn:
            return sum(
                conn.execute(
                    "UPDATE memories SET last_access = ? WHERE owner = ? AND id = ?", (when.isoformat(), owner, i)
                ).rowcount
                for i in ids
            )

    def refresh_expiry(self, ids: Iterable[str], owner: str, now: datetime) -> int:
        """Move the expiry of the owner's unexpired memories with these ids and a TTL to ``now + ttl``; returns how many."""
        ids = rowcodec.check_ids(ids, "Archive.refresh_expiry")
        rowcodec.check_owner(owner, "Archive.refresh_expiry")
        now = as_utc(now, "Archive.refresh_expiry: now")
        with self._lock, self._write() as conn:
            refreshed = 0
            for chunk in chunks(ids, 500):
                rows = conn.execute(
                    f"SELECT row, ttl FROM memories WHERE owner = ? AND id IN ({','.join('?' * len(chunk))}) "
                    f"AND ttl IS NOT NULL AND {LIVE}",
                    [owner, *chunk, now.timestamp()],
                ).fetchall()
                for row, ttl in rows:
                    expires = now + timedelta(seconds=ttl)
                    conn.execute(
                        "UPDATE memories SET expires_at = ?, expires_epoch = ? WHERE row = ?",
                        (expires.isoformat(), expires.timestamp(), row),
                    )
                refreshed += len(rows)
            return refreshed

    def expired(self, now: datetime, owner: str | None = None) -> list[tuple[str, str]]:
        """(owner, id) of every stored row (older versions too) expired at ``now``, of one owner or all, sorted.

        What a sweep deletes; every read already skips them.
        """
        now = as_utc(now, "Archive.expired: now").timestamp()
        where, params = "expires_epoch <= ?", [now]
        if owner is not None:
            rowcodec.check_owner(owner, "Archive.expired")
            where, params = "owner = ? AND expires_epoch <= ?", [owner, now]
        with self._lock, self._read() as conn:
            return [
                tuple(r)
                for r in conn.execute(f"SELECT owner, id FROM memories WHERE {where} ORDER BY owner, id", params)
            ]

    def delete(self, ids: Iterable[str], owner: str) -> int:
        """Delete the owner's memories with these ids and their older versions (others' are untouched); returns how many rows."""
        return self._delete_ids(ids, owner, "Archive.delete")

    def delete_expired(self, id: str, owner: str, now: datetime, *, with_ids: Iterable[str] = ()) -> int:
        """The expiry sweep's deletion: the owner's memory ``id``, expired at ``now``, with ``with_ids`` (what
        goes with it: its versions, derived memories) and their older versions; returns how many rows.

        Only while ``id`` is still expired at ``now``, checked in the deletion's own transaction: a
        memory put again or refreshed by another writer after the sweep listed it is kept, with
        everything that would have gone with it (0 rows, no tombstone).
        """
        now = as_utc(now, "Archive.delete_expired: now").timestamp()
        guard = ("owner = ? AND id = ? AND expires_epoch <= ?", [owner, id, now])
        return self._delete_ids(dict.fromkeys([id, *with_ids]), owner, "Archive.delete_expired", guard=guard)

    def _delete_ids(self, ids: Iterable[str], owner: str, where: str, guard: tuple[str, Sequence] | None = None) -> int:
        """:meth:`delete` (``where`` names the caller in errors); ``guard``: as in :meth:`_delete_rows`."""
        ids = rowcodec.check_ids(ids, where)
        rowcodec.check_owner(owner, where)
        return self._delete_where(
            [(f"owner = ? AND id IN ({','.join('?' * len(chunk))})", [owner, *chunk]) for chunk in chunks(ids, 500)],
            tombstones=[(owner, i, None) for i in ids],
            guard=guard,
        )

    def delete_owner(self, owner: str) -> int:
        """Delete every memory of an owner; returns how many."""
        rowcodec.check_owner(owner, "Archive.delete_owner")
        return self._delete_where([("owner = ?", [owner])], tombstones=[(owner, None, None)], erase_owner=owner)

    def purge_older_than(self, cutoff: datetime, owner: str | None = None) -> int:
        """Delete memories created (``t``) before ``cutoff`` with their older versions, of one owner or of all; returns how many.

        Naive datetimes, stored or given, are read as UTC.
        """
        cutoff_epoch = as_utc(cutoff, "Archive.purge_older_than: cutoff").timestamp()
        if owner is None:
            return self._delete_where([("t_epoch < ?", [cutoff_epoch])], tombstones=[(None, None, cutoff_epoch)])
        rowcodec.check_owner(owner, "Archive.purge_older_than")
        return self._delete_where(
            [("owner = ? AND t_epoch < ?", [owner, cutoff_epoch])], tombstones=[(owner, None, cutoff_epoch)]
        )

    def _delete_where(
        self,
        clauses: Sequence[tuple[str, Sequence]],
        tombstones: Sequence[tuple] = (),
        erase_owner: str | None = None,
        guard: tuple[str, Sequence] | None = None,
    ) -> int:
        """Delete the rows matching any (where, params) clause and the older versions of the current ones
        among them, in one transaction (with the deletion's ``tombstones``, see :meth:`deleted_since`),
        then scrub the disk. On a full disk the reserve (:mod:`memnets.store.disk_reserve`) makes room.
        ``erase_owner``: the deletion takes every row of this owner, so the owner's earlier tombstones
        go too (the new one covers them), leaving one row with no id. ``guard``: see :meth:`_delete_rows`."""
        with self._lock:
            try:
                deleted = self._delete_rows(clauses, tombstones, erase_owner, guard)
            except sqlite3.OperationalError as error:
                if getattr(error, "sqlite_errorname", "") != "SQLITE_FULL" or not self._reserve.release():
                    raise
                self._require_open().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log's room, for the retry
                deleted = self._delete_rows(clauses, tombstones, erase_owner, guard)
            if deleted:
                self._drop_saved_index()
                self.compact()
            self._reserve.ensure()
            self._sync(check_encoder=False)  # a deletion is right under any encoder
            return deleted

    def _delete_rows(
        self,
        clauses: Sequence[tuple[str, Sequence]],
        tombstones: Sequence[tuple],
        erase_owner: str | None,
        guard: tuple[str, Sequence] | None = None,
    ) -> int:
        """The transaction of :meth:`_delete_where`; returns how many rows it deleted. ``guard`` (where,
        params): nothing is deleted unless a row matches it inside the transaction."""
        with self._lock:
            deleted = 0
            with self._write() as conn:
                if (
                    guard is not None
                    and conn.execute(f"SELECT 1 FROM memories WHERE {guard[0]}", guard[1]).fetchone() is None
                ):
                    return 0
                stones = [rowcodec.ledger_row(self._ledger_secret, *stone) for stone in tombstones]
                if erase_owner is not None and _has_ledger(conn):
                    conn.execute("DELETE FROM deletions WHERE owner = ?", (stones[0][0],))
                _record_tombstones(conn, stones)
                for where, params in clauses:
                    replaced = conn.execute(
                        f"SELECT owner, id FROM memories WHERE {where} AND {CURRENT}", params
                    ).fetchall()
                    self._log_changes(conn, where, params)
                    self._drop_reembedded(conn, where, params)
                    deleted += conn.execute(f"DELETE FROM memories WHERE {where}", params).rowcount
                    for owner, ids in _group_pairs(replaced):
                        for chunk in chunks(ids, 500):
                            versions = f"owner = ? AND superseded_by IN ({','.join('?' * len(chunk))})"
                            self._log_changes(conn, versions, [owner, *chunk])
                            self._drop_reembedded(conn, versions, [owner, *chunk])
                            deleted += conn.execute(f"DELETE FROM memories WHERE {versions}", [owner, *chunk]).rowcount
            return deleted

    def compact(self) -> bool:
        """Return free pages to the file system and fold the WAL into the database, truncating it.

        Called after every deletion so deleted text leaves the disk. Returns False when another
        connection's open read kept the WAL from being truncated (it is then cleared at a later
        checkpoint, at the latest when the last connection closes), or when the disk is full (the
        checkpoint may need to grow the database file; it runs again at the next compact or close).
        """
        with self._lock:
            conn = self._require_open()
            try:
                # fold the WAL in first: on a nearly full disk, the vacuum's page moves need the room it held
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.executescript("PRAGMA incremental_vacuum;")  # execute() would free only one page per call
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError as error:
                if getattr(error, "sqlite_errorname", "") != "SQLITE_FULL":
                    raise
                # the deletion itself committed (gone for every reader); the scrub waits for room
                log.warning(
                    "%s: disk full; deleted rows are gone, but their zeroed pages leave the files only "
                    "at the next compact() or close() with free space",
                    self.directory,
                )
                return False
            return busy == 0

    # ------------------------------------------------------------------ reads (all owner-scoped)
    def get(self, ids: Iterable[str], owner: str, *, include_expired: bool = False) -> list[Memory]:
        """The owner's memories with these ids (older versions included), in the order asked; ids not found (or another owner's) are skipped.

        ``include_expired``: expired rows not swept yet too, which hold their ids until the sweep: what
        a check of who may use an id must see (the server's token scopes), never a read's answer.
        """
        ids = rowcodec.check_ids(ids, "Archive.get")
        rowcodec.check_owner(owner, "Archive.get")
        live, now = ("", []) if include_expired else (f" AND {LIVE}", [timeutil.now().timestamp()])
        found: dict[str, Memory] = {}
        with self._lock, self._read() as conn:
            for chunk in chunks(ids, 500):
                marks = ",".join("?" * len(chunk))
                for record in conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE owner = ? AND id IN ({marks}){live}", [owner, *chunk, *now]
                ):
                    found[record[2]] = self._decode(record)
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def vectors(self, ids: Iterable[str], owner: str) -> np.ndarray:
        """The stored vectors [N, dim] of the owner's memories with these ids (in order; all must exist).

        Expired rows not yet swept still answer (callers ask for ids a read just returned, and a
        vector holds no text).
        """
        ids = rowcodec.check_ids(ids, "Archive.vectors")
        rowcodec.check_owner(owner, "Archive.vectors")
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        with self._lock, self._read() as conn:
            for n, memory_id in enumerate(ids):
                record = conn.execute(
                    "SELECT vector FROM memories WHERE owner = ? AND id = ?", (owner, memory_id)
                ).fetchone()
                if record is None:
                    raise KeyError(f"Archive.vectors: owner {owner!r} has no memory {memory_id!r}")
                out[n] = _unpack_vector(record[0], self.dim, memory_id)
        return out

    def chunk_vectors(self, ids: Iterable[str], owner: str) -> list[np.ndarray]:
        """The further window vectors [m, dim] of the owner's memories with these ids, in order (all must exist)."""
        ids = rowcodec.check_ids(ids, "Archive.chunk_vectors")
        rowcodec.check_owner(owner, "Archive.chunk_vectors")
        out = []
        with self._lock, self._read() as conn:
            for memory_id in ids:
                record = conn.execute(
                    "SELECT chunks FROM memories WHERE owner = ? AND id = ?", (owner, memory_id)
                ).fetchone()
                if record is None:
                    raise KeyError(f"Archive.chunk_vectors: owner {owner!r} has no memory {memory_id!r}")
                out.append(from_blob(record[0], self.dim))
        return out

    def search(self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None) -> list[tuple[Memory, float]]:
        """The owner's k current memories passing ``filters`` of highest inner product with ``vector`` [dim], best first.

        Without filters the FAISS index ranks; with filters the matching rows are ranked exactly
        (see the module docstring), so k results come back whenever k memories match.
        """
        rowcodec.check_owner(owner, "Archive.search")
        k = rowcodec.check_k(k, "Archive.search")
        query = rowcodec.check_vectors(vector, 1, self.dim, "Archive.search", single=True)
        filters = MemoryFilter.parse(filters)
        now = timeutil.now().timestamp()
        with self._lock:
            if filters is not None or self._has_expired(owner, now):
                # the index still holds expired rows until a sweep: rank exactly so that k are filled
                return self._search_filtered(query[0], k, owner, filters or MemoryFilter(), now)
            self._sync()
            ids, scores = self._retriever.search(query, k, owner)
            rows = [int(i) for i in ids[0]]
            records = self._records_by_row(rows, owner, now)
            found = [
                (self._decode(records[row]), float(score)) for row, score in zip(rows, scores[0]) if row in records
            ]
            where, params = _clear_conditions(owner, None, now)
            with self._read() as conn:
                best = best_scores(
                    conn.execute(  # the partial index: only long memories' rows are read, however many others
                        f"SELECT id, chunks FROM memories INDEXED BY memories_owner_chunked WHERE {where} "
                        "AND chunks IS NOT NULL",
                        params,
                    ),
                    query[0],
                    self.dim,
                )
            return merge(found, best, k, lambda ids: self._current(ids, owner, now))

    def _current(self, ids: Sequence[str], owner: str, now: float) -> list[Memory]:
        """The owner's current, unexpired memories with these ids."""
        out = []
        with self._read() as conn:
            for chunk in chunks(ids, 500):
                out += [
                    self._decode(r)
                    for r in conn.execute(
                        f"SELECT {COLUMNS} FROM memories WHERE owner = ? AND id IN ({','.join('?' * len(chunk))}) "
                        f"AND {CURRENT} AND {LIVE}",
                        [owner, *chunk, now],
                    )
                ]
        return out

    def _has_expired(self, owner: str, now: float) -> bool:
        """Whether the owner has a current row that expired and is not swept yet (one indexed look-up)."""
        with self._read() as conn:
            return (
                conn.execute(
                    f"SELECT 1 FROM memories WHERE owner = ? AND expires_epoch <= ? AND {CURRENT} LIMIT 1", (owner, now)
                ).fetchone()
                is not None
            )

    def _records_by_row(self, rows: Sequence[int], owner: str, now: float) -> dict[int, tuple]:
        """The owner's current, unexpired records with these row numbers, keyed by row."""
        records = {}
        with self._read() as conn:
            for chunk in chunks(rows, 500):
                records.update(
                    (r[0], r)
                    for r in conn.execute(
                        # "+owner": filter by owner but look rows up by primary key; with a plain
                        # "owner = ?" SQLite picks the owner index and scans all the owner's rows
                        f"SELECT {COLUMNS} FROM memories WHERE +owner = ? AND {CURRENT} AND {LIVE} "
                        f"AND row IN ({','.join('?' * len(chunk))})",
                        [owner, now, *chunk],
                    )
                )
        return records

    def _search_filtered(
        self, query: np.ndarray, k: int, owner: str, filters: MemoryFilter, now: float
    ) -> list[tuple[Memory, float]]:
        """Exact ranking of the owner's current, unexpired rows that pass ``filters``: clear columns in
        SQL, metadata and scopes on the decoded records, checked best first until k match."""
        where, params = _clear_conditions(owner, filters, now)
        with self._read() as conn:
            candidates = conn.execute(f"SELECT row, vector, chunks FROM memories WHERE {where}", params).fetchall()
        if not candidates:
            return []
        vectors = np.frombuffer(b"".join(bytes(v) for _, v, _ in candidates), dtype="<f4").reshape(
            len(candidates), self.dim
        )
        scores = vectors @ query
        for p, (_, _, blob) in enumerate(candidates):  # a long memory ranks at its best window
            if blob is not None:
                scores[p] = max(scores[p], float((from_blob(blob, self.dim) @ query).max()))
        order = np.argsort(-scores, kind="stable")
        found: list[tuple[Memory, float]] = []
        batch = k if not filters.needs_payload else max(k, 256)
        for start in range(0, len(order), batch):
            positions = order[start : start + batch]
            records = self._records_by_row([candidates[p][0] for p in positions], owner, now)
            for p in positions:
                record = records.get(candidates[p][0])
                if record is None:  # deleted since the candidates were read
                    continue
                memory = self._decode(record)
                if filters.matches(memory):
                    found.append((memory, float(scores[p])))
                    if len(found) == k:
                        return found
        return found

    def list_memories(
        self, owner: str, *, limit: int | None = None, offset: int = 0, filters: MemoryFilter | None = None
    ) -> list[Memory]:
        """The owner's current memories passing ``filters``, ordered by (t, id); ``offset`` skipped, at most ``limit``."""
        rowcodec.check_owner(owner, "Archive.list_memories")
        rowcodec.check_page(limit, offset, "Archive.list_memories")
        filters = MemoryFilter.parse(filters)
        where, params = _clear_conditions(owner, filters, timeutil.now().timestamp())
        query = f"SELECT {COLUMNS} FROM memories WHERE {where} ORDER BY t_epoch, id"
        with self._lock, self._read() as conn:
            if filters is None or not filters.needs_payload:
                return [
                    self._decode(r)
                    for r in conn.execute(
                        f"{query} LIMIT ? OFFSET ?", [*params, -1 if limit is None else limit, offset]
                    )
                ]
            out: list[Memory] = []
            skipped = 0
            for record in conn.execute(query, params):
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
        (t, id): the right-of-access dump, and the one snapshot ``memnets memories export`` writes from."""
        rowcodec.check_owner(owner, "Archive.export")
        with self._lock, self._read() as conn:
            return [
                self._decode(r)
                for r in conn.execute(f"SELECT {COLUMNS} FROM memories WHERE owner = ? ORDER BY t_epoch, id", (owner,))
            ]

    def history(self, id: str, owner: str) -> list[Memory]:
        """The older versions of the owner's memory ``id`` (rows superseded by it), oldest (first written) first."""
        rowcodec.check_ids([id], "Archive.history")
        rowcodec.check_owner(owner, "Archive.history")
        with self._lock, self._read() as conn:
            return [
                self._decode(r)
                for r in conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE owner = ? AND superseded_by = ? ORDER BY row", (owner, id)
                )
            ]

    def count(self, owner: str) -> int:
        """How many current (not superseded, not expired) memories the owner has."""
        rowcodec.check_owner(owner, "Archive.count")
        with self._lock:
            return (
                self._require_open()
                .execute(
                    f"SELECT count(*) FROM memories WHERE owner = ? AND {CURRENT} AND {LIVE}",
                    (owner, timeutil.now().timestamp()),
                )
                .fetchone()[0]
            )

    def owners(self) -> list[str]:
        """Every owner with at least one stored memory, sorted."""
        with self._lock:
            return [
                r[0]
                for r in self._require_open().execute(
                    f"SELECT DISTINCT owner FROM memories WHERE {LIVE} ORDER BY owner", (timeutil.now().timestamp(),)
                )
            ]

    def index_size(self) -> int:
        """How many vectors the in-memory FAISS index holds after catching up (equals the table's row count)."""
        with self._lock:
            self._sync()
            return len(self._retriever)

    # ------------------------------------------------------------------ deletion ledger (API helper)
    def deletion_mark(self) -> int:
        """The newest tombstone's sequence number (0: nothing was ever deleted); see :meth:`deleted_since`."""
        with self._lock, self._read() as conn:
            return _tombstone_mark(conn)

    def deleted_since(self, mark: int, owner: str, memories: Sequence[Memory]) -> tuple[int, set[str]]:
        """Which of ``memories`` (the owner's, held in memory by a writer) were deleted after ``mark``.

        Every delete, delete_owner and purge records a tombstone (owner or all, id or all, a
        ``t`` cutoff) in its transaction, even for ids the table does not hold: a memory still in a
        manager's write buffer. Before a writer writes or keeps what it holds, it asks here, so a
        deletion from any connection or process is never undone by a later write. Returns the
        newest mark and the ids to forget. Tombstones hold ids and times, never content.
        """
        rowcodec.check_owner(owner, "Archive.deleted_since")
        with self._lock, self._read() as conn:
            newest = _tombstone_mark(conn)
            if newest <= mark or not memories:
                return newest, set()
            stones = conn.execute(
                "SELECT id, before FROM deletions WHERE seq > ? AND (owner = ? OR owner IS NULL)",
                (int(mark), rowcodec.ledger_tag(self._ledger_secret, owner)),
            ).fetchall()
        return newest, rowcodec.deleted_by_tombstones(
            memories, stones, lambda memory: memory.t.timestamp(), self._ledger_secret
        )

    # ------------------------------------------------------------------ encoder identity and re-embedding
    def encoder_identity(self) -> EncoderIdentity | None:
        """The encoder that filled the archive (None before the first vector); see memnets.store.identity."""
        with self._lock, self._read() as conn:
            return self._meta_identity(conn, META_KEY)

    def bind_encoder(self, identity: EncoderIdentity) -> None:
        """Check that ``identity`` is the encoder that filled the archive (EncoderMismatchError naming
        both if not); from now on every write records it with the first vector or checks it again, and
        every index sync checks it (a re-embedding elsewhere). An archive filled before identities
        were recorded is taken to be this encoder's, with a warning."""
        with self._lock, self._write() as conn:
            stored = self._meta_identity(conn, META_KEY)
            check_identity(stored, identity, str(self.directory))
            if stored is None and conn.execute("SELECT 1 FROM memories LIMIT 1").fetchone() is not None:
                log.warning(
                    "%s was filled before memnets recorded encoders; recording %s as its encoder",
                    self.directory,
                    identity.describe(),
                )
                conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (META_KEY, identity.to_json()))
            self._encoder = identity

    def _meta_identity(self, conn: sqlite3.Connection, key: str) -> EncoderIdentity | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else EncoderIdentity.from_json(row[0], str(self.directory))

    def _check_encoder(self, conn: sqlite3.Connection, record: bool = False) -> None:
        """Inside a transaction: the bound encoder is still the archive's (``record``: write it if none is)."""
        if self._encoder is None:
            return
        stored = self._meta_identity(conn, META_KEY)
        check_identity(stored, self._encoder, str(self.directory))
        if stored is None and record:
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (META_KEY, self._encoder.to_json()))

    def _drop_reembedded(self, conn: sqlite3.Connection, where: str, params: Sequence) -> None:
        """Inside the caller's transaction: drop the re-embedding vectors of the rows matching ``where``."""
        conn.execute(f"DELETE FROM reembed WHERE row IN (SELECT row FROM memories WHERE {where})", params)

    def reembed_start(self, identity: EncoderIdentity) -> str:
        """Begin (or resume) re-embedding to ``identity``: "current" if the archive is embedded by it
        already, "resumed" if a re-embedding to it was under way, else "started" (a re-embedding to
        another encoder is dropped)."""
        with self._lock, self._write() as conn:
            target = self._meta_identity(conn, TARGET_KEY)
            if target is not None and target.fingerprint == identity.fingerprint:
                return "resumed"
            conn.execute("DELETE FROM reembed")
            current = self._meta_identity(conn, META_KEY)
            if current is not None and current.fingerprint == identity.fingerprint:
                conn.execute("DELETE FROM meta WHERE key = ?", (TARGET_KEY,))
                return "current"
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (TARGET_KEY, identity.to_json()))
            return "started"

    _TODO = "FROM memories m WHERE NOT EXISTS (SELECT 1 FROM reembed r WHERE r.row = m.row AND r.version = m.version)"

    @contextmanager
    def reembed_batch(self, size: int) -> Iterator[ReembedBatch]:
        """Up to ``size`` rows without a new vector; their vectors, once the caller saved them on the
        batch, are committed when the block ends (nothing is committed if it raises)."""
        with self._lock, self._read() as conn:
            records = conn.execute(f"SELECT {COLUMNS} {self._TODO} ORDER BY m.row LIMIT ?", (size,)).fetchall()
        batch = ReembedBatch(
            [self._decode(r).content for r in records],
            [(r[0], r[10]) for r in records],
            [r[9] is None for r in records],
        )
        yield batch
        if batch.vectors is None or not records:
            return
        payload = [
            (row, version, vector.astype("<f4").tobytes(), to_blob(more))
            for (row, version), vector, more in zip(batch.keys, batch.vectors, batch.chunks)
        ]
        with self._lock, self._write() as conn:
            # rows rewritten or deleted since they were read are skipped: the next batch embeds their new version
            conn.executemany(
                "INSERT OR REPLACE INTO reembed (row, version, vector, chunks) "
                "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE row = ?1 AND version = ?2)",
                payload,
            )

    def reembed_progress(self) -> tuple[int, int]:
        """(rows with their new vector, rows in the archive)."""
        with self._lock, self._read() as conn:
            total = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
            left = conn.execute(f"SELECT count(*) {self._TODO}").fetchone()[0]
        return total - left, total

    def reembed_finish(self) -> bool:
        """Swap to the new vectors and encoder in one transaction, if every row has its new vector;
        True if it swapped. Rows are re-sealed (the vector is bound into each row's seal)."""
        with self._lock:
            with self._write() as conn:
                target = self._meta_identity(conn, TARGET_KEY)
                if target is None or conn.execute(f"SELECT 1 {self._TODO} LIMIT 1").fetchone() is not None:
                    return False
                records = conn.execute(
                    f"SELECT {', '.join('m.' + c.strip() for c in COLUMNS.split(','))}, r.vector, r.chunks "
                    "FROM memories m JOIN reembed r ON r.row = m.row ORDER BY m.row"
                ).fetchall()
                for record in records:
                    memory = self._decode(record[:-2])
                    row = rowcodec.encode_row(memory, np.frombuffer(record[-2], dtype="<f4"), "Archive.reembed")
                    row = dataclasses.replace(row, chunks=record[-1])
                    row = rowcodec.seal_row(row, self._cipher, self.archive_id, record[10] + 1)
                    conn.execute(
                        "UPDATE memories SET payload = ?, vector = ?, chunks = ?, version = ? WHERE row = ?",
                        (row.payload, row.vector, row.chunks, row.version, record[0]),
                    )
                self._log_changes(conn, "1 = 1", ())
                conn.execute("DELETE FROM reembed")
                conn.execute("DELETE FROM meta WHERE key = ?", (TARGET_KEY,))
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (META_KEY, target.to_json()))
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dim', ?)", (target.dim,))
            self.dim, self._encoder = target.dim, target
            self._drop_saved_index()
            self._rebuild()
            self.compact()  # the old vectors leave the WAL and the free pages
            log.info("%s: re-embedded %d rows; now %s", self.directory, len(records), target.describe())
            return True

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Save the index (if it changed) and close the database. Safe to call twice."""
        with self._lock:
            if self._conn is None:
                return
            try:
                self.save_index()
            finally:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"Archive({str(self.directory)!r}, dim={self.dim}, encrypted={self._cipher is not None}, {state})"

    # ------------------------------------------------------------------ encoding
    def _decode(self, record: tuple) -> Memory:
        (
            _,
            owner,
            memory_id,
            t,
            last_access,
            importance,
            kind,
            payload,
            vector,
            superseded_by,
            version,
            expires,
            ttl,
        ) = record[:13]
        return rowcodec.decode_row(
            self._cipher,
            store_id=self.archive_id,
            version=version,
            owner=owner,
            memory_id=memory_id,
            t=t,
            last_access=last_access,
            importance=importance,
            kind=kind,
            superseded_by=superseded_by,
            payload=payload,
            vector=vector,
            expires_at=expires,
            ttl=ttl,
            chunks=record[13],
        )


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


# one row written: inserted, or over the stored (owner, id) keeping its row number (its FAISS id)
_UPSERT = (
    "INSERT INTO memories (owner, id, t, t_epoch, last_access, importance, kind, payload, vector, "
    "superseded_by, version, expires_at, expires_epoch, ttl, chunks) VALUES (:owner, :id, :t, :t_epoch, :last_access, "
    ":importance, :kind, :payload, :vector, :superseded_by, :version, :expires_at, :expires_epoch, :ttl, :chunks) "
    "ON CONFLICT (owner, id) DO UPDATE SET t = excluded.t, t_epoch = excluded.t_epoch, "
    "last_access = excluded.last_access, importance = excluded.importance, kind = excluded.kind, "
    "payload = excluded.payload, vector = excluded.vector, superseded_by = excluded.superseded_by, "
    "version = excluded.version, expires_at = excluded.expires_at, expires_epoch = excluded.expires_epoch, "
    "ttl = excluded.ttl, chunks = excluded.chunks"
)
_TOMBSTONES = (
    "CREATE TABLE IF NOT EXISTS deletions (seq INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT, id TEXT, before REAL)"
)


def _record_tombstones(conn: sqlite3.Connection, tombstones: Sequence[tuple]) -> None:
    """Append (owner or None = all, id or None = all, t cutoff epoch or None) tombstones (the table is
    created on first use, so archives of format 2 gain it without a migration)."""
    if tombstones:
        conn.execute(_TOMBSTONES)
        conn.executemany("INSERT INTO deletions (owner, id, before) VALUES (?, ?, ?)", tombstones)


def _has_ledger(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'deletions'").fetchone() is not None
    )


def _tombstone_mark(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'deletions'").fetchone()
    return int(row[0]) if row else 0


def _clear_conditions(owner: str, filters: MemoryFilter | None, now: float) -> tuple[str, list]:
    """SQL conditions (and parameters) for the owner's current rows, unexpired at ``now`` (epoch seconds),
    passing the clear-column part of ``filters``."""
    where, params = [f"owner = ? AND {CURRENT} AND {LIVE}"], [owner, now]
    if filters is not None:
        if filters.kinds is not None:
            where.append(f"kind IN ({','.join('?' * len(filters.kinds))})")
            params.extend(filters.kinds)
        if filters.since is not None:
            where.append("t_epoch >= ?")
            params.append(filters.since.timestamp())
        if filters.until is not None:
            where.append("t_epoch < ?")
            params.append(filters.until.timestamp())
    return " AND ".join(where), params


def _with_chunks(row: rowcodec.Row, chunks: np.ndarray) -> rowcodec.Row:
    """``row`` with its further window vectors (a current memory's only: an older version keeps none)."""
    return dataclasses.replace(row, chunks=to_blob(chunks) if row.superseded_by is None else None)


def _group_pairs(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, list[str]]]:
    """(owner, [ids]) groups of (owner, id) pairs."""
    grouped: dict[str, list[str]] = {}
    for owner, memory_id in pairs:
        grouped.setdefault(owner, []).append(memory_id)
    yield from grouped.items()


def _unpack_vector(blob: bytes, dim: int, memory_id) -> np.ndarray:
    if len(blob) != dim * 4:
        raise StoreIntegrityError(f"memory {memory_id!r}: stored vector has {len(blob)} bytes, expected {dim * 4}")
    return np.frombuffer(blob, dtype="<f4")


def _group_by_owner(rows: Iterable[tuple], dim: int) -> Iterator[tuple[str, list[str], np.ndarray]]:
    """(owner, [row ids as str], vectors) for rows (row, owner, vector) sorted by owner."""
    owner, ids, vectors = None, [], []
    for row, row_owner, blob in rows:
        if row_owner != owner and ids:
            yield owner, ids, np.stack(vectors)
            ids, vectors = [], []
        owner = row_owner
        ids.append(str(row))
        vectors.append(_unpack_vector(blob, dim, row))
    if ids:
        yield owner, ids, np.stack(vectors)
