"""The embedded archive's SQLite file: its schema, format versions and migrations, and re-sealing rows.

:mod:`memnets.store.archive` opens the connection and runs everything here inside its own write
transaction, so that creating, upgrading or re-keying an archive is all or nothing:

- :func:`open_schema` creates the tables of a new archive, or checks the format (``PRAGMA
  user_version``), dim and key of an existing one and upgrades it step by step (the query builder's
  ``migration`` statements, :mod:`memnets.store.queries_sqlite`, and the steps here;
  the first open by a newer memnets upgrades, an archive of a newer format is refused unmodified).
- an archive without a key keeps a lexical index of its current rows (:mod:`memnets.store.sqlite_lexical`),
  created with the archive or by the format-7 upgrade from the rows it holds.
- :func:`reseal` opens every row's payload and seals it again; :func:`rotate_rows` uses it to move
  an archive to a new key (and KDF parameters), the format-3 upgrade to bind rows to the archive id.

A schema change is a new step: bump :data:`FORMAT_VERSION`, add its statements to the builder's
migrations, keep each step small, and test that an archive of the previous format opens. Every
statement is built by :class:`~memnets.store.queries_sqlite.SqliteQueries`.
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
from memnets.store.queries_sqlite import SqliteQueries
from memnets.store.sqlite_dialect import SqliteDialect

FORMAT_VERSION = 7  # stored in PRAGMA user_version; bump with a migration (the builder's) when the schema changes
DB_FILE = "archive.sqlite3"
CHECKS = ("quick", "full", "off")  # Archive(check=...): what is verified on open, see check_file
_Q = SqliteQueries(SqliteDialect())  # the statements (memnets.store.queries_sqlite)
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
        problems = [r[0] for r in conn.execute(*_Q.integrity(full=check == "full"))]
        if problems == ["ok"] and check == "quick" and conn.execute(*_Q.unique_index_exists()).fetchone():
            total, missing = conn.execute(*_Q.rows_unindexed()).fetchone()
            indexed = conn.execute(*_Q.rows_indexed()).fetchone()[0]
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
        version = conn.execute(*_Q.format_version()).fetchone()[0]
        tables = {r[0] for r in conn.execute(*_Q.table_names())}
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
    meta = dict(conn.execute(*_Q.all_meta()))
    stored_dim = int(meta["dim"])
    if dim is not None and dim != stored_dim:
        raise StoreFormatError(f"{path} holds vectors of dim {stored_dim}, but Archive was opened with dim={dim}")
    cipher = rowcodec.existing_cipher(key, meta, str(path))
    for step in range(version, FORMAT_VERSION):
        for statement in _Q.migration(step):
            conn.execute(*statement)
    if "archive_id" not in meta:  # format < 3: give the archive its id and bind every row to it
        meta["archive_id"] = _bind_rows(conn, path, cipher)
    secret = _ledger_secret(conn, meta)
    if version < 4:
        _tag_ledger(conn, secret)
    if version < 7 and cipher is None:
        sqlite_lexical.create(conn, str(path))
    if version != FORMAT_VERSION:
        conn.execute(*_Q.set_format_version(FORMAT_VERSION))
    return stored_dim, cipher, _text(meta["archive_id"]), secret


def _ledger_secret(conn: sqlite3.Connection, meta: dict) -> bytes:
    secret, new = rowcodec.ledger_secret(meta)
    conn.executemany(_Q.add_meta(), new.items())
    return secret


def _tag_ledger(conn: sqlite3.Connection, secret: bytes) -> None:
    """Upgrade to format 4: the deletion ledger's owner names and ids become their keyed hashes."""
    if conn.execute(*_Q.table_exists("deletions")).fetchone() is None:
        return
    stones = conn.execute(*_Q.tombstones()).fetchall()
    tagged = [(*rowcodec.ledger_row(secret, owner, memory_id, before), seq) for seq, owner, memory_id, before in stones]
    conn.executemany(_Q.tag_tombstone(), tagged)


def _create(
    conn: sqlite3.Connection, path: Path, dim: int | None, key: bytes | str | None
) -> tuple[int, RowCipher | None, str, bytes]:
    if dim is None:
        raise StoreNotFoundError(f"Archive: {path.parent} holds no archive yet; give dim to create one")
    for statement in _Q.schema():
        conn.execute(*statement)
    cipher, key_meta = rowcodec.new_cipher(key)
    archive_id = rowcodec.new_store_id()
    meta = {
        "dim": dim,
        "created_with": f"memnets archive format {FORMAT_VERSION}",
        "archive_id": archive_id,
        **key_meta,
    }
    conn.executemany(_Q.add_meta(), meta.items())
    if cipher is None:
        sqlite_lexical.create(conn, str(path))
    conn.execute(*_Q.set_format_version(FORMAT_VERSION))
    return dim, cipher, archive_id, _ledger_secret(conn, meta)


def _bind_rows(conn: sqlite3.Connection, path: Path, cipher: RowCipher | None) -> str:
    """Upgrade to format 3 inside the open's transaction: a new archive id, and with a key every row
    re-sealed from the old associated data (no archive id, no version) to the new one."""
    archive_id = rowcodec.new_store_id()
    conn.executemany(_Q.add_meta(), [("archive_id", archive_id)])
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
    rows = [r[0] for r in conn.execute(*_Q.row_numbers())]
    for done, chunk in enumerate(chunks(rows, 500), start=1):
        for record in conn.execute(*_Q.records_of_rows(chunk)).fetchall():
            fields = rowcodec.named(record)
            plaintext = opener.open(
                bytes(fields["payload"]),
                record_aad(fields, old_id),
                what=f"memory {fields['id']!r} of owner {fields['owner']!r}",
            )
            conn.execute(*_Q.set_payload(fields["key"], sealer.seal(plaintext, record_aad(fields, new_id))))
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
    conn.executemany(_Q.add_meta(replace=True), key_meta.items())
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
