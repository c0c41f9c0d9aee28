"""What the two SQL stores spell differently, and the statements the store core builds from it.

The store core (:mod:`memnets.store.core`) holds the contract's logic once; a dialect says how one
engine writes it: the placeholder (``?`` or ``%s``), table and column names, how times, vectors and
lists of ids are bound, how an engine's values read back as a row's text and bytes, row locks and
collations. Following the habit of LangGraph's Postgres store, a dialect *builds* statements and
their parameters (``(sql, params)``) and never runs them: the core and the engine's store do.

:class:`SqlDialect` holds the statements both engines share, written in the fragments each dialect
sets; :mod:`memnets.store.sqlite_dialect` and :mod:`memnets.store.pg_dialect` are the two dialects.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cached_property

import numpy as np

from memnets.store import rows as rowcodec
from memnets.store.filters import MemoryFilter
from memnets.timeutil import as_utc

CURRENT = "superseded_by IS NULL"  # rows that search, listings, counts and indexes see


class SqlDialect:
    """One engine's spelling; subclasses set the fragments below and the conversions of values."""

    mark = "?"  # a bound parameter
    memories = "memories"  # table names, as they stand in SQL
    meta = "meta"
    reembed = "reembed"
    deletions = "deletions"
    columns: tuple[str, ...] = ()  # the memories columns of rowcodec.FIELDS, in its order
    t_column = "t"  # what time filters, purges and listings compare and order by
    expires_column = "expires_at"  # what expiry is compared by
    reembed_key = "owner, id"  # the reembed table's reference to its memories row
    for_update = ""  # the row lock of a read-modify-write ("" where a write transaction is exclusive)
    binary_order = ""  # what makes ORDER BY of a text column compare bytes
    no_limit: object = None  # the LIMIT parameter that means no limit
    in_batch = 500  # the most values one IN list binds
    upsert = ""  # one row written (row_params gives its parameters)
    deletions_table = ""  # the tombstone table, created by the first deletion
    chunked_hint = ""  # what makes a read of the chunks column use the index of rows that have them
    swap_lock = ""  # what a re-embedding's swap locks first ("" where a write transaction is exclusive)
    expiry_set = ""  # the SET clause of a row's expiry (its values: expiry_values)

    # ------------------------------------------------------------------ fragments
    @property
    def live(self) -> str:
        """Rows not expired at the time bound to its one parameter."""
        return f"({self.expires_column} IS NULL OR {self.expires_column} > {self.mark})"

    def select(self, alias: str = "") -> str:
        """The memory columns to select (``alias``: of the table so named in a join)."""
        if not alias:
            return self._columns_text
        return ", ".join(f"{alias}.{column}" for column in self.columns)

    @cached_property
    def _columns_text(self) -> str:
        """The memory columns as every read without a join selects them (built once: each search reads it)."""
        return ", ".join(self.columns)

    def in_list(self, column: str, values: Sequence) -> tuple[str, list]:
        """``column`` is one of ``values`` (at most :attr:`in_batch` of them)."""
        return f"{column} IN ({','.join(self.mark * len(values))})", list(values)

    def todo(self) -> str:
        """FROM clause of the rows that have no re-embedded vector at their version (alias ``m``)."""
        match = " AND ".join(f"r.{c} = m.{c}" for c in self.reembed_key.split(", "))
        return (
            f"FROM {self.memories} m WHERE NOT EXISTS "
            f"(SELECT 1 FROM {self.reembed} r WHERE {match} AND r.version = m.version)"
        )

    # ------------------------------------------------------------------ values
    def time(self, when: datetime):
        """``when`` as :attr:`t_column` and :attr:`expires_column` compare it."""
        return as_utc(when)

    def stamp(self, when: datetime):
        """``when`` as a timestamp column (last_access) stores it."""
        return when

    def expiry_values(self, expires: datetime) -> list:
        """The values of :attr:`expiry_set` that make a row expire at ``expires``."""
        return [expires]

    def vector_param(self, vector: np.ndarray):
        """A vector [dim] as its column binds it."""
        return vector

    def vector_array(self, value, dim: int, memory_id) -> np.ndarray:
        """A vector column's value as float32 [dim]."""
        raise NotImplementedError

    def row_params(self, row: rowcodec.Row, vector: np.ndarray):
        """The parameters of :attr:`upsert` for a sealed row and its vector."""
        raise NotImplementedError

    def row_text(self, fields: dict) -> dict:
        """A record's fields (:func:`memnets.store.rows.named`) with times as ISO text and vectors as
        float32 bytes, as :func:`memnets.store.rows.decode_row` and the seals read them."""
        return fields

    def meta_value(self, text: str):
        """A meta value as its column stores it."""
        return text

    def lock(self, purpose: str) -> tuple[str, list] | None:
        """A statement serialising this ``purpose`` across connections until the transaction ends
        (None where every write transaction is exclusive already)."""
        return None

    def deletions_exist(self) -> tuple[str, list]:
        """One value, NULL while the tombstone table is missing."""
        raise NotImplementedError

    # ------------------------------------------------------------------ statements
    def clear_conditions(self, owner: str, filters: MemoryFilter | None, now: datetime) -> tuple[str, list]:
        """Conditions (and parameters) for the owner's current rows, unexpired at ``now``, passing the
        clear-column part of ``filters`` (kinds, time range)."""
        where, params = [f"owner = {self.mark} AND {CURRENT} AND {self.live}"], [owner, self.time(now)]
        if filters is not None:
            if filters.kinds is not None:
                kinds, values = self.in_list("kind", list(filters.kinds))
                where.append(kinds)
                params.extend(values)
            if filters.since is not None:
                where.append(f"{self.t_column} >= {self.mark}")
                params.append(self.time(filters.since))
            if filters.until is not None:
                where.append(f"{self.t_column} < {self.mark}")
                params.append(self.time(filters.until))
        return " AND ".join(where), params

    def get_meta(self, key: str) -> tuple[str, list]:
        return f"SELECT value FROM {self.meta} WHERE key = {self.mark}", [key]

    def set_meta(self, key: str, text: str, *, replace: bool = True) -> tuple[str, list]:
        """Write a meta value (``replace=False``: only where the key has none yet)."""
        action = "UPDATE SET value = excluded.value" if replace else "NOTHING"
        return (
            f"INSERT INTO {self.meta} (key, value) VALUES ({self.mark}, {self.mark}) ON CONFLICT (key) DO {action}",
            [key, self.meta_value(text)],
        )

    def drop_reembedded(self, where: str, params: list) -> tuple[str, list]:
        """Drop the re-embedded vectors of the memories rows matching ``where``."""
        key = self.reembed_key
        return f"DELETE FROM {self.reembed} WHERE ({key}) IN (SELECT {key} FROM {self.memories} WHERE {where})", params

    def update_vector(self) -> str:
        """A row's payload, vector, chunks and version, by (owner, id): a re-embedding's swap."""
        vector = self.columns[rowcodec.FIELDS.index("vector")]
        m = self.mark
        return (
            f"UPDATE {self.memories} SET payload = {m}, {vector} = {m}, chunks = {m}, version = {m} "
            f"WHERE owner = {m} AND id = {m}"
        )
