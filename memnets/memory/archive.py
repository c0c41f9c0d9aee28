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
  times, kind, importance and the vector stay in clear but are bound into the associated data,
  so editing them or swapping ciphertexts between rows is detected.

One connection per ``Archive``, shared by its threads under a re-entrant lock that also guards
the index; several processes may open the same directory (SQLite's locks plus ``busy_timeout``).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from tqdm import tqdm

from memnets.memory.crypto import RowCipher, derive_key, new_salt
from memnets.memory.errors import (
    ArchiveError,
    ArchiveFormatError,
    ArchiveIntegrityError,
    ArchiveKeyError,
    InvalidMemoryError,
)
from memnets.records import Memory
from memnets.retrieval.faiss_retriever import FaissRetriever

FORMAT_VERSION = 1  # stored in PRAGMA user_version; bump with a migration when the schema changes
DB_FILE = "archive.sqlite3"
INDEX_DIR = "index"
INDEX_MARKER = "archive_generation.json"
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
    UNIQUE (owner, id)
);
CREATE INDEX memories_owner_t ON memories (owner, t_epoch);
CREATE INDEX memories_t ON memories (t_epoch);
CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, row INTEGER NOT NULL);
"""
_COLUMNS = "row, owner, id, t, last_access, importance, kind, payload, vector"


class Archive:
    """Persistent memory store: SQLite records and vectors, a FAISS index for search, owner-scoped reads.

    Args:
        directory: folder of the archive (created if missing); holds ``archive.sqlite3`` and ``index/``.
        dim: vector dimension. ``None`` opens an existing archive with the dim it was created with.
        key: encryption key for memory content: 16/24/32 raw bytes (AES-GCM) or a passphrase ``str``
            (scrypt). An archive created with a key can only be opened with that key, and one created
            without a key cannot be opened with one.
        index: the FaissRetriever kind ("flat", "hnsw", "ivf", "auto" or a FAISS factory string).
        busy_timeout: seconds a write waits for another process's write lock before failing.

    Adding a memory whose (owner, id) already exists replaces it (content, vector and all).
    Memory ids are scoped to their owner: two owners may use the same id without seeing each other.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        dim: int | None,
        *,
        key: bytes | str | None = None,
        index: str = "flat",
        busy_timeout: float = 30.0,
    ) -> None:
        if dim is not None and (not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1):
            raise ValueError(f"Archive: dim must be a positive int or None, got {dim!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.index_kind = index
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._conn = self._connect(busy_timeout)
        try:
            self.dim, self._cipher = self._init_schema(None if dim is None else int(dim), key)
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
            raise ArchiveError(f"{path}: could not switch SQLite to WAL mode (got {mode!r}); is the folder on a network file system?")
        # FULL (not NORMAL): in WAL mode NORMAL survives a killed process but may drop the last
        # commits on power loss; an agent told "stored" must find the memory after any crash.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA secure_delete = ON")  # deleted cells and pages are overwritten with zeros
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        return conn

    def _init_schema(self, dim: int | None, key: bytes | str | None) -> tuple[int, RowCipher | None]:
        """Create the schema in a new archive, or check format, dim and key of an existing one."""
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
                raise ArchiveFormatError(f"{path} is an SQLite file but not a memnets archive (user_version {version}, tables {sorted(tables)})")
            meta = dict(self._conn.execute("SELECT key, value FROM meta"))
        stored_dim = int(meta["dim"])
        if dim is not None and dim != stored_dim:
            raise ArchiveFormatError(f"{path} holds vectors of dim {stored_dim}, but Archive was opened with dim={dim}")
        if "key_check" not in meta:
            if key is not None:
                raise ArchiveKeyError(f"{path} was created without encryption; open it without a key "
                                      "(memories cannot be encrypted after the fact)")
            return stored_dim, None
        if key is None:
            raise ArchiveKeyError(f"{path} is encrypted; pass the key it was created with (key=...)")
        cipher = RowCipher(derive_key(key, bytes(meta["kdf_salt"])))
        cipher.verify_key_check(bytes(meta["key_check"]))
        return stored_dim, cipher

    def _create(self, dim: int | None, key: bytes | str | None) -> tuple[int, RowCipher | None]:
        if dim is None:
            raise ValueError(f"Archive: {self.directory} holds no archive yet; give dim to create one")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self._conn.execute(statement)
        meta = {"dim": dim, "created_with": "memnets archive format %d" % FORMAT_VERSION}
        cipher = None
        if key is not None:
            salt = new_salt()
            cipher = RowCipher(derive_key(key, salt))
            meta.update(kdf_salt=salt, key_check=cipher.key_check())
        self._conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
        self._conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        return dim, cipher

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
            count = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        folder = self.directory / INDEX_DIR
        for leftover in self.directory.glob(f".{INDEX_DIR}.*"):  # from a save killed midway, long ago
            with suppress(OSError):
                if time.time() - leftover.stat().st_mtime > _LEFTOVER_AGE_S:
                    shutil.rmtree(leftover, ignore_errors=True)
        try:
            marker = json.loads((folder / INDEX_MARKER).read_text())
            if marker == {"generation": generation, "count": count, "dim": self.dim, "index": self.index_kind}:
                retriever = FaissRetriever.load(folder)
                if len(retriever) == count and retriever.dim == self.dim:
                    self._retriever, self._generation = retriever, generation
                    self._saved_generation = generation
                    self._sync()
                    return "loaded"
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            pass  # missing, stale, partial or foreign index files: the table is the truth
        self._rebuild()
        return "rebuilt"

    def _rebuild(self) -> None:
        """A fresh index of every vector in the table, at one consistent snapshot."""
        retriever = FaissRetriever(self.dim, index=self.index_kind)
        with self._read() as conn:
            generation = self._db_generation(conn)
            total = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
            rows = conn.execute("SELECT row, owner, vector FROM memories ORDER BY owner, row")
            with tqdm(total=total, desc="rebuilding memory index", unit="mem",
                      disable=total < _REBUILD_PROGRESS_FROM) as progress:
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
                changed = [r[0] for r in conn.execute(
                    "SELECT DISTINCT row FROM changes WHERE seq > ? AND seq <= ?", (self._generation, generation))]
                present = conn.execute(
                    "SELECT row, owner, vector FROM memories WHERE row IN "
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
                count = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
                if self._db_generation(conn) != self._generation or count != len(self._retriever):
                    return  # another process wrote meanwhile; the next open rebuilds or a later save wins
            folder = self.directory / INDEX_DIR
            staging = self.directory / f".{INDEX_DIR}.{uuid.uuid4().hex}"
            old = self.directory / f".{INDEX_DIR}.{uuid.uuid4().hex}"
            marker = {"generation": self._generation, "count": count, "dim": self.dim, "index": self.index_kind}
            try:
                self._retriever.save(staging)
                (staging / INDEX_MARKER).write_text(json.dumps(marker))
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
    def add(self, memories: Sequence[Memory], vectors) -> None:
        """Store memories with their vectors [N, dim] in one transaction (all or nothing).

        A memory whose (owner, id) exists already is replaced. Raises InvalidMemoryError, naming
        the memory, for empty/whitespace content, text that is not valid Unicode, a vector with
        NaN/inf or of the wrong dim, a repeated (owner, id) in the batch, or unserialisable metadata.
        Content of any length is stored whole (the encoder, not the archive, truncates).
        """
        memories = list(memories)
        array = self._check_vectors(vectors, len(memories))
        keys = set()
        rows = []
        for memory, vector in zip(memories, array):
            if not isinstance(memory, Memory):
                raise InvalidMemoryError(f"Archive.add: expected Memory records, got {type(memory).__name__}")
            if (memory.owner, memory.id) in keys:
                raise InvalidMemoryError(f"Archive.add: memory {memory.id!r} of owner {memory.owner!r} appears twice in the batch")
            keys.add((memory.owner, memory.id))
            rows.append(self._encode(memory, vector))
        if not rows:
            return
        with self._lock:
            with self._write() as conn:
                for row in rows:
                    conn.execute(
                        "INSERT INTO memories (owner, id, t, t_epoch, last_access, importance, kind, payload, vector) "
                        "VALUES (:owner, :id, :t, :t_epoch, :last_access, :importance, :kind, :payload, :vector) "
                        "ON CONFLICT (owner, id) DO UPDATE SET t = excluded.t, t_epoch = excluded.t_epoch, "
                        "last_access = excluded.last_access, importance = excluded.importance, kind = excluded.kind, "
                        "payload = excluded.payload, vector = excluded.vector",
                        row,
                    )  # an update keeps the row number, so logging the row afterwards covers both cases
                    self._log_changes(conn, "owner = ? AND id = ?", (row["owner"], row["id"]))
            self._sync()

    def touch(self, ids: Iterable[str], owner: str, when: datetime) -> int:
        """Set last_access of the owner's memories with these ids; returns how many were updated."""
        ids = self._check_ids(ids, "touch")
        self._check_owner(owner, "touch")
        if not isinstance(when, datetime):
            raise TypeError(f"Archive.touch: when must be a datetime, got {type(when).__name__}")
        with self._lock, self._write() as conn:
            return sum(conn.execute("UPDATE memories SET last_access = ? WHERE owner = ? AND id = ?",
                                    (when.isoformat(), owner, i)).rowcount for i in ids)

    def delete(self, ids: Iterable[str], owner: str) -> int:
        """Delete the owner's memories with these ids (others' are untouched); returns how many."""
        ids = self._check_ids(ids, "delete")
        self._check_owner(owner, "delete")
        return self._delete_where([(f"owner = ? AND id IN ({','.join('?' * len(chunk))})", [owner, *chunk])
                                   for chunk in _chunks(ids, 500)])

    def delete_owner(self, owner: str) -> int:
        """Delete every memory of an owner; returns how many."""
        self._check_owner(owner, "delete_owner")
        return self._delete_where([("owner = ?", [owner])])

    def purge_older_than(self, cutoff: datetime, owner: str | None = None) -> int:
        """Delete memories created (``t``) before ``cutoff``, of one owner or of all; returns how many.

        Naive datetimes, stored or given, are read as UTC.
        """
        if not isinstance(cutoff, datetime):
            raise TypeError(f"Archive.purge_older_than: cutoff must be a datetime, got {type(cutoff).__name__}")
        if owner is None:
            return self._delete_where([("t_epoch < ?", [_epoch(cutoff)])])
        self._check_owner(owner, "purge_older_than")
        return self._delete_where([("owner = ? AND t_epoch < ?", [owner, _epoch(cutoff)])])

    def _delete_where(self, clauses: Sequence[tuple[str, Sequence]]) -> int:
        """Delete the rows matching any (where, params) clause, in one transaction, then scrub the disk."""
        with self._lock:
            deleted = 0
            with self._write() as conn:
                for where, params in clauses:
                    self._log_changes(conn, where, params)
                    deleted += conn.execute(f"DELETE FROM memories WHERE {where}", params).rowcount
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
        """The owner's memories with these ids, in the order asked; ids not found (or another owner's) are skipped."""
        ids = self._check_ids(ids, "get")
        self._check_owner(owner, "get")
        found: dict[str, Memory] = {}
        with self._lock, self._read() as conn:
            for chunk in _chunks(ids, 500):
                marks = ",".join("?" * len(chunk))
                for record in conn.execute(
                        f"SELECT {_COLUMNS} FROM memories WHERE owner = ? AND id IN ({marks})", [owner, *chunk]):
                    found[record[2]] = self._decode(record)
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def vectors(self, ids: Iterable[str], owner: str) -> np.ndarray:
        """The stored vectors [N, dim] of the owner's memories with these ids (in order; all must exist)."""
        ids = self._check_ids(ids, "vectors")
        self._check_owner(owner, "vectors")
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        with self._lock, self._read() as conn:
            for n, memory_id in enumerate(ids):
                record = conn.execute("SELECT vector FROM memories WHERE owner = ? AND id = ?", (owner, memory_id)).fetchone()
                if record is None:
                    raise KeyError(f"Archive.vectors: owner {owner!r} has no memory {memory_id!r}")
                out[n] = _unpack_vector(record[0], self.dim, memory_id)
        return out

    def search(self, vector, k: int, owner: str) -> list[tuple[Memory, float]]:
        """The owner's k memories of highest inner product with ``vector`` [dim], best first."""
        self._check_owner(owner, "search")
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ValueError(f"Archive.search: k must be an int >= 1, got {k!r}")
        query = self._check_vectors(vector, 1, single=True)
        with self._lock:
            self._sync()
            ids, scores = self._retriever.search(query, int(k), owner)
            rows = [int(i) for i in ids[0]]
            if not rows:
                return []
            records = {}
            with self._read() as conn:
                for chunk in _chunks(rows, 500):
                    records.update((r[0], r) for r in conn.execute(
                        # "+owner": filter by owner but look rows up by primary key; with a plain
                        # "owner = ?" SQLite picks the owner index and scans all the owner's rows
                        f"SELECT {_COLUMNS} FROM memories WHERE +owner = ? AND row IN ({','.join('?' * len(chunk))})",
                        [owner, *chunk]))
            return [(self._decode(records[row]), float(score)) for row, score in zip(rows, scores[0]) if row in records]

    def list(self, owner: str, *, limit: int | None = None) -> list[Memory]:
        """The owner's memories, oldest first (by ``t``); at most ``limit`` of them (the newest) if given."""
        self._check_owner(owner, "list")
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise ValueError(f"Archive.list: limit must be a non-negative int or None, got {limit!r}")
        query = f"SELECT {_COLUMNS} FROM memories WHERE owner = ? ORDER BY t_epoch DESC, row DESC"
        params: list = [owner]
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        with self._lock, self._read() as conn:
            return [self._decode(r) for r in reversed(conn.execute(query, params).fetchall())]

    def export(self, owner: str) -> builtins.list[Memory]:
        """Every memory of the owner, decrypted, oldest first: the owner's right-of-access dump."""
        return self.list(owner)

    def count(self, owner: str) -> int:
        """How many memories the owner has."""
        self._check_owner(owner, "count")
        with self._lock:
            return self._require_open().execute("SELECT count(*) FROM memories WHERE owner = ?", (owner,)).fetchone()[0]

    def index_size(self) -> int:
        """How many vectors the in-memory FAISS index holds after catching up (equals the table's row count)."""
        with self._lock:
            self._sync()
            return len(self._retriever)

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

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"Archive({str(self.directory)!r}, dim={self.dim}, encrypted={self._cipher is not None}, {state})"

    # ------------------------------------------------------------------ encoding
    def _encode(self, memory: Memory, vector: np.ndarray) -> dict:
        """The SQL row of a memory (validated; content sealed when a key is set)."""
        what = f"Archive.add: memory {memory.id!r}"
        if not isinstance(memory.content, str) or not memory.content.strip():
            raise InvalidMemoryError(f"{what} has empty or whitespace-only content {memory.content!r:.40}; "
                                     "an empty memory cannot be retrieved meaningfully")
        for name in ("id", "owner", "content", "kind", "agent", "action", "location"):
            _check_unicode(getattr(memory, name), f"{what}: {name}")
        for name in ("links", "objects"):
            for value in getattr(memory, name):
                _check_unicode(value, f"{what}: {name}")
        last_access = memory.last_access or memory.t
        if not isinstance(last_access, datetime):
            raise InvalidMemoryError(f"{what}: last_access must be a datetime, got {type(last_access).__name__}")
        payload = {"content": memory.content, "links": list(memory.links), "agent": memory.agent,
                   "action": memory.action, "objects": list(memory.objects), "location": memory.location,
                   "metadata": memory.metadata}
        try:
            plaintext = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError, UnicodeEncodeError) as error:
            raise InvalidMemoryError(f"{what}: metadata must be JSON-serialisable valid Unicode ({error})") from None
        row = {"owner": memory.owner, "id": memory.id, "t": memory.t.isoformat(), "t_epoch": _epoch(memory.t),
               "last_access": last_access.isoformat(), "importance": float(memory.importance), "kind": memory.kind,
               "vector": vector.astype("<f4").tobytes()}
        row["payload"] = plaintext if self._cipher is None else self._cipher.seal(plaintext, _aad(row))
        return row

    def _decode(self, record: tuple) -> Memory:
        _, owner, memory_id, t, last_access, importance, kind, payload, vector = record
        if self._cipher is not None:
            row = {"owner": owner, "id": memory_id, "t": t, "importance": importance, "kind": kind, "vector": vector}
            payload = self._cipher.open(bytes(payload), _aad(row), what=f"memory {memory_id!r} of owner {owner!r}")
        try:
            fields = json.loads(bytes(payload).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ArchiveIntegrityError(f"memory {memory_id!r} of owner {owner!r}: stored payload is corrupt ({error})") from None
        return Memory(id=memory_id, owner=owner, t=datetime.fromisoformat(t), importance=importance, kind=kind,
                      last_access=datetime.fromisoformat(last_access), content=fields["content"],
                      links=tuple(fields["links"]), agent=fields["agent"], action=fields["action"],
                      objects=tuple(fields["objects"]), location=fields["location"], metadata=fields["metadata"])

    # ------------------------------------------------------------------ validation
    def _check_vectors(self, vectors, n: int, *, single: bool = False) -> np.ndarray:
        where = "Archive.search" if single else "Archive.add"
        try:
            array = np.asarray(vectors, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise InvalidMemoryError(f"{where}: vectors must be a numeric array ({error})") from None
        if single and array.ndim == 1:
            array = array[None, :]
        if array.ndim != 2 or array.shape != (n, self.dim):
            expected = f"[{self.dim}]" if single else f"[{n}, {self.dim}] (one row per memory)"
            raise InvalidMemoryError(f"{where}: vectors must have shape {expected}, got {tuple(np.shape(vectors))}")
        if not np.isfinite(array).all() or np.abs(array).max(initial=0.0) > np.finfo(np.float32).max:
            bad = np.flatnonzero(~(np.isfinite(array) & (np.abs(array) <= np.finfo(np.float32).max)).all(axis=1))
            raise InvalidMemoryError(f"{where}: vector rows {bad[:5].tolist()} contain NaN, inf or values beyond float32")
        return array.astype(np.float32)

    @staticmethod
    def _check_owner(owner: str, where: str) -> None:
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"Archive.{where}: owner must be a non-empty string, got {owner!r}")
        _check_unicode(owner, f"Archive.{where}: owner")

    @staticmethod
    def _check_ids(ids: Iterable[str], where: str) -> builtins.list[str]:
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"Archive.{where}: ids must be a list of ids, not a single {type(ids).__name__} ({ids!r:.40})")
        ids = list(ids)
        for memory_id in ids:
            if not isinstance(memory_id, str):
                raise TypeError(f"Archive.{where}: ids must be strings, got {type(memory_id).__name__} {memory_id!r:.40}")
            _check_unicode(memory_id, f"Archive.{where}: id")
        return ids


def _check_unicode(value: str | None, what: str) -> None:
    """Reject strings that cannot be stored as UTF-8 (lone surrogates from bad decoding)."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidMemoryError(f"{what} is not valid Unicode: {error.reason} at position {error.start} "
                                 f"({value[max(0, error.start - 10):error.start + 10]!r})") from None


def _epoch(moment: datetime) -> float:
    """Seconds since 1970 for ordering; naive datetimes are read as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _aad(row: dict) -> bytes:
    """Associated data of a sealed payload: what is stored in clear beside it, so it cannot be altered or swapped."""
    fields = ["memnets-row-v1", row["owner"], row["id"], row["t"], row["kind"], repr(float(row["importance"])),
              hashlib.sha256(bytes(row["vector"])).hexdigest()]
    return json.dumps(fields, ensure_ascii=False).encode("utf-8")


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
        yield items[start:start + size]
