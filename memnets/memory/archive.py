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
  times, kind, importance, superseded_by and the vector stay in clear but are bound into the
  associated data, so editing them or swapping ciphertexts between rows is detected (the row
  format is shared with the PostgreSQL store: :mod:`memnets.store.rows`).
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

import json
import os
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime
from pathlib import Path

import numpy as np
from tqdm import tqdm

from memnets.memory.crypto import RowCipher
from memnets.memory.errors import (
    ArchiveError,
    ArchiveFormatError,
    ArchiveIntegrityError,
)
from memnets.records import Memory
from memnets.retrieval.faiss_retriever import FaissRetriever
from memnets.store import rows as rowcodec
from memnets.store.filters import MemoryFilter
from memnets.timeutil import as_utc

FORMAT_VERSION = 2  # stored in PRAGMA user_version; bump with a migration (_MIGRATIONS) when the schema changes
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
    superseded_by TEXT,                     -- id of the newer version (NULL: a current memory)
    UNIQUE (owner, id)
);
CREATE INDEX memories_owner_t ON memories (owner, t_epoch);
CREATE INDEX memories_t ON memories (t_epoch);
CREATE INDEX memories_owner_superseded ON memories (owner, superseded_by);
CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, row INTEGER NOT NULL);
"""
# format N -> N + 1, run in the open's write transaction (the first open by a newer memnets upgrades)
_MIGRATIONS = {
    1: ["ALTER TABLE memories ADD COLUMN superseded_by TEXT",
        "CREATE INDEX memories_owner_superseded ON memories (owner, superseded_by)"],
}
_COLUMNS = "row, owner, id, t, last_access, importance, kind, payload, vector, superseded_by"
_CURRENT = "superseded_by IS NULL"  # rows that search, listings, counts and the FAISS index see


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
        index: str = "flat",
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
            self.dim, self._cipher = self._init_schema(dim, key)
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
            cipher = rowcodec.existing_cipher(key, meta, str(path))
            for step in range(version, FORMAT_VERSION):
                for statement in _MIGRATIONS[step]:
                    self._conn.execute(statement)
            if version != FORMAT_VERSION:
                self._conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        return stored_dim, cipher

    def _create(self, dim: int | None, key: bytes | str | None) -> tuple[int, RowCipher | None]:
        if dim is None:
            raise ValueError(f"Archive: {self.directory} holds no archive yet; give dim to create one")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self._conn.execute(statement)
        cipher, key_meta = rowcodec.new_cipher(key)
        meta = {"dim": dim, "created_with": f"memnets archive format {FORMAT_VERSION}", **key_meta}
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
            count = conn.execute(f"SELECT count(*) FROM memories WHERE {_CURRENT}").fetchone()[0]
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
            total = conn.execute(f"SELECT count(*) FROM memories WHERE {_CURRENT}").fetchone()[0]
            rows = conn.execute(f"SELECT row, owner, vector FROM memories WHERE {_CURRENT} ORDER BY owner, row")
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
        rows = [rowcodec.encode_row(memory, vector, self._cipher, "Archive.upsert") for memory, vector in zip(memories, array)]
        if not rows:
            return
        with self._lock:
            with self._write() as conn:
                for row in rows:
                    conn.execute(
                        "INSERT INTO memories (owner, id, t, t_epoch, last_access, importance, kind, payload, vector, "
                        "superseded_by) VALUES (:owner, :id, :t, :t_epoch, :last_access, :importance, :kind, :payload, "
                        ":vector, :superseded_by) "
                        "ON CONFLICT (owner, id) DO UPDATE SET t = excluded.t, t_epoch = excluded.t_epoch, "
                        "last_access = excluded.last_access, importance = excluded.importance, kind = excluded.kind, "
                        "payload = excluded.payload, vector = excluded.vector, superseded_by = excluded.superseded_by",
                        vars(row),
                    )  # an update keeps the row number, so logging the row afterwards covers both cases
                    self._log_changes(conn, "owner = ? AND id = ?", (row.owner, row.id))
            self._sync()

    def touch(self, ids: Iterable[str], owner: str, when: datetime) -> int:
        """Set last_access of the owner's memories with these ids; returns how many were updated."""
        ids = rowcodec.check_ids(ids, "Archive.touch")
        rowcodec.check_owner(owner, "Archive.touch")
        when = as_utc(when, "Archive.touch: when")
        with self._lock, self._write() as conn:
            return sum(conn.execute("UPDATE memories SET last_access = ? WHERE owner = ? AND id = ?",
                                    (when.isoformat(), owner, i)).rowcount for i in ids)

    def delete(self, ids: Iterable[str], owner: str) -> int:
        """Delete the owner's memories with these ids and their older versions (others' are untouched); returns how many rows."""
        ids = rowcodec.check_ids(ids, "Archive.delete")
        rowcodec.check_owner(owner, "Archive.delete")
        return self._delete_where([(f"owner = ? AND id IN ({','.join('?' * len(chunk))})", [owner, *chunk])
                                   for chunk in _chunks(ids, 500)], tombstones=[(owner, i, None) for i in ids])

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
        return self._delete_where([("owner = ? AND t_epoch < ?", [owner, cutoff_epoch])],
                                  tombstones=[(owner, None, cutoff_epoch)])

    def _delete_where(self, clauses: Sequence[tuple[str, Sequence]], tombstones: Sequence[tuple] = ()) -> int:
        """Delete the rows matching any (where, params) clause and the older versions of the current ones
        among them, in one transaction (with the deletion's ``tombstones``, see :meth:`deleted_since`),
        then scrub the disk."""
        with self._lock:
            deleted = 0
            with self._write() as conn:
                _record_tombstones(conn, tombstones)
                for where, params in clauses:
                    replaced = conn.execute(f"SELECT owner, id FROM memories WHERE {where} AND {_CURRENT}", params).fetchall()
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
                        f"SELECT {_COLUMNS} FROM memories WHERE owner = ? AND id IN ({marks})", [owner, *chunk]):
                    found[record[2]] = self._decode(record)
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def vectors(self, ids: Iterable[str], owner: str) -> np.ndarray:
        """The stored vectors [N, dim] of the owner's memories with these ids (in order; all must exist)."""
        ids = rowcodec.check_ids(ids, "Archive.vectors")
        rowcodec.check_owner(owner, "Archive.vectors")
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        with self._lock, self._read() as conn:
            for n, memory_id in enumerate(ids):
                record = conn.execute("SELECT vector FROM memories WHERE owner = ? AND id = ?", (owner, memory_id)).fetchone()
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
                records.update((r[0], r) for r in conn.execute(
                    # "+owner": filter by owner but look rows up by primary key; with a plain
                    # "owner = ?" SQLite picks the owner index and scans all the owner's rows
                    f"SELECT {_COLUMNS} FROM memories WHERE +owner = ? AND {_CURRENT} "
                    f"AND row IN ({','.join('?' * len(chunk))})", [owner, *chunk]))
        return records

    def _search_filtered(self, query: np.ndarray, k: int, owner: str, filters: MemoryFilter) -> list[tuple[Memory, float]]:
        """Exact ranking of the owner's current rows that pass ``filters``: clear columns in SQL,
        metadata on the decoded records, checked best first until k match."""
        where, params = _clear_conditions(owner, filters)
        with self._read() as conn:
            candidates = conn.execute(f"SELECT row, vector FROM memories WHERE {where}", params).fetchall()
        if not candidates:
            return []
        vectors = np.frombuffer(b"".join(bytes(v) for _, v in candidates), dtype="<f4").reshape(len(candidates), self.dim)
        scores = vectors @ query
        order = np.argsort(-scores, kind="stable")
        found: list[tuple[Memory, float]] = []
        batch = k if not filters.needs_payload else max(k, 256)
        for start in range(0, len(order), batch):
            positions = order[start:start + batch]
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

    def list_memories(self, owner: str, *, limit: int | None = None, offset: int = 0,
                      filters: MemoryFilter | None = None) -> list[Memory]:
        """The owner's current memories passing ``filters``, ordered by (t, id); ``offset`` skipped, at most ``limit``."""
        rowcodec.check_owner(owner, "Archive.list_memories")
        rowcodec.check_page(limit, offset, "Archive.list_memories")
        filters = MemoryFilter.parse(filters)
        where, params = _clear_conditions(owner, filters)
        query = f"SELECT {_COLUMNS} FROM memories WHERE {where} ORDER BY t_epoch, id"
        with self._lock, self._read() as conn:
            if filters is None or not filters.needs_payload:
                return [self._decode(r) for r in conn.execute(f"{query} LIMIT ? OFFSET ?",
                                                               [*params, -1 if limit is None else limit, offset])]
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
            return [self._decode(r) for r in conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE owner = ? ORDER BY t_epoch, id", (owner,))]

    def history(self, id: str, owner: str) -> list[Memory]:
        """The older versions of the owner's memory ``id`` (rows superseded by it), oldest (first written) first."""
        rowcodec.check_ids([id], "Archive.history")
        rowcodec.check_owner(owner, "Archive.history")
        with self._lock, self._read() as conn:
            return [self._decode(r) for r in conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE owner = ? AND superseded_by = ? ORDER BY row", (owner, id))]

    def count(self, owner: str) -> int:
        """How many current (not superseded) memories the owner has."""
        rowcodec.check_owner(owner, "Archive.count")
        with self._lock:
            return self._require_open().execute(
                f"SELECT count(*) FROM memories WHERE owner = ? AND {_CURRENT}", (owner,)).fetchone()[0]

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
            stones = conn.execute("SELECT id, before FROM deletions WHERE seq > ? AND (owner = ? OR owner IS NULL)",
                                  (int(mark), owner)).fetchall()
        forgotten = set()
        for memory in memories:
            for stone_id, before in stones:
                if (stone_id is None or stone_id == memory.id) and (before is None or memory.t.timestamp() < before):
                    forgotten.add(memory.id)
                    break
        return newest, forgotten

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
    def _decode(self, record: tuple) -> Memory:
        _, owner, memory_id, t, last_access, importance, kind, payload, vector, superseded_by = record
        return rowcodec.decode_row(self._cipher, owner=owner, memory_id=memory_id, t=t, last_access=last_access,
                                   importance=importance, kind=kind, superseded_by=superseded_by,
                                   payload=payload, vector=vector)


_TOMBSTONES = "CREATE TABLE IF NOT EXISTS deletions (seq INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT, id TEXT, before REAL)"


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
        yield items[start:start + size]
