"""The encoder binding and re-embedding of the SQL stores: a part of the store core (:mod:`memnets.store.core`).

Its functions run on the store core handed to them (:class:`~memnets.store.core.SqlStore`: the dialect
and query builder, ``_reading``/``_writing``, ``_decode``, the swap hooks, and its ``_encoder`` and
``_last_identity``), which calls them from its methods of the same names: the encoder that filled the store, recorded with the first vector and checked by every write and search
(:mod:`memnets.store.identity`), and moving the store to a new encoder (:mod:`memnets.store.reembed`):
start, progress and the swap are the same on both engines; claiming a batch is each engine's own.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from memnets.store import rows as rowcodec
from memnets.store.chunks import to_blob
from memnets.store.identity import META_KEY, TARGET_KEY, EncoderIdentity, check_identity
from memnets.store.reembed import ReembedBatch

log = logging.getLogger(__name__)


def meta_identity(store, conn, key: str) -> EncoderIdentity | None:
    return identity_of(store, conn.execute(*store._q.get_meta(key)).fetchone())


def identity_of(store, row) -> EncoderIdentity | None:
    """The identity of a meta row read with ``get_meta`` (None: no row). Every write and search
    reads it; the text rarely changes, so the last one read is kept parsed (identities are frozen)."""
    if row is None:
        return None
    last = store._last_identity
    if last is not None and last[0] == row[0]:
        return last[1]
    identity = EncoderIdentity.from_json(row[0], store._where())
    store._last_identity = (row[0], identity)
    return identity


def check_encoder(store, conn, record: bool = False) -> None:
    """Inside a transaction: the bound encoder is still the store's (``record``: write it if none is)."""
    if store._encoder is None:
        return
    stored = meta_identity(store, conn, META_KEY)
    check_identity(stored, store._encoder, store._where())
    if stored is None and record:
        conn.execute(*store._q.set_meta(META_KEY, store._encoder.to_json(), replace=False))
        check_identity(meta_identity(store, conn, META_KEY), store._encoder, store._where())  # a racing writer


def encoder_identity(store) -> EncoderIdentity | None:
    """The encoder that filled the store (None before the first vector); see memnets.store.identity."""
    with store._reading() as conn:
        return meta_identity(store, conn, META_KEY)


def bind_encoder(store, identity: EncoderIdentity) -> None:
    """Check that ``identity`` is the encoder that filled the store (EncoderMismatchError naming
    both if not); from now on every write records it with the first vector or checks it again, and
    every search checks it (a re-embedding elsewhere). A store filled before identities were
    recorded is taken to be this encoder's, with a warning."""
    with store._writing() as conn:
        stored = meta_identity(store, conn, META_KEY)
        check_identity(stored, identity, store._where())
        if stored is None and conn.execute(*store._q.any_row()).fetchone() is not None:
            log.warning(
                "%s was filled before memnets recorded encoders; recording %s as its encoder",
                store._where(),
                identity.describe(),
            )
            conn.execute(*store._q.set_meta(META_KEY, identity.to_json()))
    store._encoder = identity


# ------------------------------------------------------------------ re-embedding
def reembed_start(store, identity: EncoderIdentity) -> str:
    """Begin (or resume) re-embedding to ``identity``: "current" if the store is embedded by it
    already, "resumed" if a re-embedding to it was under way, else "started" (a re-embedding to
    another encoder is dropped). Workers on other connections share it."""
    with store._writing() as conn:
        lock = store._q.lock("reembed")
        if lock is not None:
            conn.execute(*lock)
        target = meta_identity(store, conn, TARGET_KEY)
        if target is not None and target.fingerprint == identity.fingerprint:
            return "resumed"
        conn.execute(*store._q.clear_reembedded())
        current = meta_identity(store, conn, META_KEY)
        if current is not None and current.fingerprint == identity.fingerprint:
            conn.execute(*store._q.drop_meta(TARGET_KEY))
            return "current"
        conn.execute(*store._q.set_meta(TARGET_KEY, identity.to_json()))
        return "started"


def reembed_batch(store, records: Sequence, key_fields: tuple[str, ...]) -> ReembedBatch:
    """The batch of these selected records, each keyed by ``key_fields`` (the engine's row reference)."""
    fields = [rowcodec.named(record) for record in records]
    return ReembedBatch(
        [store._decode(record).content for record in records],
        [tuple(f[name] for name in key_fields) for f in fields],
        [f["superseded_by"] is None for f in fields],
    )


def reembedded(batch: ReembedBatch) -> list[tuple]:
    """(key..., vector, chunk blob) of a saved batch's rows."""
    return [(*key, vector, to_blob(more)) for key, vector, more in zip(batch.keys, batch.vectors, batch.chunks)]


def reembed_progress(store) -> tuple[int, int]:
    """(rows with their new vector, rows in the store)."""
    with store._reading() as conn:
        total = conn.execute(*store._q.row_count()).fetchone()[0]
        left = conn.execute(*store._q.todo_count()).fetchone()[0]
    return total - left, total


def reembed_finish(store) -> bool:
    """Swap to the new vectors and encoder in one transaction, if every row has its new vector;
    True if it swapped. Rows are re-sealed (the vector is bound into each row's seal)."""
    d = store._dialect
    with store._writing() as conn:
        swap_lock = store._q.swap_lock()
        if swap_lock is not None:
            conn.execute(*swap_lock)
        target = meta_identity(store, conn, TARGET_KEY)
        if target is None or conn.execute(*store._q.any_todo()).fetchone() is not None:
            return False
        records = conn.execute(*store._q.reembedded()).fetchall()
        updates = []
        for record in records:
            fields = rowcodec.named(record)
            vector = d.vector_array(record[-2], target.dim, fields["id"])
            row = rowcodec.encode_row(store._decode(record), vector, f"{store._name}.reembed")
            row = dataclasses.replace(row, chunks=None if record[-1] is None else bytes(record[-1]))
            row = rowcodec.seal_row(row, store._cipher, store.archive_id, fields["version"] + 1)
            updates.append((row.payload, d.vector_param(vector), row.chunks, row.version, row.owner, row.id))
        store._changing(conn, "1 = 1", ())
        store._swap_vectors(conn, target, updates)
        conn.execute(*store._q.clear_reembedded())
        conn.execute(*store._q.drop_meta(TARGET_KEY))
        conn.execute(*store._q.set_meta(META_KEY, target.to_json()))
        conn.execute(*store._q.set_meta("dim", str(target.dim)))
    store.dim, store._encoder = target.dim, target
    store._swapped()
    log.info("%s: re-embedded %d rows; now %s", store._where(), len(records), target.describe())
    return True
