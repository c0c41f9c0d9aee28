"""The embedded archive's statements, built as ``(sql, params)``: the query builder of SQLite.

:class:`SqliteQueries` adds to the shared statements (:class:`~memnets.store.queries.SqlQueries`)
those only the archive runs: its FAISS ids (``row``), its search's reads by row, its FTS5 ranking
(:mod:`memnets.store.sqlite_lexical`), the change log its index files sync from
(:mod:`memnets.store.faiss_sync`) and its re-embedding batches, and the file's own: its schema and format
migrations, the checks on open and re-sealing rows (:mod:`memnets.store.sqlite_schema`), the FTS5 index's
schema and upkeep. The archive's table names are fixed (``memories``, ``meta``, ``changes``, ``reembed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memnets.store.dialect import CURRENT
from memnets.store.queries import SqlQueries, Statement
from memnets.store.sqlite_dialect import in_marks

FTS = "memories_fts"  # the lexical index (memnets.store.sqlite_lexical)
TOKENIZER = "porter unicode61 remove_diacritics 2"
_TEXT_OF = "json_extract(CAST({row}.payload AS TEXT), '$.content')"  # a row's content in its unsealed payload
_LEXICAL_SCHEMA = [
    "CREATE VIEW memories_text AS SELECT row, hex(owner) AS owner_key, "
    f"{_TEXT_OF.format(row='memories')} AS body FROM memories WHERE superseded_by IS NULL",
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(owner_key, body, content='memories_text', content_rowid='row', "
    f"tokenize='{TOKENIZER}')",
    "CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN new.superseded_by IS NULL BEGIN "
    f"INSERT INTO {FTS} (rowid, owner_key, body) VALUES (new.row, hex(new.owner), {_TEXT_OF.format(row='new')}); "
    "END",
    "CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN old.superseded_by IS NULL BEGIN "
    f"INSERT INTO {FTS} ({FTS}, rowid, owner_key, body) "
    f"VALUES ('delete', old.row, hex(old.owner), {_TEXT_OF.format(row='old')}); END",
    "CREATE TRIGGER memories_fts_update AFTER UPDATE OF owner, payload, superseded_by ON memories BEGIN "
    f"INSERT INTO {FTS} ({FTS}, rowid, owner_key, body) "
    f"SELECT 'delete', old.row, hex(old.owner), {_TEXT_OF.format(row='old')} WHERE old.superseded_by IS NULL; "
    f"INSERT INTO {FTS} (rowid, owner_key, body) "
    f"SELECT new.row, hex(new.owner), {_TEXT_OF.format(row='new')} WHERE new.superseded_by IS NULL; END",
]

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
    expires_at TEXT,                        -- ISO 8601 UTC (NULL: never expires), not sealed, like last_access
    expires_epoch REAL,                     -- the same instant, for comparisons
    ttl REAL,                               -- seconds a refresh on read gives the row again
    chunks BLOB,                            -- float32 [m, dim]: a long memory's further windows (NULL: none)
    UNIQUE (owner, id)
);
CREATE INDEX memories_owner_expires ON memories (owner, expires_epoch) WHERE expires_epoch IS NOT NULL;
CREATE INDEX memories_owner_t ON memories (owner, t_epoch);
CREATE INDEX memories_t ON memories (t_epoch);
CREATE INDEX memories_owner_superseded ON memories (owner, superseded_by);
CREATE INDEX memories_owner_kind ON memories (owner, kind);  -- kind filters read only matching rows
CREATE INDEX memories_owner_chunked ON memories (owner) WHERE chunks IS NOT NULL;  -- a search reads only long memories' chunks
CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, row INTEGER NOT NULL);
CREATE TABLE reembed (row INTEGER PRIMARY KEY, version INTEGER NOT NULL, vector BLOB NOT NULL, chunks BLOB);
"""
# reembed: a re-embedding's new vectors (memnets.store.reembed), one per memories row at the version it was
# embedded from; swapped into memories in one transaction when every row has one. The encoder that filled the
# archive is the meta key "encoder" (memnets.store.identity), recorded with the first vector.
# format N -> N + 1, run in the open's write transaction (memnets.store.sqlite_schema: its further steps)
_MIGRATIONS = {
    1: [
        "ALTER TABLE memories ADD COLUMN superseded_by TEXT",
        "CREATE INDEX memories_owner_superseded ON memories (owner, superseded_by)",
    ],
    2: [
        "ALTER TABLE memories ADD COLUMN version INTEGER NOT NULL DEFAULT 1",  # + _bind_rows (archive id)
        "CREATE INDEX IF NOT EXISTS memories_owner_kind ON memories (owner, kind)",
    ],
    3: [  # expiry (TTL); + _tag_ledger (the deletion ledger names owners and ids by keyed hashes)
        "ALTER TABLE memories ADD COLUMN expires_at TEXT",
        "ALTER TABLE memories ADD COLUMN expires_epoch REAL",
        "ALTER TABLE memories ADD COLUMN ttl REAL",
        "CREATE INDEX memories_owner_expires ON memories (owner, expires_epoch) WHERE expires_epoch IS NOT NULL",
    ],
    4: ["CREATE TABLE IF NOT EXISTS reembed (row INTEGER PRIMARY KEY, version INTEGER NOT NULL, vector BLOB NOT NULL)"],
    5: [  # long memories: the vectors of their further windows (memnets.store.chunks), also while re-embedding
        "ALTER TABLE memories ADD COLUMN chunks BLOB",
        "ALTER TABLE reembed ADD COLUMN chunks BLOB",
        "CREATE INDEX memories_owner_chunked ON memories (owner) WHERE chunks IS NOT NULL",
    ],
    6: [],  # + the lexical index of an archive without a key (sqlite_lexical.create), from its rows
}
_UNIQUE_INDEX = "sqlite_autoindex_memories_1"  # the (owner, id) index SQLite builds for UNIQUE (owner, id)

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


class SqliteQueries(SqlQueries):
    """The archive's statements over its :class:`~memnets.store.sqlite_dialect.SqliteDialect`."""

    def upsert(self) -> str:
        return _UPSERT  # over a stored (owner, id) it keeps its row number (its FAISS id)

    def deletions_table(self) -> Statement:
        return (
            "CREATE TABLE IF NOT EXISTS deletions "
            "(seq INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT, id TEXT, before REAL)",
            [],
        )

    def deletions_exist(self) -> Statement:
        return "SELECT (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'deletions')", []

    # ------------------------------------------------------------------ search
    def has_expired(self, owner: str, now: datetime) -> Statement:
        """One row where the owner has a current row expired at ``now`` and not swept yet."""
        return (
            f"SELECT 1 FROM memories WHERE owner = ? AND expires_epoch <= ? AND {CURRENT} LIMIT 1",
            [owner, now.timestamp()],
        )

    def records_by_row(self, owner: str, now: datetime, rows: Sequence[int]) -> Statement:
        """The owner's current records unexpired at ``now`` with these row numbers (at most ``in_batch``)."""
        d = self.d
        # "+owner": filter by owner but look rows up by primary key; with a plain
        # "owner = ?" SQLite picks the owner index and scans all the owner's rows
        return (
            f"SELECT {d.select()} FROM memories WHERE +owner = ? AND {CURRENT} AND {d.live} "
            f"AND row IN ({in_marks(rows)})",
            [owner, now.timestamp(), *rows],
        )

    def candidates(self, where: str, params: list) -> Statement:
        """(row, vector, chunks) of the rows matching ``where``: what an exact ranking scores."""
        return f"SELECT row, vector, chunks FROM memories WHERE {where}", params

    def lexical(self, match: str, where: str, params: list, limit: int) -> Statement:
        """(row, score) of the rows matching ``where`` that the FTS5 query ``match`` finds, best first, at most
        ``limit`` (-1: all). bm25() is lower for better rows; the owner column weighs 0; the score is its negation."""
        return (
            f"SELECT memories.row, -bm25({FTS}, 0.0, 1.0) AS score FROM {FTS} "
            f"JOIN memories ON memories.row = {FTS}.rowid WHERE {FTS} MATCH ? AND {where} "
            "ORDER BY score DESC, memories.row LIMIT ?",
            [match, *params, limit],
        )

    # ------------------------------------------------------------------ the index's change log
    def generation(self) -> Statement:
        """The change log's newest sequence number (no row: nothing logged yet)."""
        return "SELECT seq FROM sqlite_sequence WHERE name = 'changes'", []

    def current_count(self) -> Statement:
        """How many current rows the table holds (what the index holds)."""
        return f"SELECT count(*) FROM memories WHERE {CURRENT}", []

    def current_vectors(self) -> Statement:
        """(row, owner, vector) of every current row, by owner and row."""
        return f"SELECT row, owner, vector FROM memories WHERE {CURRENT} ORDER BY owner, row", []

    def index_meta(self) -> Statement:
        """(key, value) of the meta rows the index sync reads."""
        return "SELECT key, value FROM meta WHERE key IN ('dim', 'pruned_through')", []

    def changed(self, after: int, through: int) -> Statement:
        """Every row changed in the log after ``after`` through ``through``, with its owner and vector where
        it is current (else NULLs), by owner and row."""
        return (
            "SELECT c.row, m.owner, m.vector FROM (SELECT DISTINCT row FROM changes WHERE seq > ? AND "
            f"seq <= ?) c LEFT JOIN memories m ON m.row = c.row AND {CURRENT} ORDER BY m.owner, c.row",
            [after, through],
        )

    def log_changes(self, where: str, params: Sequence) -> Statement:
        """Log the rows matching ``where`` as changed."""
        return f"INSERT INTO changes (row) SELECT row FROM memories WHERE {where}", list(params)

    def oldest_change(self) -> Statement:
        return "SELECT min(seq) FROM changes", []

    def prune_changes(self, cutoff: int) -> Statement:
        """Drop the log's entries up to ``cutoff``."""
        return "DELETE FROM changes WHERE seq <= ?", [cutoff]

    def pruned_through(self, cutoff: int) -> Statement:
        """Record how far the log was pruned."""
        return "INSERT OR REPLACE INTO meta (key, value) VALUES ('pruned_through', ?)", [cutoff]

    # ------------------------------------------------------------------ re-embedding
    def todo_batch(self, size: int) -> Statement:
        """Up to ``size`` records without a re-embedded vector at their version, in row order."""
        return f"SELECT {self.d.select('m')} {self.todo()} ORDER BY m.row LIMIT ?", [size]

    def save_reembedded(self) -> str:
        """One re-embedded vector (run for many: row, version, vector, chunks each); a row rewritten or
        deleted since it was read is skipped (the next batch embeds its new version)."""
        return (
            "INSERT OR REPLACE INTO reembed (row, version, vector, chunks) "
            "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE row = ?1 AND version = ?2)"
        )

    # ------------------------------------------------------------------ the file: schema, format, checks
    def schema(self) -> list[Statement]:
        """The tables and indexes of a new archive."""
        return [(statement, []) for statement in _SCHEMA.split(";") if statement.strip()]

    def migration(self, version: int) -> list[Statement]:
        """The statements taking an archive of format ``version`` to the next one."""
        return [(statement, []) for statement in _MIGRATIONS[version]]

    def format_version(self) -> Statement:
        return "PRAGMA user_version", []

    def set_format_version(self, version: int) -> Statement:
        return f"PRAGMA user_version = {int(version)}", []

    def table_names(self) -> Statement:
        return "SELECT name FROM sqlite_master WHERE type = 'table'", []

    def table_exists(self, name: str) -> Statement:
        """One row where the table ``name`` exists."""
        return "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [name]

    def integrity(self, full: bool) -> Statement:
        """SQLite's check of the file (``full``: integrity_check, else quick_check), its first 20 problems."""
        return f"PRAGMA {'integrity_check' if full else 'quick_check'}(20)", []

    def unique_index_exists(self) -> Statement:
        return "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", [_UNIQUE_INDEX]

    def rows_unindexed(self) -> Statement:
        """(rows in the table, rows missing from the (owner, id) index), read without the index."""
        return (
            "SELECT count(*), coalesce(sum(NOT EXISTS (SELECT 1 FROM memories AS i INDEXED BY "
            f"{_UNIQUE_INDEX} WHERE i.owner = m.owner AND i.id = m.id AND i.row = m.row)), 0) "
            "FROM memories AS m NOT INDEXED",
            [],
        )

    def rows_indexed(self) -> Statement:
        """How many rows the (owner, id) index holds."""
        return f"SELECT count(*) FROM memories INDEXED BY {_UNIQUE_INDEX}", []

    def all_meta(self) -> Statement:
        return "SELECT key, value FROM meta", []

    def add_meta(self, *, replace: bool = False) -> str:
        """One meta value (run for many: (key, value) each); ``replace``: over a stored key."""
        return f"INSERT {'OR REPLACE ' if replace else ''}INTO meta (key, value) VALUES (?, ?)"

    def tombstones(self) -> Statement:
        """(seq, owner, id, before) of every tombstone (the format-4 upgrade tags them)."""
        return "SELECT seq, owner, id, before FROM deletions", []

    def tag_tombstone(self) -> str:
        """One tombstone's owner, id and before, by seq (run for many)."""
        return "UPDATE deletions SET owner = ?, id = ?, before = ? WHERE seq = ?"

    def row_numbers(self) -> Statement:
        return "SELECT row FROM memories ORDER BY row", []

    def records_of_rows(self, rows: Sequence[int]) -> Statement:
        """The records with these row numbers (at most ``in_batch``)."""
        return f"SELECT {self.d.select()} FROM memories WHERE row IN ({in_marks(rows)})", list(rows)

    def set_payload(self, row: int, payload: bytes) -> Statement:
        return "UPDATE memories SET payload = ? WHERE row = ?", [payload, row]

    # ------------------------------------------------------------------ the lexical index (memnets.store.sqlite_lexical)
    def has_fts5(self) -> Statement:
        """One value, true where this SQLite has FTS5."""
        return "SELECT sqlite_compileoption_used('ENABLE_FTS5')", []

    def lexical_schema(self) -> list[Statement]:
        """The FTS5 table over the current rows' text and the triggers that keep it in step."""
        return [(statement, []) for statement in _LEXICAL_SCHEMA]

    def lexical_command(self, command: str) -> Statement:
        """An FTS5 command on the index: "rebuild" (from the rows) or "optimize" (merge into one segment)."""
        return f"INSERT INTO {FTS} ({FTS}) VALUES (?)", [command]

    def lexical_exists(self) -> Statement:
        return "SELECT 1 FROM sqlite_master WHERE name = ?", [FTS]

    # ------------------------------------------------------------------ the connection and its transactions (memnets.store.archive)
    def incremental_vacuum_mode(self) -> Statement:
        """Free pages go back to the file system on request (takes effect on a new, empty file only)."""
        return "PRAGMA auto_vacuum = INCREMENTAL", []

    def wal_mode(self) -> Statement:
        """Write-ahead logging; answers the journal mode now in force."""
        return "PRAGMA journal_mode = WAL", []

    def connection_settings(self, busy_timeout: float) -> list[Statement]:
        """A connection's durability and scrubbing: commits that survive a power cut (``synchronous=FULL``),
        deleted cells and pages overwritten with zeros, and the wait for another process's write lock."""
        return [
            ("PRAGMA synchronous = FULL", []),
            ("PRAGMA secure_delete = ON", []),
            (f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}", []),
        ]

    def begin(self, *, immediate: bool) -> Statement:
        """Open a transaction (``immediate``: a write one, taking the write lock at once)."""
        return ("BEGIN IMMEDIATE" if immediate else "BEGIN"), []

    def commit(self) -> Statement:
        return "COMMIT", []

    def rollback(self) -> Statement:
        return "ROLLBACK", []

    def savepoint(self) -> Statement:
        return "SAVEPOINT memnets", []

    def rollback_to_savepoint(self) -> list[Statement]:
        """Undo what the block did since the savepoint, and leave it."""
        return [("ROLLBACK TO memnets", []), ("RELEASE memnets", [])]

    def release_savepoint(self) -> Statement:
        return "RELEASE memnets", []

    def data_version(self) -> Statement:
        """A read of the file's change counter (it takes an error SQLite left on the connection)."""
        return "PRAGMA data_version", []

    def checkpoint(self) -> Statement:
        """Fold the write-ahead log into the file and truncate it; answers (busy, log frames, folded frames)."""
        return "PRAGMA wal_checkpoint(TRUNCATE)", []

    def incremental_vacuum(self) -> str:
        """Return every free page to the file system: a script (one ``execute`` frees one page)."""
        return "PRAGMA incremental_vacuum;"
