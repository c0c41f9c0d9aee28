"""The embedded archive's SQLite file: its schema, format versions and migrations, and re-sealing rows.

:mod:`memnets.store.archive` opens the connection and runs everything here inside its own write
transaction, so that creating, upgrading or re-keying an archive is all or nothing:

- :func:`open_schema` creates the tables of a new archive, or checks the format (``PRAGMA
  user_version``), dim and key of an existing one and upgrades it step by step (:data:`MIGRATIONS`;
  the first open by a newer memnets upgrades, an archive of a newer format is refused unmodified).
- an archive without a key keeps a lexical index of its current rows (:mod:`memnets.store.sqlite_lexical`),
  created with the archive or by the format-7 upgrade from the rows it holds.
- :func:`reseal` opens every row's payload and seals it again; :func:`rotate_rows` uses it to move
  an archive to a new key (and KDF parameters), the format-3 upgrade to bind rows to the archive id.

A schema change is a new step: bump :data:`FORMAT_VERSION`, add ``MIGRATIONS[old]``, keep each
step small, and test that an archive of the previous format opens.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from memnets.store import rows as rowcodec
from memnets.store import sqlite_lexical
from memnets.store.chunks import sealed_bytes
from memnets.store.crypto import RowCipher
from memnets.store.disk_reserve import disk_full
from memnets.store.errors import (
    StoreCorruptError,
    StoreError,
    StoreFormatError,
    StoreNotFoundError,
    StoreReadOnlyError,
)

FORMAT_VERSION = 7  # stored in PRAGMA user_version; bump with a migration (MIGRATIONS) when the schema changes
DB_FILE = "archive.sqlite3"
COLUMNS = (  # the memories columns of memnets.store.rows.FIELDS, in its order
    "row, owner, id, t, last_access, importance, kind, superseded_by, payload, vector, version, expires_at, ttl, chunks"
)
CURRENT = "superseded_by IS NULL"  # rows that search, listings, counts and the FAISS index see
LIVE = "(expires_epoch IS NULL OR expires_epoch > ?)"  # not expired at the time bound to the "?"

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
# reembed: a re-embedding's new vectors (memnets.store.reembed), one per memories row at the version
# it was embedded from; swapped into memories in one transaction when every row has one. The encoder
# that filled the archive is the meta key "encoder" (memnets.store.identity), recorded with the first vector.
# format N -> N + 1, run in the open's write transaction (the first open by a newer memnets upgrades)
MIGRATIONS = {
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
CHECKS = ("quick", "full", "off")  # Archive(check=...): what is verified on open, see check_file
_UNIQUE_INDEX = "sqlite_autoindex_memories_1"  # the (owner, id) index SQLite builds for UNIQUE (owner, id)
log = logging.getLogger(__name__)


def check_file(conn: sqlite3.Connection, path: Path, check: str) -> None:
    """Verify the archive file on open; StoreCorruptError naming what failed (the file is not modified).

    ``"quick"``: ``PRAGMA quick_check`` (every page's b-tree structure, one read of the file) plus
    a check that every row is in the (owner, id) index, which quick_check skips and which a damaged
    index page breaks silently: ``get`` and ``delete`` miss a row that search still finds, and
    re-adding its id writes a second row. ``"full"``: ``PRAGMA integrity_check`` (all of that, and
    every other index against the table; a few times slower). ``"off"``: nothing, for stores so large
    that reading the file on each open costs too much (run ``check="full"`` now and then instead).
    ``check`` is one of :data:`CHECKS` (the Archive checks its argument before touching the disk).
    """
    if check == "off":
        return
    pragma = "integrity_check" if check == "full" else "quick_check"
    try:
        problems = [r[0] for r in conn.execute(f"PRAGMA {pragma}(20)")]
        if problems == ["ok"] and check == "quick" and _has_unique_index(conn):
            total, missing = conn.execute(
                "SELECT count(*), coalesce(sum(NOT EXISTS (SELECT 1 FROM memories AS i INDEXED BY "
                f"{_UNIQUE_INDEX} WHERE i.owner = m.owner AND i.id = m.id AND i.row = m.row)), 0) "
                "FROM memories AS m NOT INDEXED"
            ).fetchone()
            indexed = conn.execute(f"SELECT count(*) FROM memories INDEXED BY {_UNIQUE_INDEX}").fetchone()[0]
            if missing or indexed != total:
                problems = [f"{missing} of {total} rows missing from the (owner, id) index, which holds {indexed}"]
    except sqlite3.DatabaseError as error:
        raise open_error(error, path) from None
    if problems != ["ok"]:
        raise StoreCorruptError(
            f"{path} is damaged (SQLite {pragma}: {'; '.join(problems[:3])}). memnets did not modify it: "
            f"restore the folder from a backup, or salvage its rows with the sqlite3 shell's .recover "
            "into a new file"
        )


def _has_unique_index(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (_UNIQUE_INDEX,)).fetchone()
        is not None
    )


def open_error(error: sqlite3.DatabaseError, path: Path) -> StoreError:
    """The store error for an SQLite error met while opening ``path``: read-only, a full disk, damaged, or
    not an archive (the last had been said of a full disk too)."""
    name = getattr(error, "sqlite_errorname", "")
    if name.startswith("SQLITE_READONLY") or not writable(path.parent):
        return read_only_error(path.parent)
    if disk_full(error):
        return StoreError(
            f"{path} cannot be opened: its disk is full (SQLite says: {error}); free space and open it again"
        )
    if name.startswith("SQLITE_CORRUPT"):
        return StoreCorruptError(
            f"{path} is damaged (SQLite says: {error}). memnets did not modify it: restore the folder from a backup"
        )
    return StoreFormatError(f"{path} is not a memnets archive (SQLite says: {error})")


def writable(folder: Path) -> bool:
    """Whether the archive folder and its database file (when there is one) can be written."""
    db = folder / DB_FILE
    return os.access(folder, os.W_OK) and (not db.exists() or os.access(db, os.W_OK))


def read_only_error(folder: Path) -> StoreReadOnlyError:
    return StoreReadOnlyError(
        f"{folder} is read-only (the folder, {DB_FILE} or the file system): the archive is opened for writing, "
        "even to read, since SQLite keeps its journal there. Give this user write access or open a writable copy; "
        "nothing was changed"
    )


def open_schema(
    conn: sqlite3.Connection, path: Path, dim: int | None, key: bytes | str | None
) -> tuple[int, RowCipher | None, str, bytes]:
    """Inside the caller's write transaction: create the schema of a new archive at ``path``, or check
    format, dim and key of an existing one and upgrade it. Returns (dim, cipher or None, archive id,
    the key of the deletion ledger's tags, see :func:`memnets.store.rows.ledger_secret`)."""
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        raise StoreFormatError(f"{path} is not a memnets archive (SQLite says: {error})") from None
    if version == 0 and not tables:
        return _create(conn, path, dim, key)
    if version > FORMAT_VERSION:
        raise StoreFormatError(
            f"{path} was written by archive format {version}; this memnets reads format {FORMAT_VERSION} "
            "and older. Upgrade memnets to open it (it was not modified)."
        )
    if version < 1 or not {"meta", "memories", "changes"} <= tables:
        raise StoreFormatError(
            f"{path} is an SQLite file but not a memnets archive (user_version {version}, tables {sorted(tables)})"
        )
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    stored_dim = int(meta["dim"])
    if dim is not None and dim != stored_dim:
        raise StoreFormatError(f"{path} holds vectors of dim {stored_dim}, but Archive was opened with dim={dim}")
    cipher = rowcodec.existing_cipher(key, meta, str(path))
    for step in range(version, FORMAT_VERSION):
        for statement in MIGRATIONS[step]:
            conn.execute(statement)
    if "archive_id" not in meta:  # format < 3: give the archive its id and bind every row to it
        meta["archive_id"] = _bind_rows(conn, path, cipher)
    secret = _ledger_secret(conn, meta)
    if version < 4:
        _tag_ledger(conn, secret)
    if version < 7 and cipher is None:
        sqlite_lexical.create(conn, str(path))
    if version != FORMAT_VERSION:
        conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
    return stored_dim, cipher, _text(meta["archive_id"]), secret


def _ledger_secret(conn: sqlite3.Connection, meta: dict) -> bytes:
    secret, new = rowcodec.ledger_secret(meta)
    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", new.items())
    return secret


def _tag_ledger(conn: sqlite3.Connection, secret: bytes) -> None:
    """Upgrade to format 4: the deletion ledger's owner names and ids become their keyed hashes."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'deletions'").fetchone() is None:
        return
    for seq, owner, memory_id, before in conn.execute("SELECT seq, owner, id, before FROM deletions").fetchall():
        conn.execute(
            "UPDATE deletions SET owner = ?, id = ?, before = ? WHERE seq = ?",
            (*rowcodec.ledger_row(secret, owner, memory_id, before), seq),
        )


def _create(
    conn: sqlite3.Connection, path: Path, dim: int | None, key: bytes | str | None
) -> tuple[int, RowCipher | None, str, bytes]:
    if dim is None:
        raise StoreNotFoundError(f"Archive: {path.parent} holds no archive yet; give dim to create one")
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    cipher, key_meta = rowcodec.new_cipher(key)
    archive_id = rowcodec.new_store_id()
    meta = {
        "dim": dim,
        "created_with": f"memnets archive format {FORMAT_VERSION}",
        "archive_id": archive_id,
        **key_meta,
    }
    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
    if cipher is None:
        sqlite_lexical.create(conn, str(path))
    conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
    return dim, cipher, archive_id, _ledger_secret(conn, meta)


def _bind_rows(conn: sqlite3.Connection, path: Path, cipher: RowCipher | None) -> str:
    """Upgrade to format 3 inside the open's transaction: a new archive id, and with a key every row
    re-sealed from the old associated data (no archive id, no version) to the new one."""
    archive_id = rowcodec.new_store_id()
    conn.execute("INSERT INTO meta (key, value) VALUES ('archive_id', ?)", (archive_id,))
    if cipher is not None:
        count = reseal(conn, cipher, None, cipher, archive_id)
        log.info("%s: upgraded to archive format 3; %d rows bound to archive id %s", path.parent, count, archive_id)
    return archive_id


def reseal(
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
    for done, chunk in enumerate(chunks(rows, 500), start=1):
        marks = ",".join("?" * len(chunk))
        for record in conn.execute(f"SELECT {COLUMNS} FROM memories WHERE row IN ({marks})", chunk).fetchall():
            fields = rowcodec.named(record)
            plaintext = opener.open(
                bytes(fields["payload"]),
                record_aad(fields, old_id),
                what=f"memory {fields['id']!r} of owner {fields['owner']!r}",
            )
            conn.execute(
                "UPDATE memories SET payload = ? WHERE row = ?",
                (sealer.seal(plaintext, record_aad(fields, new_id)), fields["key"]),
            )
        if progress is not None:
            progress(min(done * 500, len(rows)), len(rows))
    return len(rows)


def rotate_rows(
    conn: sqlite3.Connection,
    old: RowCipher,
    new: RowCipher,
    key_meta: dict[str, bytes],
    archive_id: str,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Inside the caller's write transaction: re-seal every row from the ``old`` cipher to the ``new`` one
    and replace the key record in meta by ``key_meta`` (both from :func:`memnets.store.rows.new_cipher`,
    derived before the transaction: a passphrase costs seconds). Returns how many rows."""
    count = reseal(conn, old, archive_id, new, archive_id, progress)
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", key_meta.items())
    return count


def record_aad(fields: dict, store_id: str | None) -> bytes:
    """The associated data of a stored record (by field name, :func:`memnets.store.rows.named`) in a store
    with this id (``None``: the layout from before archive ids, see :func:`memnets.store.rows.row_aad`)."""
    return rowcodec.row_aad(
        fields["owner"],
        fields["id"],
        fields["t"],
        fields["kind"],
        fields["importance"],
        sealed_bytes(fields["vector"], fields["chunks"]),
        fields["superseded_by"],
        store_id=store_id,
        version=fields["version"],
    )


def chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    """``items`` in slices of ``size``: one SQL statement's bound parameters stay under SQLite's limit."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _text(value: str | bytes) -> str:
    """A meta value as text (stored as TEXT or, by older writers, as a BLOB)."""
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
