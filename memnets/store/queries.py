"""The statements of the store core, built as ``(sql, params)`` from one engine's dialect: the shared query builder.

The store core (:mod:`memnets.store.core` and its parts) holds the contract's logic and runs
statements; it writes none. Each statement it runs is built here, as LangGraph's Postgres store
builds its own: a method returning the SQL text and its parameters, over the fragments and value
conversions of the engine's :class:`~memnets.store.dialect.SqlDialect` (placeholder, table and
column names, how times bind). Conditions (``where``: an owner's ids, the clear-column filters)
come in with their parameters, as the core builds them from the dialect's fragments.

A statement run for many rows (``executemany``) is built as its SQL text alone; its parameter rows
are the caller's.
"""

from __future__ import annotations

from datetime import datetime

from memnets.store import rows as rowcodec
from memnets.store.dialect import CURRENT, SqlDialect

Statement = tuple[str, list]


class SqlQueries:
    """The core's statements over ``dialect`` (see the module docstring)."""

    for_update = ""  # the row lock of a read-modify-write ("" where a write transaction is exclusive)

    def __init__(self, dialect: SqlDialect) -> None:
        self.d = dialect

    # ------------------------------------------------------------------ rows written
    def upsert(self) -> str:
        """One row written: inserted, or over the stored (owner, id) (run for many: the dialect's
        ``row_params`` of each sealed row)."""
        raise NotImplementedError

    def update_vector(self) -> str:
        """A row's payload, vector, chunks and version, by (owner, id): a re-embedding's swap (run for many)."""
        d, m = self.d, self.d.mark
        vector = d.columns[rowcodec.FIELDS.index("vector")]
        return (
            f"UPDATE {d.memories} SET payload = {m}, {vector} = {m}, chunks = {m}, version = {m} "
            f"WHERE owner = {m} AND id = {m}"
        )

    def drop_reembedded(self, where: str, params: list) -> Statement:
        """Drop the re-embedded vectors of the memories rows matching ``where``."""
        d, key = self.d, self.d.reembed_key
        return f"DELETE FROM {d.reembed} WHERE ({key}) IN (SELECT {key} FROM {d.memories} WHERE {where})", params

    # ------------------------------------------------------------------ meta values and locks
    def get_meta(self, key: str) -> Statement:
        return f"SELECT value FROM {self.d.meta} WHERE key = {self.d.mark}", [key]

    def set_meta(self, key: str, text: str, *, replace: bool = True) -> Statement:
        """Write a meta value (``replace=False``: only where the key has none yet)."""
        d = self.d
        action = "UPDATE SET value = excluded.value" if replace else "NOTHING"
        return (
            f"INSERT INTO {d.meta} (key, value) VALUES ({d.mark}, {d.mark}) ON CONFLICT (key) DO {action}",
            [key, d.meta_value(text)],
        )

    def drop_meta(self, key: str) -> Statement:
        d = self.d
        return f"DELETE FROM {d.meta} WHERE key = {d.mark}", [key]

    def lock(self, purpose: str) -> Statement | None:
        """A statement serialising this ``purpose`` across connections until the transaction ends
        (None where every write transaction is exclusive already)."""
        return None

    def swap_lock(self) -> Statement | None:
        """What a re-embedding's swap locks first (None where a write transaction is exclusive)."""
        return None

    # ------------------------------------------------------------------ writes
    def stored_versions(self, where: str, params: list) -> Statement:
        """(id, version) of the rows matching ``where``, locked where the engine locks rows, by id."""
        d = self.d
        return f"SELECT id, version FROM {d.memories} WHERE {where} ORDER BY id{self.for_update}", params

    def expired_ids(self, where: str, params: list, now: datetime) -> Statement:
        """The ids of the rows matching ``where`` that are expired at ``now``."""
        d = self.d
        return f"SELECT id FROM {d.memories} WHERE {where} AND {d.expires_column} <= {d.mark}", [*params, d.time(now)]

    def touch(self, where: str, params: list, when: datetime) -> Statement:
        """Set last_access of the rows matching ``where`` to ``when``."""
        d = self.d
        return f"UPDATE {d.memories} SET last_access = {d.mark} WHERE {where}", [d.stamp(when), *params]

    def ttls(self, where: str, params: list, now: datetime) -> Statement:
        """(id, ttl) of the rows matching ``where`` that have a TTL and are unexpired at ``now``."""
        d = self.d
        return f"SELECT id, ttl FROM {d.memories} WHERE {where} AND ttl IS NOT NULL AND {d.live}", [
            *params,
            d.time(now),
        ]

    def set_expiry(self) -> str:
        """A row's expiry by (owner, id) (run for many: ``[*expiry_values, owner, id]`` each)."""
        d = self.d
        return f"UPDATE {d.memories} SET {d.expiry_set} WHERE owner = {d.mark} AND id = {d.mark}"

    def expired(self, where: str, params: list) -> Statement:
        """(owner, id) of the rows matching ``where``, sorted by bytes."""
        d = self.d
        return (
            f"SELECT owner, id FROM {d.memories} WHERE {where} ORDER BY owner{d.binary_order}, id{d.binary_order}",
            params,
        )

    def still_expired(self, owner: str, memory_id: str, now) -> Statement:
        """One row while the owner's memory is expired at ``now`` (an engine's time value), locked where rows are."""
        d = self.d
        return (
            f"SELECT 1 FROM {d.memories} WHERE owner = {d.mark} AND id = {d.mark} AND {d.expires_column} <= {d.mark}"
            f"{self.for_update}",
            [owner, memory_id, now],
        )

    def current_keys(self, where: str, params: list) -> Statement:
        """(owner, id) of the current rows matching ``where``."""
        return f"SELECT owner, id FROM {self.d.memories} WHERE {where} AND {CURRENT}", params

    def delete(self, where: str, params: list) -> Statement:
        """Delete the rows matching ``where``."""
        return f"DELETE FROM {self.d.memories} WHERE {where}", params

    # ------------------------------------------------------------------ versions (memnets.store.core_versions)
    def current_row(self, owner: str, memory_id: str, now: datetime) -> Statement:
        """The owner's current record ``memory_id`` unexpired at ``now``, locked where the engine locks rows."""
        d, m = self.d, self.d.mark
        return (
            f"SELECT {d.select()} FROM {d.memories} WHERE owner = {m} AND id = {m} AND {CURRENT} AND {d.live}"
            f"{self.for_update}",
            [owner, memory_id, d.time(now)],
        )

    def version_count(self, owner: str, memory_id: str) -> Statement:
        """How many older versions the owner's memory ``memory_id`` has."""
        m = self.d.mark
        return f"SELECT count(*) FROM {self.d.memories} WHERE owner = {m} AND superseded_by = {m}", [owner, memory_id]

    def exists(self, owner: str, memory_id: str) -> Statement:
        """One row where the owner has a row ``memory_id``."""
        m = self.d.mark
        return f"SELECT 1 FROM {self.d.memories} WHERE owner = {m} AND id = {m}", [owner, memory_id]

    # ------------------------------------------------------------------ the deletion ledger
    def deletions_table(self) -> Statement:
        """Create the tombstone table where it is missing (the first deletion does)."""
        raise NotImplementedError

    def deletions_exist(self) -> Statement:
        """One value, NULL while the tombstone table is missing."""
        raise NotImplementedError

    def erase_tombstones(self, owner_tag: str) -> Statement:
        """Drop the tombstones of one owner (by its ledger tag)."""
        d = self.d
        return f"DELETE FROM {d.deletions} WHERE owner = {d.mark}", [owner_tag]

    def add_tombstone(self) -> str:
        """One tombstone (run for many: (owner tag, id tag, before) each)."""
        d = self.d
        return f"INSERT INTO {d.deletions} (owner, id, before) VALUES ({d.mark}, {d.mark}, {d.mark})"

    def ledger_mark(self) -> Statement:
        """The newest tombstone's sequence number (0: none)."""
        return f"SELECT coalesce(max(seq), 0) FROM {self.d.deletions}", []

    def tombstones_since(self, mark: int, newest: int, owner_tag: str) -> Statement:
        """(id tag, before) of the tombstones after ``mark`` up to ``newest`` of one owner or of all."""
        m = self.d.mark
        return (
            f"SELECT id, before FROM {self.d.deletions} WHERE seq > {m} AND seq <= {m} AND (owner = {m} OR owner IS NULL)",
            [int(mark), newest, owner_tag],
        )

    # ------------------------------------------------------------------ reads
    def rows(self, where: str, params: list, now: datetime | None = None, *, current: bool = False) -> Statement:
        """The records of the rows matching ``where`` (``current``: not superseded; ``now``: unexpired then)."""
        d = self.d
        conditions = [where, *([CURRENT] if current else []), *([d.live] if now is not None else [])]
        return (
            f"SELECT {d.select()} FROM {d.memories} WHERE {' AND '.join(conditions)}",
            [*params, *([d.time(now)] if now is not None else [])],
        )

    def field(self, column: str, where: str, params: list) -> Statement:
        """(id, ``column``) of the rows matching ``where``."""
        return f"SELECT id, {column} FROM {self.d.memories} WHERE {where}", params

    def versions(self, owner: str, now: datetime) -> Statement:
        """Every row of the owner unexpired at ``now``, older versions included, in write order."""
        d = self.d
        return (
            f"SELECT {d.select()} FROM {d.memories} WHERE owner = {d.mark} AND {d.live} ORDER BY {d.columns[0]}",
            [owner, d.time(now)],
        )

    def windows(self, where: str, params: list) -> Statement:
        """(id, chunk bytes) of the long memories among the rows matching ``where``."""
        d = self.d
        return f"SELECT id, chunks FROM {d.memories} {d.chunked_hint} WHERE {where} AND chunks IS NOT NULL", params

    def listing(self, where: str, params: list) -> Statement:
        """The records of the rows matching ``where``, by (t, id)."""
        d = self.d
        return f"SELECT {d.select()} FROM {d.memories} WHERE {where} ORDER BY {d.t_column}, id", params

    def page(self, where: str, params: list, limit: int | None, offset: int) -> Statement:
        """:meth:`listing`, ``offset`` skipped, at most ``limit`` (None: all)."""
        query, params = self.listing(where, params)
        d = self.d
        return f"{query} LIMIT {d.mark} OFFSET {d.mark}", [*params, d.no_limit if limit is None else limit, offset]

    def export(self, owner: str) -> Statement:
        """Every row of the owner, by (t, id)."""
        d = self.d
        return f"SELECT {d.select()} FROM {d.memories} WHERE owner = {d.mark} ORDER BY {d.t_column}, id", [owner]

    def history(self, owner: str, memory_id: str) -> Statement:
        """The owner's rows superseded by ``memory_id``, in write order."""
        d = self.d
        return (
            f"SELECT {d.select()} FROM {d.memories} WHERE owner = {d.mark} AND superseded_by = {d.mark} "
            f"ORDER BY {d.columns[0]}",
            [owner, memory_id],
        )

    def count(self, owner: str, now: datetime) -> Statement:
        """How many current rows the owner has unexpired at ``now``."""
        d = self.d
        return (
            f"SELECT count(*) FROM {d.memories} WHERE owner = {d.mark} AND {CURRENT} AND {d.live}",
            [owner, d.time(now)],
        )

    def owners(self, now: datetime) -> Statement:
        """The owners of rows unexpired at ``now``, sorted."""
        d = self.d
        return f"SELECT DISTINCT owner FROM {d.memories} WHERE {d.live} ORDER BY owner", [d.time(now)]

    # ------------------------------------------------------------------ the encoder binding and re-embedding
    def any_row(self) -> Statement:
        """One value where the store holds a row."""
        return f"SELECT 1 FROM {self.d.memories} LIMIT 1", []

    def row_count(self) -> Statement:
        return f"SELECT count(*) FROM {self.d.memories}", []

    def todo_count(self) -> Statement:
        """How many rows have no re-embedded vector at their version."""
        return f"SELECT count(*) {self.todo()}", []

    def any_todo(self) -> Statement:
        """One value where a row has no re-embedded vector at its version."""
        return f"SELECT 1 {self.todo()} LIMIT 1", []

    def reembedded(self) -> Statement:
        """Every row's record with its re-embedded vector and chunks (the record's columns, then those two),
        in write order."""
        d = self.d
        return (
            f"SELECT {d.select('m')}, r.{d.columns[rowcodec.FIELDS.index('vector')]}, r.chunks "
            f"FROM {d.memories} m JOIN {d.reembed} r USING ({d.reembed_key}) ORDER BY m.{d.columns[0]}",
            [],
        )

    def todo(self) -> str:
        """FROM clause of the rows that have no re-embedded vector at their version (alias ``m``)."""
        d = self.d
        match = " AND ".join(f"r.{c} = m.{c}" for c in d.reembed_key.split(", "))
        return f"FROM {d.memories} m WHERE NOT EXISTS (SELECT 1 FROM {d.reembed} r WHERE {match} AND r.version = m.version)"

    def clear_reembedded(self) -> Statement:
        """Drop every re-embedded vector."""
        return f"DELETE FROM {self.d.reembed}", []
