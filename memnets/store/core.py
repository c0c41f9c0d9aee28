"""The store core: the memory-store contract written once, handed an engine per backend.

:class:`SqlStore` holds what the contract says, for both stores: argument checks, sealing rows
(:mod:`memnets.store.rows`), versions (:mod:`memnets.store.core_versions`, the one place that numbers
them), the deletion ledger, expiry, a long memory's chunk vectors, the encoder binding and re-embedding
(:mod:`memnets.store.core_encoding`), the clear-column filters, the reads and :meth:`SqlStore.atomic_write`
(its state a :class:`~memnets.store.transaction.WriteTransaction`). It runs statements and builds none.

A store is the core plus an engine (composition, :mod:`memnets.store.engine`): the core is handed an
:class:`~memnets.store.engine.Engine`, the backend's query builder (``_q``: every statement as ``(sql,
params)``, :mod:`memnets.store.queries`, over the dialect ``_dialect``), its vector search and its lexical
ranking; the engine ranks for the core handed to it, whose ``_hit`` turns a ranked record into a
:class:`~memnets.store.core_search.Hit` (memory, score, the stored vector). Records are read by field name in
one place (:meth:`SqlStore._decode` and ``_hit``, over :data:`memnets.store.rows.FIELDS`).

- :class:`~memnets.store.archive.Archive` = the core + :class:`~memnets.store.archive_search.ArchiveEngine`,
  with the SQLite connection and its FAISS index (:class:`~memnets.store.faiss_sync.FaissIndex`);
- :class:`~memnets.store.postgres.PgVectorStore` = the core + :class:`~memnets.store.pg_search.PgEngine`,
  with its connection pool.

Each store class gives its connections: ``_reading()`` and ``_writing()`` (a connection inside one read,
one snapshot, or one write transaction, committed when the block ends, rolled back on an error),
``_held_transaction(held)`` (the one transaction of :meth:`~SqlStore.atomic_write`), ``_where()`` (the
store in messages, without credentials) and ``_is_open()``; and may override the hooks, which do nothing
here: ``_changing`` (inside a write, before rows matching a condition change: the archive logs them for its
index), ``_written`` and ``_deleted`` (after a write or a deletion committed: index sync, scrubbing the
disk), ``_swap_vectors`` and ``_swapped`` (a re-embedding's swap), ``_stream`` (a large read).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Self

import numpy as np

import memnets.timeutil as timeutil
from memnets.argerrors import UnknownIdError
from memnets.records import Memory
from memnets.store import as_of, core_encoding, core_versions
from memnets.store import rows as rowcodec
from memnets.store.chunks import best_scores, check_chunks, from_blob, to_blob
from memnets.store.core_lexical import check_lexical
from memnets.store.core_search import Hit, with_vectors
from memnets.store.dialect import SqlDialect
from memnets.store.engine import Engine
from memnets.store.filters import MemoryFilter
from memnets.store.identity import EncoderIdentity
from memnets.store.queries import SqlQueries
from memnets.store.transaction import OpenWrites, WriteTransaction
from memnets.timeutil import as_utc
from memnets.tracing import traced_methods

log = logging.getLogger(__name__)


@traced_methods(
    "memnets.store",
    "upsert",
    "new_version",
    "delete",
    "get",
    "vectors",
    "search",
    "list_memories",
    search_with_vectors="search",
)
class SqlStore:
    """The contract of :class:`memnets.store.MemoryStore` on a SQL table of memories (see the module docstring)."""

    # optional capabilities both stores declare (memnets.store.protocol)
    supports_deletion_ledger = True
    supports_compaction = True
    supports_index_rebuild = True
    supports_encoder_binding = True
    supports_reembed = True
    supports_expiry = True
    supports_chunks = True
    supports_atomic_write = True
    supports_search_vectors = True
    supports_lexical_search = False  # True on a store that opened with its lexical index (memnets.store.core_lexical)

    _dialect: SqlDialect
    _q: SqlQueries  # the statements, built from the dialect (memnets.store.queries)
    dim: int
    archive_id: str  # the store's random id, bound into every seal
    _cipher = None  # RowCipher of the key, None without one
    _ledger_secret: bytes  # keys the deletion ledger's tags
    _deletions_exist = False  # see _has_deletions
    _encoder: EncoderIdentity | None = None  # the encoder bound by bind_encoder (None: unchecked)
    _last_identity: tuple[str | bytes, EncoderIdentity] | None = None  # the last meta text read, parsed

    def __init__(self, engine: Engine) -> None:
        self._engine = engine  # the backend's statements and rankings (memnets.store.engine)
        self._dialect, self._q = engine.dialect, engine.queries
        self._writes = OpenWrites()  # the open atomic_write blocks (memnets.store.transaction)

    # ------------------------------------------------------------------ what a store class gives (its connections)
    def _reading(self) -> AbstractContextManager:
        raise NotImplementedError

    def _writing(self) -> AbstractContextManager:
        raise NotImplementedError

    def _where(self) -> str:
        raise NotImplementedError

    def _is_open(self) -> bool:
        raise NotImplementedError

    def _changing(self, conn, where: str, params: Sequence) -> None:
        """Inside a write: the rows matching ``where`` are about to change (their vectors or their existence)."""

    def _written(self, scrub: bool) -> None:
        """After a write committed (``scrub``: it replaced rows, whose old text must leave the disk)."""

    def _deleted(self, count: int) -> None:
        """After a deletion of ``count`` rows committed."""

    def _held_transaction(self, held: WriteTransaction) -> AbstractContextManager:
        """The transaction of :meth:`atomic_write` (``held``: its state, where the engine keeps its
        connection): until it ends, this thread's ``_reading()`` and ``_writing()`` are savepoints inside it."""
        raise NotImplementedError

    def _swap_vectors(self, conn, target: EncoderIdentity, updates: list[tuple]) -> None:
        """Inside a re-embedding's swap: write the re-sealed rows (parameters of the builder's ``update_vector``)."""
        self._run_many(conn, self._q.update_vector(), updates)

    def _swapped(self) -> None:
        """After a re-embedding's swap committed."""

    def _stream(self, conn, query: str, params: Sequence) -> Iterable:
        """The records of a read that may be stopped early."""
        return conn.execute(query, params)

    # ------------------------------------------------------------------ one transaction for a write path
    @contextmanager
    def atomic_write(self, owner: str) -> Iterator[WriteTransaction]:
        """A block whose calls on this store (from this thread) are one transaction holding the owner's
        write lock: a write path's near-match search and the write it decides happen at once, so two
        processes adding the same sentence for one user store it once (the archive: ``BEGIN IMMEDIATE``
        held across the calls; PostgreSQL: one connection's transaction holding an advisory lock of the
        owner). Committed when the block ends, rolled back (nothing written) when it raises; what a
        write does once committed (index sync, scrubbing) runs after the commit. Blocks nest: an inner
        one adds its owner's lock to the outer transaction (take several owners' in sorted order). Yields
        the block's :class:`~memnets.store.transaction.WriteTransaction`."""
        rowcodec.check_owner(owner, f"{self._name}.atomic_write")
        held = self._writes.current()
        if held is not None:
            self._lock_writes(owner)
            yield held
            return
        with self._writes.opened() as held, self._held_transaction(held):
            self._lock_writes(owner)
            yield held
        for after in held.after_commit:  # reached only once the block committed
            after()

    def _lock_writes(self, owner: str) -> None:
        """Inside :meth:`atomic_write`: hold the owner's write lock until the transaction ends."""
        lock = self._q.lock(f"write-{owner}")
        if lock is not None:
            with self._writing() as conn:
                conn.execute(*lock)

    def _after(self, step: Callable[[], None]) -> None:
        """Run ``step`` (what follows a committed write) now, or inside :meth:`atomic_write` once it commits."""
        self._writes.after(step)

    # ------------------------------------------------------------------ helpers
    @property
    def _name(self) -> str:
        return type(self).__name__

    @staticmethod
    def _run_many(conn, query: str, params: Sequence) -> None:
        cursor = conn.cursor()
        try:
            cursor.executemany(query, params)
        finally:
            cursor.close()

    def _owner_ids(self, owner: str, ids: Sequence[str], column: str = "id") -> Iterator[tuple[str, list]]:
        """(condition, parameters) selecting the owner's rows whose ``column`` is one of ``ids``, in batches."""
        d = self._dialect
        for start in range(0, len(ids), d.in_batch):
            clause, values = d.in_list(column, ids[start : start + d.in_batch])
            yield f"owner = {d.mark} AND {clause}", [owner, *values]

    def _of_owner(self, condition: str, value, owner: str | None, where: str) -> tuple[str, list]:
        """``condition`` (its one parameter: ``value``) on the rows of ``owner``, or of every owner (None)."""
        if owner is None:
            return condition, [value]
        rowcodec.check_owner(owner, where)
        return f"owner = {self._dialect.mark} AND {condition}", [owner, value]

    def _decode(self, record: Sequence) -> Memory:
        """The Memory of a selected record (the columns of ``rows.FIELDS`` first): the one place records are read."""
        return rowcodec.decode_row(self._cipher, self.archive_id, self._dialect.row_text(rowcodec.named(record)))

    def _hit(self, record: Sequence, score: float) -> Hit:
        """A search result of a selected record (as :meth:`_decode` reads it) with its score and stored vector."""
        fields = self._dialect.row_text(rowcodec.named(record))
        memory = rowcodec.decode_row(self._cipher, self.archive_id, fields)
        return Hit(memory, float(score), np.frombuffer(fields["vector"], dtype="<f4"))

    # ------------------------------------------------------------------ writes
    def upsert(self, memories: Sequence[Memory], vectors, *, chunks=None) -> None:
        """Store memories with their vectors [N, dim] in one transaction (all or nothing).

        A memory whose (owner, id) exists already is replaced; over an expired row not swept yet, the
        expired memory's older versions go too (:meth:`_drop_expired_histories`). Raises InvalidMemoryError, naming
        the memory, for empty/whitespace content, text that is not valid Unicode, a vector with
        NaN/inf or of the wrong dim, a repeated (owner, id) in the batch, or unserialisable metadata.
        Content of any length is stored whole; ``chunks`` (one array [m, dim] per memory) are the
        vectors of a long memory's further windows (:mod:`memnets.store.chunks`; kept for current
        memories only, none given: none kept). Rows are written in (owner, id) order, one lock order
        for every writer.
        """
        where = f"{self._name}.upsert"
        memories, array = rowcodec.check_batch(memories, vectors, self.dim, where)
        extra = check_chunks(chunks, len(memories), self.dim, where)
        rows = sorted(
            (
                (_with_chunks(rowcodec.encode_row(memory, vector, where), more), vector)
                for memory, vector, more in zip(memories, array, extra)
            ),
            key=lambda pair: (pair[0].owner, pair[0].id),
        )
        if not rows:
            return
        d = self._dialect
        with self._writing() as conn:
            self._check_encoder(conn, record=True)
            stored = self._stored_versions(conn, [(row.owner, row.id) for row, _ in rows])
            rewritten = [
                (row.owner, row.id) for row, _ in rows if row.superseded_by is None and (row.owner, row.id) in stored
            ]
            self._drop_expired_histories(conn, rewritten)  # only a row written over can have been expired
            sealed = [
                rowcodec.seal_row(row, self._cipher, self.archive_id, stored.get((row.owner, row.id), 0) + 1)
                for row, _ in rows
            ]
            self._run_many(
                conn, self._q.upsert(), [d.row_params(row, vector) for row, (_, vector) in zip(sealed, rows)]
            )
            for owner, ids in _group_pairs((row.owner, row.id) for row in sealed):
                for clause, params in self._owner_ids(owner, ids):
                    self._changing(conn, clause, params)
            for owner, ids in _group_pairs(stored):  # a pending re-embedding's vector of the old text goes with it
                for clause, params in self._owner_ids(owner, ids):
                    conn.execute(*self._q.drop_reembedded(clause, params))
        self._after(lambda: self._written(scrub=bool(stored)))

    def _stored_versions(self, conn, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """{(owner, id): stored version} of the rows about to be rewritten, locked (where the engine locks rows) in order."""
        stored = {}
        for owner, ids in _group_pairs(keys):
            for clause, params in self._owner_ids(owner, sorted(ids)):
                found = conn.execute(*self._q.stored_versions(clause, params))
                stored.update(((owner, memory_id), version) for memory_id, version in found)
        return stored

    def _drop_expired_histories(self, conn, keys: Sequence[tuple[str, str]]) -> None:
        """Inside an upsert's transaction, its rows locked, before it writes the current rows ``keys``: one
        written over an expired row (not swept yet) takes a dead memory's id, so that memory's older
        versions go, as the sweep would have taken them: the new memory starts without them (no one
        reads another memory's history as its own)."""
        now = timeutil.now()
        for owner, ids in _group_pairs(keys):
            for clause, params in self._owner_ids(owner, ids):
                expired = [r[0] for r in conn.execute(*self._q.expired_ids(clause, params, now))]
                for versions, values in self._owner_ids(owner, expired, column="superseded_by"):
                    self._delete_matching(conn, versions, values)

    def touch(self, ids: Iterable[str], owner: str, when: datetime) -> int:
        """Set last_access of the owner's memories with these ids; returns how many were updated."""
        ids = rowcodec.check_ids(ids, f"{self._name}.touch")
        rowcodec.check_owner(owner, f"{self._name}.touch")
        when = as_utc(when, f"{self._name}.touch: when")
        with self._writing() as conn:
            return sum(
                conn.execute(*self._q.touch(clause, params, when)).rowcount
                for clause, params in self._owner_ids(owner, list(dict.fromkeys(ids)))
            )

    def refresh_expiry(self, ids: Iterable[str], owner: str, now: datetime) -> int:
        """Move the expiry of the owner's unexpired memories with these ids and a TTL to ``now + ttl``; returns how many."""
        ids = rowcodec.check_ids(ids, f"{self._name}.refresh_expiry")
        rowcodec.check_owner(owner, f"{self._name}.refresh_expiry")
        now = as_utc(now, f"{self._name}.refresh_expiry: now")
        d = self._dialect
        refreshed = 0
        with self._writing() as conn:
            for clause, params in self._owner_ids(owner, list(dict.fromkeys(ids))):
                rows = conn.execute(*self._q.ttls(clause, params, now)).fetchall()
                expiries = [[*d.expiry_values(now + timedelta(seconds=ttl)), owner, i] for i, ttl in rows]
                self._run_many(conn, self._q.set_expiry(), expiries)
                refreshed += len(rows)
        return refreshed

    def expired(self, now: datetime, owner: str | None = None) -> list[tuple[str, str]]:
        """(owner, id) of every stored row (older versions too) expired at ``now``, of one owner or all, sorted.

        What a sweep deletes; every read already skips them.
        """
        d = self._dialect
        now = d.time(as_utc(now, f"{self._name}.expired: now"))
        where, params = self._of_owner(f"{d.expires_column} <= {d.mark}", now, owner, f"{self._name}.expired")
        with self._reading() as conn:
            return [tuple(r) for r in conn.execute(*self._q.expired(where, params))]

    def new_version(self, memory: Memory, vector, *, chunks=None, older: bool = False) -> Memory:
        """Make ``memory`` the current version of its (owner, id), keeping the current one as history, in one
        write transaction; returns the older version (``older``: ``memory`` is stored as the next older
        one). The one place that numbers versions: :func:`memnets.store.core_versions.new_version`."""
        return core_versions.new_version(self, memory, vector, chunks=chunks, older=older)

    # ------------------------------------------------------------------ deletions and their ledger
    def delete(self, ids: Iterable[str], owner: str) -> int:
        """Delete the owner's memories with these ids and their older versions (others' are untouched); returns how many rows."""
        return self._delete_ids(ids, owner, f"{self._name}.delete")

    def delete_expired(self, id: str, owner: str, now: datetime, *, with_ids: Iterable[str] = ()) -> int:
        """The expiry sweep's deletion: the owner's memory ``id``, expired at ``now``, with ``with_ids`` (what
        goes with it: its versions, derived memories) and their older versions; returns how many rows.

        Only while ``id`` is still expired at ``now``, checked in the deletion's own transaction (its row
        locked where the engine locks rows, so a put or refresh committed meanwhile is seen and one
        arriving later waits): a memory put again or refreshed by another writer after the sweep listed
        it is kept, with everything that would have gone with it (0 rows, no tombstone).
        """
        now = self._dialect.time(as_utc(now, f"{self._name}.delete_expired: now"))
        guard = self._q.still_expired(owner, id, now)
        return self._delete_ids([id, *with_ids], owner, f"{self._name}.delete_expired", guard)

    def _delete_ids(self, ids: Iterable[str], owner: str, where: str, guard: tuple[str, list] | None = None) -> int:
        """:meth:`delete` (``where`` names the caller in errors); ``guard``: as in :meth:`_delete_rows`."""
        ids = list(dict.fromkeys(rowcodec.check_ids(ids, where)))
        rowcodec.check_owner(owner, where)
        return self._delete(list(self._owner_ids(owner, ids)), [(owner, i, None) for i in ids], guard=guard)

    def delete_owner(self, owner: str) -> int:
        """Delete every memory of an owner; returns how many rows."""
        rowcodec.check_owner(owner, f"{self._name}.delete_owner")
        return self._delete([(f"owner = {self._dialect.mark}", [owner])], [(owner, None, None)], erase_owner=True)

    def purge_older_than(self, cutoff: datetime, owner: str | None = None) -> int:
        """Delete memories created (``t``) before ``cutoff`` with their older versions, of one owner or of all;
        returns how many rows. Naive datetimes, stored or given, are read as UTC."""
        d = self._dialect
        cutoff = d.time(as_utc(cutoff, f"{self._name}.purge_older_than: cutoff"))
        where, params = self._of_owner(f"{d.t_column} < {d.mark}", cutoff, owner, f"{self._name}.purge_older_than")
        return self._delete([(where, params)], [(owner, None, cutoff)])

    def _delete(
        self,
        clauses: Sequence[tuple[str, list]],
        tombstones: Sequence[tuple],
        erase_owner: bool = False,
        guard: tuple[str, list] | None = None,
    ) -> int:
        """Delete the rows matching any (where, params) clause and the older versions of the current ones
        among them in one transaction, with the deletion's ``tombstones`` (see :meth:`deleted_since`);
        ``erase_owner``: the deletion takes every row of its one owner, whose earlier tombstones go too;
        ``guard``: see :meth:`_delete_rows`."""
        deleted = self._delete_rows(clauses, tombstones, erase_owner, guard)
        self._after(lambda: self._deleted(deleted))
        return deleted

    def _delete_rows(
        self,
        clauses: Sequence[tuple[str, list]],
        tombstones: Sequence[tuple],
        erase_owner: bool,
        guard: tuple[str, list] | None = None,
    ) -> int:
        """The transaction of :meth:`_delete`; returns how many rows it deleted. ``guard`` (a query and its
        parameters): nothing is deleted, nor a tombstone recorded, unless it finds a row inside the transaction."""
        deleted = 0
        with self._writing() as conn:
            if guard is not None and conn.execute(*guard).fetchone() is None:
                return 0
            self._record_tombstones(conn, tombstones, erase_owner)
            for where, params in clauses:
                current = conn.execute(*self._q.current_keys(where, params)).fetchall()
                deleted += self._delete_matching(conn, where, params)
                for owner, ids in _group_pairs(current):
                    for clause, values in self._owner_ids(owner, ids, column="superseded_by"):
                        deleted += self._delete_matching(conn, clause, values)
        return deleted

    def _delete_matching(self, conn, where: str, params: list) -> int:
        self._changing(conn, where, params)
        conn.execute(*self._q.drop_reembedded(where, params))
        return conn.execute(*self._q.delete(where, params)).rowcount

    def _record_tombstones(self, conn, tombstones: Sequence[tuple], erase_owner: bool) -> None:
        """Append (owner or None = all, id or None = all, t cutoff or None) tombstones, owners and ids by
        their ledger tags (the table is created on first use, so older stores gain it without a migration)."""
        stones = [rowcodec.ledger_row(self._ledger_secret, *stone) for stone in tombstones]
        lock = self._q.lock("store")
        if lock is not None:
            conn.execute(*lock)
        conn.execute(*self._q.deletions_table())
        if erase_owner:
            conn.execute(*self._q.erase_tombstones(stones[0][0]))
        self._run_many(conn, self._q.add_tombstone(), stones)

    def _has_deletions(self, conn) -> bool:
        """Whether the tombstone table exists yet (the first delete creates it); a yes is remembered,
        since the table is never dropped, so readers of the ledger stop asking the catalog."""
        if not self._deletions_exist:
            self._deletions_exist = conn.execute(*self._q.deletions_exist()).fetchone()[0] is not None
        return self._deletions_exist

    def _ledger_mark(self, conn) -> int:
        if not self._has_deletions(conn):
            return 0
        return int(conn.execute(*self._q.ledger_mark()).fetchone()[0])

    def deletion_mark(self) -> int:
        """The newest tombstone's sequence number (0: nothing was ever deleted); see :meth:`deleted_since`."""
        with self._reading() as conn:
            return self._ledger_mark(conn)

    def deleted_since(self, mark: int, owner: str, memories: Sequence[Memory]) -> tuple[int, set[str]]:
        """Which of ``memories`` (the owner's, held in memory by a writer) were deleted after ``mark``.

        Every delete, delete_owner and purge records a tombstone (owner or all, id or all, a
        ``t`` cutoff) in its transaction, even for ids the table does not hold: a memory still in a
        manager's write buffer. Before a writer writes or keeps what it holds, it asks here, so a
        deletion from any connection or process is never undone by a later write. Returns the
        newest mark (of every owner: a caller never re-reads others' tombstones) and the ids to
        forget. Tombstones hold ids and times, never content.
        """
        rowcodec.check_owner(owner, f"{self._name}.deleted_since")
        d = self._dialect
        with self._reading() as conn:
            newest = self._ledger_mark(conn)
            if newest <= mark or not memories:
                return max(int(mark), newest), set()
            tag = rowcodec.ledger_tag(self._ledger_secret, owner)
            stones = conn.execute(*self._q.tombstones_since(mark, newest, tag)).fetchall()
        forgotten = rowcodec.deleted_by_tombstones(
            memories, stones, lambda memory: d.time(memory.t), self._ledger_secret
        )
        return newest, forgotten

    # ------------------------------------------------------------------ reads (all owner-scoped)
    def get(self, ids: Iterable[str], owner: str, *, include_expired: bool = False) -> list[Memory]:
        """The owner's memories with these ids (older versions included), in the order asked; ids not found
        (or another owner's) are skipped.

        ``include_expired``: expired rows not swept yet too, which hold their ids until the sweep: what
        a check of who may use an id must see (the server's token scopes), never a read's answer.
        """
        ids = rowcodec.check_ids(ids, f"{self._name}.get")
        rowcodec.check_owner(owner, f"{self._name}.get")
        now = None if include_expired else timeutil.now()
        found: dict[str, Memory] = {}
        with self._reading() as conn:
            for clause, params in self._owner_ids(owner, list(dict.fromkeys(ids))):
                found.update((m.id, m) for m in map(self._decode, conn.execute(*self._q.rows(clause, params, now))))
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def vectors(self, ids: Iterable[str], owner: str) -> np.ndarray:
        """The stored vectors [N, dim] of the owner's memories with these ids (in order; KeyError naming the
        first missing one). Expired rows not yet swept still answer (callers ask for ids a read just
        returned, and a vector holds no text)."""
        ids, found = self._field_by_id("vector", ids, owner, f"{self._name}.vectors")
        if not ids:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._dialect.vector_array(found[i], self.dim, i) for i in ids])

    def chunk_vectors(self, ids: Iterable[str], owner: str) -> list[np.ndarray]:
        """The further window vectors [m, dim] of the owner's memories with these ids, in order (all must exist)."""
        ids, found = self._field_by_id("chunks", ids, owner, f"{self._name}.chunk_vectors")
        return [from_blob(None if found[i] is None else bytes(found[i]), self.dim) for i in ids]

    def _field_by_id(self, field: str, ids: Iterable[str], owner: str, where: str) -> tuple[list[str], dict]:
        """(the checked ids, {id: the field's value}) of the owner's rows; KeyError naming the first id it lacks."""
        ids = rowcodec.check_ids(ids, where)
        rowcodec.check_owner(owner, where)
        d = self._dialect
        column = d.columns[rowcodec.FIELDS.index(field)]
        found = {}
        with self._reading() as conn:
            for clause, params in self._owner_ids(owner, list(dict.fromkeys(ids))):
                found.update(conn.execute(*self._q.field(column, clause, params)).fetchall())
        missing = [i for i in ids if i not in found]
        if missing:
            raise UnknownIdError(f"{where}: owner {owner!r} has no memory {missing[0]!r}", field="ids")
        return ids, found

    def search(self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None) -> list[tuple[Memory, float]]:
        """The owner's k current memories passing ``filters`` of highest inner product with ``vector`` [dim],
        best first; k results whenever k memories match (a long memory ranks at its best window)."""
        return [(hit.memory, hit.score) for hit in self._hits(vector, k, owner, filters, f"{self._name}.search")]

    def search_with_vectors(
        self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None
    ) -> tuple[list[tuple[Memory, float]], np.ndarray]:
        """(:meth:`search`'s results, their stored vectors [n, dim] in the same order), the vectors taken from
        the records the search read (:mod:`memnets.store.core_search`)."""
        return with_vectors(self._hits(vector, k, owner, filters, f"{self._name}.search_with_vectors"), self.dim)

    def lexical_search(
        self, text: str, k: int, owner: str, *, filters: MemoryFilter | None = None
    ) -> list[tuple[Memory, float]]:
        """The owner's k current memories passing ``filters`` that hold a word of ``text``, best first by the
        engine's lexical score (:mod:`memnets.store.core_lexical`: what is refused, and why an encrypted
        store keeps no lexical index)."""
        k, filters = check_lexical(self, text, k, owner, filters)
        return [(hit.memory, hit.score) for hit in self._engine.lexical(self, text, k, owner, filters)]

    def _hits(self, vector, k: int, owner: str, filters: MemoryFilter | None, where: str) -> list[Hit]:
        """:meth:`search`'s results as :class:`~memnets.store.core_search.Hit` results, the arguments checked
        (``where`` names the caller in errors)."""
        rowcodec.check_owner(owner, where)
        k = rowcodec.check_k(k, where)
        query = rowcodec.check_vectors(vector, 1, self.dim, where, single=True)[0]
        filters = MemoryFilter.parse(filters)
        if filters is not None and filters.time_travel:
            return as_of.rank(self._versions(owner), query, k, filters)
        return self._engine.search(self, query, k, owner, filters)

    def _versions(self, owner: str) -> list[tuple[Memory, np.ndarray, np.ndarray]]:
        """Every unexpired row of the owner, older versions included, in write order, with its vector and
        window vectors: what an as-of read ranks or lists (:mod:`memnets.store.as_of`)."""
        d = self._dialect
        out = []
        with self._reading() as conn:
            for record in self._stream(conn, *self._q.versions(owner, timeutil.now())):
                fields, memory = rowcodec.named(record), self._decode(record)
                vector = d.vector_array(fields["vector"], self.dim, memory.id)
                out.append((memory, vector, from_blob(fields["chunks"], self.dim)))
        return out

    def _window_scores(self, conn, where: str, params: list, query: np.ndarray) -> dict[str, float]:
        """{id: best window score} of the long memories among the rows matching ``where`` (memnets.store.chunks)."""
        return best_scores(self._window_rows(conn, where, params), query, self.dim)

    def _window_rows(self, conn, where: str, params: list):
        """The (id, chunk bytes) rows of the long memories among the rows matching ``where``: a cursor."""
        return conn.execute(*self._q.windows(where, params))

    def _current(
        self, conn, ids: Sequence[str], owner: str, now: datetime, filters: MemoryFilter | None = None
    ) -> list[Hit]:
        """The owner's current memories with these ids, unexpired at ``now``, that pass ``filters``, as hits
        of score 0 (what :func:`memnets.store.chunks.merge` scores by their windows)."""
        out = []
        for clause, params in self._owner_ids(owner, list(ids)):
            out += [self._hit(r, 0.0) for r in conn.execute(*self._q.rows(clause, params, now, current=True))]
        return [hit for hit in out if filters is None or filters.matches(hit.memory)]

    def list_memories(
        self, owner: str, *, limit: int | None = None, offset: int = 0, filters: MemoryFilter | None = None
    ) -> list[Memory]:
        """The owner's current memories passing ``filters``, ordered by (t, id); ``offset`` skipped, at most ``limit``."""
        rowcodec.check_owner(owner, f"{self._name}.list_memories")
        rowcodec.check_page(limit, offset, f"{self._name}.list_memories")
        filters = MemoryFilter.parse(filters)
        if filters is not None and filters.time_travel:
            return as_of.listed([row[0] for row in self._versions(owner)], filters, limit, offset)
        where, params = self._dialect.clear_conditions(owner, filters, timeutil.now())
        with self._reading() as conn:
            if filters is None or not filters.needs_payload:
                return [self._decode(r) for r in conn.execute(*self._q.page(where, params, limit, offset))]
            out: list[Memory] = []
            skipped = 0
            for record in self._stream(conn, *self._q.listing(where, params)):
                if limit is not None and len(out) >= limit:
                    break
                memory = self._decode(record)
                if filters.matches(memory):
                    if skipped < offset:
                        skipped += 1
                    else:
                        out.append(memory)
            return out

    def export(self, owner: str) -> list[Memory]:
        """Every stored row of the owner (older versions and rows expired but not swept too), decrypted, by (t, id):
        the right-of-access dump, read by one statement, one snapshot (what ``memnets memories export`` writes from)."""
        rowcodec.check_owner(owner, f"{self._name}.export")
        return self._rows_of(self._q.export(owner))

    def history(self, id: str, owner: str) -> list[Memory]:
        """The older versions of the owner's memory ``id`` (rows superseded by it), oldest (first written) first."""
        rowcodec.check_ids([id], f"{self._name}.history")
        rowcodec.check_owner(owner, f"{self._name}.history")
        return self._rows_of(self._q.history(owner, id))

    def _rows_of(self, statement: tuple[str, list]) -> list[Memory]:
        """The memories a statement's records hold, read in one snapshot."""
        with self._reading() as conn:
            return [self._decode(r) for r in conn.execute(*statement)]

    def count(self, owner: str) -> int:
        """How many current (not superseded, not expired) memories the owner has."""
        rowcodec.check_owner(owner, f"{self._name}.count")
        with self._reading() as conn:
            return conn.execute(*self._q.count(owner, timeutil.now())).fetchone()[0]

    def owners(self) -> list[str]:
        """Every owner with at least one stored memory, sorted."""
        with self._reading() as conn:
            return [r[0] for r in conn.execute(*self._q.owners(timeutil.now()))]

    # ------------------------------------------------------------------ the encoder and re-embedding (core_encoding)
    def _check_encoder(self, conn, record: bool = False) -> None:
        """Inside a transaction: the bound encoder is still the store's (``record``: write it if none is)."""
        core_encoding.check_encoder(self, conn, record)

    def _identity_of(self, row) -> EncoderIdentity | None:
        """The encoder identity of a meta row read with the builder's ``get_meta`` (None: no row)."""
        return core_encoding.identity_of(self, row)

    def encoder_identity(self) -> EncoderIdentity | None:
        """The encoder that filled the store (None before the first vector); see memnets.store.identity."""
        return core_encoding.encoder_identity(self)

    def bind_encoder(self, identity: EncoderIdentity) -> None:
        """Check that ``identity`` filled the store (EncoderMismatchError if not); later writes and searches check it."""
        core_encoding.bind_encoder(self, identity)

    def reembed_start(self, identity: EncoderIdentity) -> str:
        """Begin or resume re-embedding to ``identity``: "current", "resumed" or "started"."""
        return core_encoding.reembed_start(self, identity)

    def reembed_progress(self) -> tuple[int, int]:
        """(rows with their new vector, rows in the store)."""
        return core_encoding.reembed_progress(self)

    def reembed_finish(self) -> bool:
        """Swap to the new vectors and encoder in one transaction once every row has one; True if it swapped."""
        return core_encoding.reembed_finish(self)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "open" if self._is_open() else "closed"
        return f"{self._name}({self._where()!r}, dim={self.dim}, encrypted={self._cipher is not None}, {state})"


def _with_chunks(row: rowcodec.Row, chunks: np.ndarray) -> rowcodec.Row:
    """``row`` with its further window vectors (a current memory's only: an older version keeps none)."""
    return dataclasses.replace(row, chunks=to_blob(chunks) if row.superseded_by is None else None)


def _group_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(owner, [ids]) groups of (owner, id) pairs, owners in first-seen order."""
    grouped: dict[str, list[str]] = {}
    for owner, memory_id in pairs:
        grouped.setdefault(owner, []).append(memory_id)
    return list(grouped.items())
