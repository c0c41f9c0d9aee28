"""The encoder binding and re-embedding of the SQL stores: a part of the store core (:mod:`memnets.store.core`).

:class:`SqlEncoding` is a base class of :class:`~memnets.store.core.SqlStore` and runs on what the
core gives (the dialect and query builder, ``_reading``/``_writing``, ``_decode``, the swap hooks): the encoder that
filled the store, recorded with the first vector and checked by every write and search
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


class SqlEncoding:
    """The store's encoder identity and its re-embedding (see the module docstring)."""

    _encoder: EncoderIdentity | None = None  # the encoder bound by bind_encoder (None: unchecked)
    _last_identity: tuple[str | bytes, EncoderIdentity] | None = None  # the last meta text read, parsed

    def _meta_identity(self, conn, key: str) -> EncoderIdentity | None:
        return self._identity_of(conn.execute(*self._q.get_meta(key)).fetchone())

    def _identity_of(self, row) -> EncoderIdentity | None:
        """The identity of a meta row read with ``get_meta`` (None: no row). Every write and search
        reads it; the text rarely changes, so the last one read is kept parsed (identities are frozen)."""
        if row is None:
            return None
        last = self._last_identity
        if last is not None and last[0] == row[0]:
            return last[1]
        identity = EncoderIdentity.from_json(row[0], self._where())
        self._last_identity = (row[0], identity)
        return identity

    def _check_encoder(self, conn, record: bool = False) -> None:
        """Inside a transaction: the bound encoder is still the store's (``record``: write it if none is)."""
        if self._encoder is None:
            return
        stored = self._meta_identity(conn, META_KEY)
        check_identity(stored, self._encoder, self._where())
        if stored is None and record:
            conn.execute(*self._q.set_meta(META_KEY, self._encoder.to_json(), replace=False))
            check_identity(self._meta_identity(conn, META_KEY), self._encoder, self._where())  # a racing writer

    def encoder_identity(self) -> EncoderIdentity | None:
        """The encoder that filled the store (None before the first vector); see memnets.store.identity."""
        with self._reading() as conn:
            return self._meta_identity(conn, META_KEY)

    def bind_encoder(self, identity: EncoderIdentity) -> None:
        """Check that ``identity`` is the encoder that filled the store (EncoderMismatchError naming
        both if not); from now on every write records it with the first vector or checks it again, and
        every search checks it (a re-embedding elsewhere). A store filled before identities were
        recorded is taken to be this encoder's, with a warning."""
        with self._writing() as conn:
            stored = self._meta_identity(conn, META_KEY)
            check_identity(stored, identity, self._where())
            if stored is None and conn.execute(*self._q.any_row()).fetchone() is not None:
                log.warning(
                    "%s was filled before memnets recorded encoders; recording %s as its encoder",
                    self._where(),
                    identity.describe(),
                )
                conn.execute(*self._q.set_meta(META_KEY, identity.to_json()))
        self._encoder = identity

    # ------------------------------------------------------------------ re-embedding
    def reembed_start(self, identity: EncoderIdentity) -> str:
        """Begin (or resume) re-embedding to ``identity``: "current" if the store is embedded by it
        already, "resumed" if a re-embedding to it was under way, else "started" (a re-embedding to
        another encoder is dropped). Workers on other connections share it."""
        with self._writing() as conn:
            lock = self._q.lock("reembed")
            if lock is not None:
                conn.execute(*lock)
            target = self._meta_identity(conn, TARGET_KEY)
            if target is not None and target.fingerprint == identity.fingerprint:
                return "resumed"
            conn.execute(*self._q.clear_reembedded())
            current = self._meta_identity(conn, META_KEY)
            if current is not None and current.fingerprint == identity.fingerprint:
                conn.execute(*self._q.drop_meta(TARGET_KEY))
                return "current"
            conn.execute(*self._q.set_meta(TARGET_KEY, identity.to_json()))
            return "started"

    def _reembed_batch(self, records: Sequence, key_fields: tuple[str, ...]) -> ReembedBatch:
        """The batch of these selected records, each keyed by ``key_fields`` (the engine's row reference)."""
        fields = [rowcodec.named(record) for record in records]
        return ReembedBatch(
            [self._decode(record).content for record in records],
            [tuple(f[name] for name in key_fields) for f in fields],
            [f["superseded_by"] is None for f in fields],
        )

    @staticmethod
    def _reembedded(batch: ReembedBatch) -> list[tuple]:
        """(key..., vector, chunk blob) of a saved batch's rows."""
        return [(*key, vector, to_blob(more)) for key, vector, more in zip(batch.keys, batch.vectors, batch.chunks)]

    def reembed_progress(self) -> tuple[int, int]:
        """(rows with their new vector, rows in the store)."""
        with self._reading() as conn:
            total = conn.execute(*self._q.row_count()).fetchone()[0]
            left = conn.execute(*self._q.todo_count()).fetchone()[0]
        return total - left, total

    def reembed_finish(self) -> bool:
        """Swap to the new vectors and encoder in one transaction, if every row has its new vector;
        True if it swapped. Rows are re-sealed (the vector is bound into each row's seal)."""
        d = self._dialect
        with self._writing() as conn:
            swap_lock = self._q.swap_lock()
            if swap_lock is not None:
                conn.execute(*swap_lock)
            target = self._meta_identity(conn, TARGET_KEY)
            if target is None or conn.execute(*self._q.any_todo()).fetchone() is not None:
                return False
            records = conn.execute(*self._q.reembedded()).fetchall()
            updates = []
            for record in records:
                fields = rowcodec.named(record)
                vector = d.vector_array(record[-2], target.dim, fields["id"])
                row = rowcodec.encode_row(self._decode(record), vector, f"{self._name}.reembed")
                row = dataclasses.replace(row, chunks=None if record[-1] is None else bytes(record[-1]))
                row = rowcodec.seal_row(row, self._cipher, self.archive_id, fields["version"] + 1)
                updates.append((row.payload, d.vector_param(vector), row.chunks, row.version, row.owner, row.id))
            self._changing(conn, "1 = 1", ())
            self._swap_vectors(conn, target, updates)
            conn.execute(*self._q.clear_reembedded())
            conn.execute(*self._q.drop_meta(TARGET_KEY))
            conn.execute(*self._q.set_meta(META_KEY, target.to_json()))
            conn.execute(*self._q.set_meta("dim", str(target.dim)))
        self.dim, self._encoder = target.dim, target
        self._swapped()
        log.info("%s: re-embedded %d rows; now %s", self._where(), len(records), target.describe())
        return True
