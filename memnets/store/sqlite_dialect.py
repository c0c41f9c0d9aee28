"""The embedded archive's SQL dialect: SQLite's spelling of the store's statements (:mod:`memnets.store.dialect`).

Times are compared as epoch seconds (``t_epoch``, ``expires_epoch``, beside the ISO text the seal
binds), vectors are little-endian float32 blobs, a row's write order is its ``row`` number (the
FAISS id), and the re-embedding table is keyed by it. Every write transaction is ``BEGIN
IMMEDIATE``, exclusive for the whole file, so nothing locks rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from memnets.store import rows as rowcodec
from memnets.store.dialect import SqlDialect
from memnets.store.errors import StoreIntegrityError
from memnets.timeutil import as_utc

COLUMNS = (  # the memories columns of memnets.store.rows.FIELDS, in its order
    "row, owner, id, t, last_access, importance, kind, superseded_by, payload, vector, version, expires_at, ttl, chunks"
)


class SqliteDialect(SqlDialect):
    """SQLite: ``?`` parameters, epoch-second comparisons, float32 blobs."""

    columns = tuple(column.strip() for column in COLUMNS.split(","))
    t_column = "t_epoch"
    expires_column = "expires_epoch"
    reembed_key = "row"
    no_limit = -1
    chunked_hint = "INDEXED BY memories_owner_chunked"  # only long memories' rows are read, however many others
    expiry_set = "expires_at = ?, expires_epoch = ?"

    def time(self, when: datetime) -> float:
        return as_utc(when).timestamp()

    def stamp(self, when: datetime) -> str:
        return when.isoformat()

    def expiry_values(self, expires: datetime) -> list:
        return [expires.isoformat(), expires.timestamp()]

    def vector_param(self, vector: np.ndarray) -> bytes:
        return np.asarray(vector).astype("<f4").tobytes()

    def vector_array(self, value: bytes, dim: int, memory_id) -> np.ndarray:
        return unpack_vector(value, dim, memory_id)

    def row_params(self, row: rowcodec.Row, vector: np.ndarray) -> dict:
        return vars(row)  # the row's vector bytes are the vector's


def unpack_vector(blob: bytes, dim: int, memory_id) -> np.ndarray:
    """A stored vector blob as float32 [dim]; StoreIntegrityError naming the row when its length is wrong."""
    if len(blob) != dim * 4:
        raise StoreIntegrityError(f"memory {memory_id!r}: stored vector has {len(blob)} bytes, expected {dim * 4}")
    return np.frombuffer(blob, dtype="<f4")


def in_marks(values: Sequence) -> str:
    """The ``?`` list of an IN clause over ``values``."""
    return ",".join("?" * len(values))
