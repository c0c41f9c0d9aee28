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
- The saved index files are authenticated before FAISS parses any of them: ``index/index_auth.json``
  lists each file's sha256 under an HMAC-SHA256 keyed from the archive key (HKDF), or, without a
  key, under a plain checksum that catches corruption but not a writer of the folder. A file that
  fails, an unlisted file, or a file name that is not a plain name inside the folder make the
  open rebuild the index from SQLite and say so (a warning, and ``index_source ==
  "rebuilt:untrusted"``). The verified bytes are copied into a private temporary folder and
  FAISS reads that copy, so what is parsed is what was checked.
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
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import shutil
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Self

import numpy as np

from memnets.progress import track
from memnets.records import Memory
from memnets.retrieval.faiss_retriever import MANIFEST as RETRIEVER_MANIFEST
from memnets.retrieval.faiss_retriever import FaissRetriever
from memnets.safefiles import UnsafeFileError, copy_verified, read_regular
from memnets.store import rows as rowcodec
from memnets.store.crypto import DEFAULT_KDF, RowCipher
from memnets.store.errors import (
    ArchiveError,
    ArchiveFormatError,
    ArchiveIntegrityError,
    ArchiveKeyError,
)
from memnets.store.filters import MemoryFilter
from memnets.timeutil import as_utc

FORMAT_VERSION = 3  # stored in PRAGMA user_version; bump with a migration (_MIGRATIONS) when the schema changes
DB_FILE = "archive.sqlite3"
INDEX_DIR = "index"
INDEX_MARKER = "archive_generation.json"
INDEX_AUTH = "index_auth.json"  # sha256 of every other index file, under an HMAC (key) or a checksum (no key)
_INDEX_MAC_PURPOSE = b"memnets/index-mac/v1"
_INDEX_FILE_FIELDS = ("file", "master", "search")  # fields of retriever.json's owner entries that name index files
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")  # a file directly inside the index folder
CHANGELOG_KEEP = 100_000  # change-log rows kept for other processes to catch up; older ones force a rebuild
_LEFTOVER_AGE_S = 3600  # staging copies of the index older than this belong to no live save
_REBUILD_PROGRESS_FROM = 50_000  # show a progress bar when rebuilding at least this many vectors

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE memories (
    row INTEGER PRIMARY KEY AUTOINCREMENT,  -- the FAISS id, never reused
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    t TEXT NOT NULL,                        -- ISO 8601, exactly as given
    t_epoch REAL NOT NULL,                  -- for ordering and purges (naive times read as UTC)
    last_access TEXT NOT NULL,
    importance REAL NOT NULL,
    kind TEXT NOT NULL,
    payload BLOB NOT NULL,                  -- JSON of content and structured fields, sealed with a key
    vector BLOB NOT NULL,                   -- little-endian float32 [dim]
    superseded_by TEXT,                     -- id of the newer version (NULL: a current memory)
    version INTEGER NOT NULL DEFAULT 1,     -- +1 on every write of the row, bound into the seal
    UNIQUE (owner, id)
);
CREATE INDEX memories_owner_t ON memories (owner, t_epoch);
CREATE INDEX memories_t ON memories (t_epoch);
CREATE INDEX memories_owner_superseded ON memories (owner, superseded_by);
CREATE INDEX memories_owner_kind ON memories (owner, kind);  -- kind filters read only matching rows
CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, row INTEGER NOT NULL);
"""
# format N -> N + 1, run in the open's write transaction (the first open by a newer memnets upgrades)
_MIGRATIONS = {
    1: [
        "ALTER TABLE memories ADD COLUMN superseded_by TEXT",
        "CREATE INDEX memories_owner_superseded ON memories (owner, superseded_by)",
    ],
    2: [
        "ALTER TABLE memories ADD COLUMN version INTEGER NOT NULL DEFAULT 1",  # + _bind_rows (archive id)
        "CREATE INDEX IF NOT EXISTS memories_owner_kind ON memories (owner, kind)",
    ],
}
log = logging.getLogger(__name__)
_COLUMNS = "row, owner, id, t, last_access, importance, kind, payload, vector, superseded_by, version"
_CURRENT = "superseded_by IS NULL"  # rows that search, listings, counts and the FAISS index see


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

    Implements :class:`memnets.store.MemoryStore`. Upserting a memory whose (owner, id) already
    exists replaces it (content, vector and all). Memory ids are scoped to their owner: two owners
    may use the same id without seeing each other.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        dim: int | None,
        *,
        key: bytes | str | None = None,
        index: str = "auto",
        busy_timeout: float = 30.0,
    ) -> None:
        dim = rowcodec.check_dim(dim, "Archive")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.index_kind = index
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._conn = self._connect(busy_timeout)
        try:
            self.dim, self._cipher, self.archive_id = self._init_schema(dim, key)
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
            raise ArchiveFormatError(f"{path} is not a memnets archive (SQLite says: {error})") from None
        if mode.lower() != "wal":
            conn.close()
            raise ArchiveError(
                f"{path}: could not switch SQLite to WAL mode (got {mode!r}); is the folder on a network file system?"
            )
        # FULL (not NORMAL): in WAL mode NORMAL survives a killed process but may drop the last
        # commits on power loss; an agent told "stored" must find the memory after any crash.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA secure_delete = ON")  # deleted cells and pages are overwritten with zeros
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        return conn

    def _init_schema(self, dim: int | None, key: bytes | str | None) -> tuple[int, RowCipher | None, str]:
        """Create the schema in a new archive, or check format, dim and key of an existing one (and upgrade it)."""
        path = self.directory / DB_FILE
        with self._write():
            try:
                version = self._conn.execute("PRAGMA user_version").fetchone()[0]
                tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            except sqlite3.DatabaseError as error:
                raise ArchiveFormatError(f"{path} is not a memnets archive (SQLite says: {error})") from None
            if version == 0 and not tables:
                return self._create(dim, key)
            if version > FORMAT_VERSION:
                raise ArchiveFormatError(
                    f"{path} was written by archive format {version}; this memnets reads format {FORMAT_VERSION} "
                    "and older. Upgrade memnets to open it (it was not modified)."
                )
            if version < 1 or not {"meta", "memories", "changes"} <= tables:
                raise ArchiveFormatError(
                    f"{path} is an SQLite file but not a memnets archive (user_version {version}, tables {sorted(tables)})"
                )
            meta = dict(self._conn.execute("SELECT key, value FROM meta"))
            stored_dim = int(meta["dim"])
            if dim is not None and dim != stored_dim:
                raise ArchiveFormatError(
                    f"{path} holds vectors of dim {stored_dim}, but Archive was opened with dim={dim}"
                )
            cipher = rowcodec.existing_cipher(key, meta, str(path))
            for step in range(version, FORMAT_VERSION):
                for statement in _MIGRATIONS[step]:
                    self._conn.execute(statement)
            if "archive_id" not in meta:  # format < 3: give the archive its id and bind every row to it
                meta["archive_id"] = self._bind_rows(cipher)
            if version != FORMAT_VERSION:
                self._conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        return stored_dim, cipher, _text(meta["archive_id"])

    def _bind_rows(self, cipher: RowCipher | None) -> str:
        """Upgrade to format 3 inside the open's transaction: a new archive id, and with a key every row
        re-sealed from the old associated data (no archive id, no version) to the new one."""
        archive_id = rowcodec.new_store_id()
        self._conn.execute("INSERT INTO meta (key, value) VALUES ('archive_id', ?)", (archive_id,))
        if cipher is not None:
            count = self._reseal(self._conn, cipher, None, cipher, archive_id)
            log.info(
                "%s: upgraded to archive format 3; %d rows bound to archive id %s", self.directory, count, archive_id
            )
        return archive_id

    def _reseal(
        self,
        conn: sqlite3.Connection,
        opener: RowCipher,
        old_id: str | None,
        sealer: RowCipher,
        new_id: str,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Inside the caller's write transaction: open every row's payload with ``opener`` (associated data
        of store id ``old_id``) and seal it again with ``sealer`` (of ``new_id``); returns how many rows."""
        rows = [r[0] for r in conn.execute("SELECT row FROM memories ORDER BY row")]
        for done, chunk in enumerate(_chunks(rows, 500), start=1):
            marks = ",".join("?" * len(chunk))
            for record in conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE row IN ({marks})", chunk).fetchall():
                plaintext = opener.open(
                    bytes(record[7]), _record_aad(record, old_id), what=f"memory {record[2]!r} of owner {record[1]!r}"
                )
                conn.execute(
                    "UPDATE memories SET payload = ? WHERE row = ?",
                    (sealer.seal(plaintext, _record_aad(record, new_id)), record[0]),
                )
            if progress is not None:
                progress(min(done * 500, len(rows)), len(rows))
        return len(rows)

    def _rotate(self, key: bytes | str, kdf: dict, progress: Callable[[int, int], None] | None) -> int:
        """Re-seal every row under ``key`` in one transaction; see :func:`rotate_key`."""
        if self._cipher is None:
            raise ArchiveKeyError(f"{self.directory} is not encrypted; there is no key to rotate")
        cipher, key_meta = rowcodec.new_cipher(key, kdf)
        with self._lock:
            # the saved index is authenticated under the old key: drop it first, so that whichever key the
            # archive ends under, the next open rebuilds it quietly (close() saves it under the new key)
            self._drop_saved_index()
            with self._write() as conn:
                count = self._reseal(conn, self._cipher, self.archive_id, cipher, self.archive_id, progress)
                conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", key_meta.items())
            self._cipher = cipher
            self.compact()  # the old ciphertexts leave the WAL and the free pages
        return count

    def _create(self, dim: int | None, key: bytes | str | None) -> tuple[int, RowCipher | None, str]:
        if dim is None:
            raise ValueError(f"Archive: {self.directory} holds no archive yet; give dim to create one")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self._conn.execute(statement)
        cipher, key_meta = rowcodec.new_cipher(key)
        archive_id = rowcodec.new_store_id()
        meta = {
            "dim": dim,
            "created_with": f"memnets archive format {FORMAT_VERSION}",
            "archive_id": archive_id,
            **key_meta,
        }
        self._conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
        self._conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        return dim, cipher, archive_id

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
            raise ArchiveError(f"archive {self.directory} is closed")
        return self._conn

    # ------------------------------------------------------------------ the index
    def _db_generation(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
        return int(row[0]) if row else 0

    def _open_index(self) -> str:
        """Load the saved index when it reflects the current generation, else rebuild it from SQLite."""
        with self._read() as conn:
            generation = self._db_generation(conn)
            count = conn.execute(f"SELECT count(*) FROM memories WHERE {_CURRENT}").fetchone()[0]
        folder = self.directory / INDEX_DIR
        for leftover in self.directory.glob(f".{INDEX_DIR}.*"):  # from a save killed midway, long ago
            with suppress(OSError):
                if time.time() - leftover.stat().st_mtime > _LEFTOVER_AGE_S:
                    shutil.rmtree(leftover, ignore_errors=True)
        expected = {"generation": generation, "count": count, "dim": self.dim, "index": self.index_kind}
        try:
            # a cheap look first (JSON only): a stale index is rebuilt without hashing it
            if json.loads(read_regular(folder, INDEX_MARKER)) == expected:
                with tempfile.TemporaryDirectory(prefix="memnets-index-") as private:
                    self._copy_verified_index(folder, Path(private))
                    if json.loads((Path(private) / INDEX_MARKER).read_bytes()) == expected:
                        retriever = FaissRetriever.load(private)
                        if len(retriever) == count and retriever.dim == self.dim:
                            self._retriever, self._generation = retriever, generation
                            self._saved_generation = generation
                            self._sync()
                            return "loaded"
        except (_UntrustedIndex, UnsafeFileError) as error:  # UnsafeFileError: a link or a FIFO as the marker
            log.warning(
                "%s: the saved index files failed their check (%s); rebuilding the index from SQLite", folder, error
            )
            self._rebuild()
            return "rebuilt:untrusted"
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            pass  # missing, stale, partial or foreign index files: the table is the truth
        self._rebuild()
        return "rebuilt"

    def _index_seal(self, files: dict[str, str]) -> dict[str, str]:
        """The authentication of index files (name -> sha256) of this archive: an HMAC-SHA256 under a key
        derived from the archive key, or without a key a plain checksum (catches corruption, not a forger)."""
        body = json.dumps({"archive_id": self.archive_id, "files": files}, sort_keys=True).encode()
        if self._cipher is None:
            return {"checksum_sha256": hashlib.sha256(body).hexdigest()}
        return {"hmac_sha256": hmac.new(self._cipher.subkey(_INDEX_MAC_PURPOSE), body, "sha256").hexdigest()}

    def _write_index_auth(self, folder: Path) -> None:
        """Write ``INDEX_AUTH`` into a freshly saved index folder: every file's sha256 and their seal."""
        files = {name: copy_verified(folder, name, None) for name in sorted(os.listdir(folder))}
        (folder / INDEX_AUTH).write_text(json.dumps({"files": files, **self._index_seal(files)}, indent=1))

    def _copy_verified_index(self, folder: Path, private: Path) -> None:
        """Copy the saved index files into ``private`` once they pass their check, before FAISS parses any.

        FileNotFoundError when there is no authentication record (no saved index, or one written by
        an older memnets): the caller rebuilds. :class:`_UntrustedIndex` when a file is a link, is not
        listed, is not a plain name, differs from its digest, or the record's seal does not verify.
        """
        try:
            record = json.loads(read_regular(folder, INDEX_AUTH))
            files = record["files"] if isinstance(record, dict) else None
            if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
                raise _UntrustedIndex(f"{INDEX_AUTH} is not a record of file digests")
            odd = sorted(name for name in files if not _PLAIN_NAME.fullmatch(name) or name == INDEX_AUTH)
            if odd:
                raise _UntrustedIndex(f"{INDEX_AUTH} lists {odd[0]!r}, not a plain file name inside the folder")
            present = set(os.listdir(folder)) - {INDEX_AUTH}
            if present != set(files):
                extra, missing = sorted(present - set(files)), sorted(set(files) - present)
                raise _UntrustedIndex(f"files not listed: {extra[:3]}, listed but missing: {missing[:3]}")
            seal = self._index_seal(files)
            name, value = next(iter(seal.items()))
            if not isinstance(record.get(name), str) or not hmac.compare_digest(record[name], value):
                raise _UntrustedIndex(
                    f"the {name} of {INDEX_AUTH} does not verify"
                    + (" under this archive's key" if self._cipher is not None else "")
                )
            for name, digest in sorted(files.items()):
                if copy_verified(folder, name, private) != digest:
                    raise _UntrustedIndex(f"{name}: sha256 differs from {INDEX_AUTH}")
        except UnsafeFileError as error:
            raise _UntrustedIndex(f"{error.filename}: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise _UntrustedIndex(f"{INDEX_AUTH} is not valid JSON ({error})") from None
        manifest = json.loads((private / RETRIEVER_MANIFEST).read_bytes())
        for entry in manifest.get("owners", []):
            for field, value in entry.items():
                if field == "owner" or not isinstance(value, str):
                    continue  # the owner name is data, and may hold any character
                looks_like_path = "/" in value or "\\" in value or value.startswith(".")
                if (field in _INDEX_FILE_FIELDS and value not in files) or looks_like_path:
                    raise _UntrustedIndex(
                        f"{RETRIEVER_MANIFEST} names {value!r} ({field}), not a verified file of the folder"
                    )

    def _rebuild(self) -> None:
        """A fresh index of every vector in the table, at one consistent snapshot."""
        retriever = FaissRetriever(self.dim, index=self.index_kind)
        with self._read() as conn:
            generation = self._db_generation(conn)
            total = conn.execute(f"SELECT count(*) FROM memories WHERE {_CURRENT}").fetchone()[0]
            rows = conn.execute(f"SELECT row, owner, vector FROM memories WHERE {_CURRENT} ORDER BY owner, row")
            with track(
                total=total, desc="rebuilding memory index", unit="mem", disable=total < _REBUILD_PROGRESS_FROM
            ) as progress:
                for owner, ids, vectors in _group_by_owner(rows, self.dim):
                    retriever.add(ids, vectors, owner)
                    progress.update(len(ids))
        self._retriever, self._generation = retriever, generation

    def _sync(self) -> None:
        """Replay the changes this process's index has not seen (its own writes and other processes')."""
        with self._read() as conn:
            generation = self._db_generation(conn)
            if generation == self._generation:
                return
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
                    f"SELECT row, owner, vector FROM memories WHERE {_CURRENT} AND row IN "
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
            self._sync()
            if self._saved_generation == self._generation:
                return
            with self._read() as conn:
                count = conn.execute(f"SELECT count(*) FROM memories WHERE {_CURRENT}").fetchone()[0]
                if self._db_generation(conn) != self._generation or count != len(self._retriever):
                    return  # another process wrote meanwhile; the next open rebuilds or a later save wins
            folder = self.directory / INDEX_DIR
            staging = self.directory / f".{INDEX_DIR}.{uuid.uuid4().hex}"
            old = self.directory / f".{INDEX_DIR}.{uuid.uuid4().hex}"
            marker = {"generation": self._generation, "count": count, "dim": self.dim, "index": self.index_kind}
            try:
                self._retriever.save(staging)
                (staging / INDEX_MARKER).write_text(json.dumps(marker))
                self._write_index_auth(staging)
                if folder.exists():
                    folder.rename(old)
                staging.rename(folder)
            except (OSError, RuntimeError):  # FAISS reports a vanished folder as RuntimeError
                return  # another process saved or deleted at the same moment; the next open decides
            finally:
                shutil.rmtree(staging, ignore_errors=True)
                shutil.rmtree(old, ignore_errors=True)
            with self._read() as conn:
                if self._db_generation(conn) != self._generation:
                    # another process wrote (maybe deleted) while we saved: these files are already
                    # stale and might hold a deleted vector, so do not leave them on disk
                    self._drop_saved_index()
                    return
            self._saved_generation = self._generation

    def _drop_saved_index(self) -> None:
        """Delete the index files on disk (they hold vectors of deleted memories); the next open rebuilds."""
        for folder in [self.directory / INDEX_DIR, *self.directory.glob(f".{INDEX_DIR}.*")]:
            shutil.rmtree(folder, ignore_errors=True)  # also copies left by a save that was killed
        self._saved_generation = -1

    # ------------------------------------------------------------------ writes
    def upsert(self, memories: Sequence[Memory], vectors) -> None:
        """Store memories with their vectors [N, dim] in one transaction (all or nothing).

        A memory whose (owner, id) exists already is replaced. Raises InvalidMemoryError, naming
        the memory, for empty/whitespace content, text that is not valid Unicode, a vector with
        NaN/inf or of the wrong dim, a repeated (owner, id) in the batch, or unserialisable metadata.
        Content of any length is stored whole (the encoder, not the archive, truncates).
        """
        memories, array = rowcodec.check_batch(memories, vectors, self.dim, "Archive.upsert")
        rows = [rowcodec.encode_row(memory, vector, "Archive.upsert") for memory, vector in zip(memories, array)]
        if not rows:
            return
        with self._lock:
            replaced = 0
            with self._write() as conn:
                for row in rows:
                    stored = conn.execute(
                        "SELECT version FROM memories WHERE owner = ? AND id = ?", (row.owner, row.id)
                    ).fetchone()
                    replaced += stored is not None
                    row = rowcodec.seal_row(row, self._cipher, self.archive_id, 1 if stored is None else stored[0] + 1)
                    conn.execute(
                        "INSERT INTO memories (owner, id, t, t_epoch, last_access, importance, kind, payload, vector, "
                        "superseded_by, version) VALUES (:owner, :id, :t, :t_epoch, :last_access, :importance, :kind, "
                        ":payload, :vector, :superseded_by, :version) "
                        "ON CONFLICT (owner, id) DO UPDATE SET t = excluded.t, t_epoch = excluded.t_epoch, "
                        "last_access = excluded.last_access, importance = excluded.importance, kind = excluded.kind, "
                        "payload = excluded.payload, vector = excluded.vector, superseded_by = excluded.superseded_by, "
                        "version = excluded.version",
                        vars(row),
                    )  # an update keeps the row number, so logging the row afterwards covers both cases
                    self._log_changes(conn, "owner = ? AND id = ?", (row.owner, row.id))
            if replaced:  # the old text and vector must leave the disk as after a delete
                self._drop_saved_index()
                self.compact()
            self._sync()

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

    def delete(self, ids: Iterable[str], owner: str) -> int:
        """Delete the owner's memories with these ids and their older versions (others' are untouched); returns how many rows."""
        ids = rowcodec.check_ids(ids, "Archive.delete")
        rowcodec.check_owner(owner, "Archive.delete")
        return self._delete_where(
            [(f"owner = ? AND id IN ({','.join('?' * len(chunk))})", [owner, *chunk]) for chunk in _chunks(ids, 500)],
            tombstones=[(owner, i, None) for i in ids],
        )

    def delete_owner(self, owner: str) -> int:
        """Delete every memory of an owner; returns how many."""
        rowcodec.check_owner(owner, "Archive.delete_owner")
        return self._delete_where([("owner = ?", [owner])], tombstones=[(owner, None, None)])

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

    def _delete_where(self, clauses: Sequence[tuple[str, Sequence]], tombstones: Sequence[tuple] = ()) -> int:
        """Delete the rows matching any (where, params) clause and the older versions of the current ones
        among them, in one transaction (with the deletion's ``tombstones``, see :meth:`deleted_since`),
        then scrub the disk."""
        with self._lock:
            deleted = 0
            with self._write() as conn:
                _record_tombstones(conn, tombstones)
                for where, params in clauses:
                    replaced = conn.execute(
                        f"SELECT owner, id FROM memories WHERE {where} AND {_CURRENT}", params
                    ).fetchall()
                    self._log_changes(conn, where, params)
                    deleted += conn.execute(f"DELETE FROM memories WHERE {where}", params).rowcount
                    for owner, ids in _group_pairs(replaced):
                        for chunk in _chunks(ids, 500):
                            versions = f"owner = ? AND superseded_by IN ({','.join('?' * len(chunk))})"
                            self._log_changes(conn, versions, [owner, *chunk])
                            deleted += conn.execute(f"DELETE FROM memories WHERE {versions}", [owner, *chunk]).rowcount
            if deleted:
                self._drop_saved_index()
                self.compact()
            self._sync()
            return deleted

    def compact(self) -> bool:
        """Return free pages to the file system and fold the WAL into the database, truncating it.

        Called after every deletion so deleted text leaves the disk. Returns False when another
        connection's open read kept the WAL from being truncated (it is then cleared at a later
        checkpoint, at the latest when the last connection closes).
        """
        with self._lock:
            conn = self._require_open()
            conn.executescript("PRAGMA incremental_vacuum;")  # execute() would free only one page per call
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return busy == 0

    # ------------------------------------------------------------------ reads (all owner-scoped)
    def get(self, ids: Iterable[str], owner: str) -> list[Memory]:
        """The owner's memories with these ids (older versions included), in the order asked; ids not found (or another owner's) are skipped."""
        ids = rowcodec.check_ids(ids, "Archive.get")
        rowcodec.check_owner(owner, "Archive.get")
        found: dict[str, Memory] = {}
        with self._lock, self._read() as conn:
            for chunk in _chunks(ids, 500):
                marks = ",".join("?" * len(chunk))
                for record in conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE owner = ? AND id IN ({marks})", [owner, *chunk]
                ):
                    found[record[2]] = self._decode(record)
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def vectors(self, ids: Iterable[str], owner: str) -> np.ndarray:
        """The stored vectors [N, dim] of the owner's memories with these ids (in order; all must exist)."""
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

    def search(self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None) -> list[tuple[Memory, float]]:
        """The owner's k current memories passing ``filters`` of highest inner product with ``vector`` [dim], best first.

        Without filters the FAISS index ranks; with filters the matching rows are ranked exactly
        (see the module docstring), so k results come back whenever k memories match.
        """
        rowcodec.check_owner(owner, "Archive.search")
        k = rowcodec.check_k(k, "Archive.search")
        query = rowcodec.check_vectors(vector, 1, self.dim, "Archive.search", single=True)
        filters = MemoryFilter.parse(filters)
        with self._lock:
            if filters is not None:
                return self._search_filtered(query[0], k, owner, filters)
            self._sync()
            ids, scores = self._retriever.search(query, k, owner)
            rows = [int(i) for i in ids[0]]
            records = self._records_by_row(rows, owner)
            return [(self._decode(records[row]), float(score)) for row, score in zip(rows, scores[0]) if row in records]

    def _records_by_row(self, rows: Sequence[int], owner: str) -> dict[int, tuple]:
        """The owner's current records with these row numbers, keyed by row."""
        records = {}
        with self._read() as conn:
            for chunk in _chunks(rows, 500):
                records.update(
                    (r[0], r)
                    for r in conn.execute(
                        # "+owner": filter by owner but look rows up by primary key; with a plain
                        # "owner = ?" SQLite picks the owner index and scans all the owner's rows
                        f"SELECT {_COLUMNS} FROM memories WHERE +owner = ? AND {_CURRENT} "
                        f"AND row IN ({','.join('?' * len(chunk))})",
                        [owner, *chunk],
                    )
                )
        return records

    def _search_filtered(
        self, query: np.ndarray, k: int, owner: str, filters: MemoryFilter
    ) -> list[tuple[Memory, float]]:
        """Exact ranking of the owner's current rows that pass ``filters``: clear columns in SQL,
        metadata on the decoded records, checked best first until k match."""
        where, params = _clear_conditions(owner, filters)
        with self._read() as conn:
            candidates = conn.execute(f"SELECT row, vector FROM memories WHERE {where}", params).fetchall()
        if not candidates:
            return []
        vectors = np.frombuffer(b"".join(bytes(v) for _, v in candidates), dtype="<f4").reshape(
            len(candidates), self.dim
        )
        scores = vectors @ query
        order = np.argsort(-scores, kind="stable")
        found: list[tuple[Memory, float]] = []
        batch = k if not filters.needs_payload else max(k, 256)
        for start in range(0, len(order), batch):
            positions = order[start : start + batch]
            records = self._records_by_row([candidates[p][0] for p in positions], owner)
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
        where, params = _clear_conditions(owner, filters)
        query = f"SELECT {_COLUMNS} FROM memories WHERE {where} ORDER BY t_epoch, id"
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
        """Every stored row of the owner (older versions too), decrypted, by (t, id): the right-of-access dump."""
        rowcodec.check_owner(owner, "Archive.export")
        with self._lock, self._read() as conn:
            return [
                self._decode(r)
                for r in conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE owner = ? ORDER BY t_epoch, id", (owner,))
            ]

    def history(self, id: str, owner: str) -> list[Memory]:
        """The older versions of the owner's memory ``id`` (rows superseded by it), oldest (first written) first."""
        rowcodec.check_ids([id], "Archive.history")
        rowcodec.check_owner(owner, "Archive.history")
        with self._lock, self._read() as conn:
            return [
                self._decode(r)
                for r in conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE owner = ? AND superseded_by = ? ORDER BY row", (owner, id)
                )
            ]

    def count(self, owner: str) -> int:
        """How many current (not superseded) memories the owner has."""
        rowcodec.check_owner(owner, "Archive.count")
        with self._lock:
            return (
                self._require_open()
                .execute(f"SELECT count(*) FROM memories WHERE owner = ? AND {_CURRENT}", (owner,))
                .fetchone()[0]
            )

    def owners(self) -> list[str]:
        """Every owner with at least one stored memory, sorted."""
        with self._lock:
            return [r[0] for r in self._require_open().execute("SELECT DISTINCT owner FROM memories ORDER BY owner")]

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
                "SELECT id, before FROM deletions WHERE seq > ? AND (owner = ? OR owner IS NULL)", (int(mark), owner)
            ).fetchall()
        return newest, rowcodec.deleted_by_tombstones(memories, stones, lambda memory: memory.t.timestamp())

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
        _, owner, memory_id, t, last_access, importance, kind, payload, vector, superseded_by, version = record
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


class _UntrustedIndex(Exception):
    """The saved index files failed their check (see Archive._copy_verified_index); the open rebuilds."""


def _text(value: str | bytes) -> str:
    """A meta value as text (stored as TEXT or, by older writers, as a BLOB)."""
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def _record_aad(record: tuple, store_id: str | None) -> bytes:
    """The associated data of a stored record (columns as in ``_COLUMNS``) in a store with this id
    (``None``: the layout from before archive ids, see :func:`memnets.store.rows.row_aad`)."""
    _, owner, memory_id, t, _, importance, kind, _, vector, superseded_by, version = record
    return rowcodec.row_aad(
        owner, memory_id, t, kind, importance, bytes(vector), superseded_by, store_id=store_id, version=version
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


def _tombstone_mark(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'deletions'").fetchone()
    return int(row[0]) if row else 0


def _clear_conditions(owner: str, filters: MemoryFilter | None) -> tuple[str, list]:
    """SQL conditions (and parameters) for the owner's current rows passing the clear-column part of ``filters``."""
    where, params = [f"owner = ? AND {_CURRENT}"], [owner]
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


def _group_pairs(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, list[str]]]:
    """(owner, [ids]) groups of (owner, id) pairs."""
    grouped: dict[str, list[str]] = {}
    for owner, memory_id in pairs:
        grouped.setdefault(owner, []).append(memory_id)
    yield from grouped.items()


def _unpack_vector(blob: bytes, dim: int, memory_id) -> np.ndarray:
    if len(blob) != dim * 4:
        raise ArchiveIntegrityError(f"memory {memory_id!r}: stored vector has {len(blob)} bytes, expected {dim * 4}")
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


def _chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
