"""What the two SQL stores spell differently: the fragments and value conversions the query builders use.

The store core (:mod:`memnets.store.core`) holds the contract's logic once; a dialect says how one
engine spells it: the placeholder (``?`` or ``%s``), table and column names, how times, vectors and
lists of ids are bound, how an engine's values read back as a row's text and bytes, row locks and
collations, and the conditions (``where`` and its parameters) of an owner's rows and of the
clear-column filters. It holds no statement: the query builders (:mod:`memnets.store.queries` and
one per engine) build every statement from it, as ``(sql, params)``.

:mod:`memnets.store.sqlite_dialect` and :mod:`memnets.store.pg_dialect` are the two dialects.
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
    binary_order = ""  # what makes ORDER BY of a text column compare bytes
    no_limit: object = None  # the LIMIT parameter that means no limit
    in_batch = 500  # the most values one IN list binds
    chunked_hint = ""  # what makes a read of the chunks column use the index of rows that have them
    expiry_set = ""  # the SET clause of a row's expiry (its values: expiry_values)

    # ------------------------------------------------------------------ fragments (conditions, never statements)
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
        """The parameters of the builder's ``upsert`` for a sealed row and its vector."""
        raise NotImplementedError

    def row_text(self, fields: dict) -> dict:
        """A record's fields (:func:`memnets.store.rows.named`) with times as ISO text and vectors as
        float32 bytes, as :func:`memnets.store.rows.decode_row` and the seals read them."""
        return fields

    def meta_value(self, text: str):
        """A meta value as its column stores it."""
        return text

    # ------------------------------------------------------------------ conditions
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
