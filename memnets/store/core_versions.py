"""New versions of a memory, numbered: a part of the store core, and the one place that numbers versions.

A memory's older versions are rows ``{id}~{n}`` superseded by ``id`` (:data:`~memnets.store.rows.VERSION_SEPARATOR`).
:func:`new_version` writes them (``SqlStore.new_version``), inside the write transaction that holds the memory's current
row, so concurrent versions of one id from any thread, process or machine each get their own number, in
commit order. The memory layer never names an ``{id}~{n}`` row it writes (tests/package/test_layering.py checks it):
a later item of one ``add_many`` that changes an earlier one, and a backdated statement, are versions the
store numbers too.

:func:`new_version` runs on the store core handed to it (:class:`~memnets.store.core.SqlStore`: ``_writing``,
``_decode``, ``_check_encoder``, ``_changing``, ``_after``, ``_run_many``, the dialect and query builder).
"""

from __future__ import annotations

import dataclasses

import memnets.timeutil as timeutil
from memnets.argerrors import UnknownIdError
from memnets.records import Memory
from memnets.store import rows as rowcodec
from memnets.store.chunks import check_chunks, to_blob


def new_version(store, memory: Memory, vector, *, chunks=None, older: bool = False) -> Memory:
    """Make ``memory`` the current version of its (owner, id), keeping the current one as history: one atomic step.

    Inside one write transaction (the archive's ``BEGIN IMMEDIATE`` takes the write lock before
    anything is read; PostgreSQL locks the current row, ``FOR UPDATE``; so concurrent calls from
    any thread or process queue): the current row is copied to a new row ``{id}~{n}`` superseded
    by ``id`` (n: the next free version number) and ``memory`` with ``vector`` [dim] is written
    over it. Returns that older version. KeyError when the owner has no current memory ``id``
    (never stored, deleted, or an older version), so a deletion is never undone by an update.
    ``chunks`` [m, dim]: the new text's further windows (the older version keeps none). Like every
    write, it checks the bound encoder inside its transaction: after a re-embedding swapped the store
    to another encoder (another process, or another handle), EncoderMismatchError, and nothing is written.

    ``older``: ``memory`` held before the current version did (a backdated statement): it is stored as
    the next older version ``{id}~{n}`` (superseded by ``id``, its fields as given) and the current row
    stays; returns it as stored. The store numbers every version, the memory layer none.
    """
    where = f"{store._name}.new_version"
    array = rowcodec.check_new_version(memory, vector, store.dim, where)
    extra = check_chunks(None if chunks is None or older else [chunks], 1, store.dim, where)[0]
    row = rowcodec.encode_row(memory, array, where)
    new = dataclasses.replace(row, chunks=to_blob(extra))
    d, m = store._dialect, store._dialect.mark
    with store._writing() as conn:
        store._check_encoder(conn)  # a re-embedding swapped encoders elsewhere: write nothing
        record = conn.execute(*store._q.current_row(new.owner, new.id, timeutil.now())).fetchone()
        if record is None:
            raise UnknownIdError(f"{where}: owner {new.owner!r} has no current memory {new.id!r}", field="id")
        version_id = _next_version_id(store, conn, new.owner, new.id)
        if older:
            written = memory.replace(id=version_id, superseded_by=memory.id)
            rows = [(rowcodec.encode_row(written, array, where), array, 1)]
        else:
            fields = rowcodec.named(record)
            written = rowcodec.older_version(store._decode(record), version_id, memory)
            old_vector = d.vector_array(fields["vector"], store.dim, written.id)
            rows = [
                (rowcodec.encode_row(written, old_vector, where), old_vector, 1),
                (new, array, fields["version"] + 1),
            ]
        store._run_many(
            conn,
            store._q.upsert(),
            [d.row_params(rowcodec.seal_row(row, store._cipher, store.archive_id, n), v) for row, v, n in rows],
        )
        if not older:
            store._changing(conn, f"owner = {m} AND id = {m}", (new.owner, new.id))  # its vector changed
    store._after(lambda: store._written(scrub=False))
    return written


def _next_version_id(store, conn, owner: str, memory_id: str) -> str:
    """Inside a write holding the memory's row: the id of its next older version (:func:`rows.version_id`)."""
    count = conn.execute(*store._q.version_count(owner, memory_id)).fetchone()[0]
    return rowcodec.version_id(
        memory_id, count, lambda candidate: conn.execute(*store._q.exists(owner, candidate)).fetchone() is not None
    )


__all__ = ["new_version"]
