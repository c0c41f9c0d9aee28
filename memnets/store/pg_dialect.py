"""The PostgreSQL store's SQL dialect: pgvector's spelling of the store's statements (:mod:`memnets.store.dialect`).

``%s`` parameters; tables named by the store's prefix (several stores may share a database);
times are ``timestamptz`` bound as aware datetimes; vectors are pgvector ``vector`` values bound as
numpy arrays; lists of ids are one array parameter (``= ANY(%s)``); a row's write order is its
``seq``; the re-embedding table is keyed by (owner, id). Writers lock the rows they rewrite
(``FOR UPDATE``, in (owner, id) order) and serialise the rest with advisory locks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from memnets.store import rows as rowcodec
from memnets.store.dialect import SqlDialect
from memnets.timeutil import as_utc

# the names of a store's tables and indexes, after its prefix
_OBJECTS = (
    "memories",
    "meta",
    "owner_t",
    "owner_kind",
    "versions",
    "hnsw",
    "reembed",
    "expires",
    "chunked",
    "deletions",
    "content",  # the function reading a row's content for its lexemes (memnets.store.pg_search)
    "lexical",  # the GIN index of the lexemes
)


class PgDialect(SqlDialect):
    """PostgreSQL with pgvector, for the store whose tables start with ``table`` (a checked lower-case SQL name)."""

    mark = "%s"
    columns = tuple({"key": "seq", "vector": "embedding"}.get(field, field) for field in rowcodec.FIELDS)
    binary_order = ' COLLATE "C"'
    in_batch = 10_000
    expiry_set = "expires_at = %s"

    def __init__(self, table: str) -> None:
        self.table = table
        # quoted identifiers; the prefix is a checked [a-z_][a-z0-9_]* name, so nothing needs escaping
        self.names = {name: f'"{table}_{name}"' for name in _OBJECTS}
        self.memories, self.meta = self.names["memories"], self.names["meta"]
        self.reembed, self.deletions = self.names["reembed"], self.names["deletions"]

    def in_list(self, column: str, values: Sequence) -> tuple[str, list]:
        return f"{column} = ANY(%s)", [list(values)]

    def vector_array(self, value, dim: int, memory_id) -> np.ndarray:
        return as_array(value)

    def row_params(self, row: rowcodec.Row, vector: np.ndarray) -> tuple:
        return (
            row.owner,
            row.id,
            datetime.fromisoformat(row.t),
            datetime.fromisoformat(row.last_access),
            row.importance,
            row.kind,
            row.superseded_by,
            row.payload,
            vector,
            row.version,
            None if row.expires_at is None else datetime.fromisoformat(row.expires_at),
            row.ttl,
            row.chunks,
        )

    def row_text(self, fields: dict) -> dict:
        expires = fields["expires_at"]
        return {
            **fields,
            "t": as_utc(fields["t"]).isoformat(),
            "last_access": as_utc(fields["last_access"]).isoformat(),
            "expires_at": None if expires is None else as_utc(expires).isoformat(),
            "vector": as_array(fields["vector"]).astype("<f4").tobytes(),
            "chunks": None if fields["chunks"] is None else bytes(fields["chunks"]),
        }

    def meta_value(self, text: str) -> bytes:
        return text.encode()


def as_array(embedding) -> np.ndarray:
    """A pgvector value as float32 numpy (the text loader gives arrays, the binary one Vector objects)."""
    return np.asarray(embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding, dtype=np.float32)
