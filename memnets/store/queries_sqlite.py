"""The embedded archive's statements, built as ``(sql, params)``: the query builder of SQLite.

:class:`SqliteQueries` adds to the shared statements (:class:`~memnets.store.queries.SqlQueries`)
those only the archive runs: its FAISS ids (``row``), its search's reads by row, its FTS5 ranking
(:mod:`memnets.store.sqlite_lexical`), the change log its index files sync from
(:mod:`memnets.store.faiss_sync`) and its re-embedding batches. The archive's table names are fixed (``memories``, ``meta``, ``changes``, ``reembed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memnets.store.dialect import CURRENT
from memnets.store.queries import SqlQueries, Statement
from memnets.store.sqlite_dialect import in_marks
from memnets.store.sqlite_lexical import TABLE as FTS

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
