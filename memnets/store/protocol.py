"""The store contract: what every memory store (embedded SQLite + FAISS, PostgreSQL + pgvector) guarantees.

The manager, :func:`memnets.open` and the framework adapters speak only to this Protocol, and one
test suite (tests/store/test_store_contract.py) runs it against every store. The guarantees:

- Owner-scoped: every read and write names an owner; nothing of another owner is ever returned,
  counted or changed. Ids are unique per owner, not globally.
- Filtered before ranking: ``search`` ranks only the memories that pass the filter (and are not
  superseded), so it returns ``min(k, matching)`` results; never fewer because of the filter.
- Deletion is final: a deleted memory (and every older version of it) is gone for every
  connection and process once ``delete`` returns; no index or cache brings it back.
- Crash-safe: when ``upsert`` returns, the write survives a killed process.
- Versions: a row whose ``superseded_by`` is set is an older version of the memory with that id;
  ``get``/``vectors`` return it by its own id, ``history`` lists them, and ``search``,
  ``list_memories`` and ``count`` skip it.  ``new_version`` turns the current row into such a version and writes the new one in one atomic
  step, so concurrent updates of one id keep every acknowledged version, in a total order.
- Scopes: ``agent`` and ``session`` are stored with the memory (sealed with its other fields) and
  filtered on the decoded record, like metadata.
- The deletion ledger names owners and ids only by keyed hashes (:func:`memnets.store.rows.ledger_tag`);
  ``delete_owner`` leaves one tombstone for the owner and none for its ids.
- Bad input raises ValueError/TypeError (InvalidMemoryError for records and vectors) naming the
  argument, and writes nothing.

Optional capabilities are declared, not guessed from the methods a store happens to have (the way
LangGraph's ``BaseStore.supports_ttl`` works): each is a Protocol below with a ``supports_*`` flag,
and a store that implements one sets the flag to True as a class attribute. Callers ask
:func:`supports`, which also refuses a store that declares a capability without its methods.

- :class:`DeletionLedger` (``supports_deletion_ledger``): tombstones of every deletion, so a
  manager holding memories in process never writes back what another connection deleted.
- :class:`Compaction` (``supports_compaction``): ``compact()`` returns the bytes of deleted rows to
  the file system or the database now, instead of at some later upkeep.
- :class:`IndexRebuild` (``supports_index_rebuild``): ``rebuild_index()`` builds the search index
  from the stored vectors (after a bulk load, or to change its parameters).
- :class:`EncoderBinding` (``supports_encoder_binding``): the store records which encoder filled it
  with its first vector and refuses another (:mod:`memnets.store.identity`).
- :class:`Reembedding` (``supports_reembed``): the store can move to a new encoder while it
  answers, resumably (:mod:`memnets.store.reembed`).
- :class:`Expiry` (``supports_expiry``): a row whose ``expires_at`` has passed (by
  :func:`memnets.timeutil.now`) is skipped by ``get``, ``search``, ``list_memories``, ``count`` and
  ``owners`` at once (``get(..., include_expired=True)`` still finds it: its id stays taken until the
  sweep, and a check of who may use an id must see it), and ``search`` still fills k from the others; ``history`` and ``vectors``
  still return it (the deletion path and callers holding an id read them) until a sweep deletes
  it; ``expired`` lists what a sweep takes, ``delete_expired`` deletes one of them only if it is
  still expired in the deletion's transaction, ``refresh_expiry`` moves an expiry on a read.
- :class:`Chunks` (``supports_chunks``): a memory longer than the encoder's window keeps the
  vectors of its further windows (:mod:`memnets.chunking`) with its current row: ``upsert`` and
  ``new_version`` take them as ``chunks=`` (one array [m, dim] per memory; none given: the row has
  none), ``chunk_vectors`` reads them back, and ``search`` returns each memory once at its best
  window's score (:mod:`memnets.store.chunks`). Every path that rewrites or removes the row takes
  its chunks with it; an older version keeps its main vector only.
- :class:`LocalState` (``supports_local_state``): the store lives in a folder of this machine
  (``directory``), where the memory keeps per-user files beside it (a manager's saved tiers) that
  erasing the user removes too. A server-side store (PostgreSQL) has no such folder.
- :class:`AtomicWrites` (``supports_atomic_write``): ``with store.atomic_write(owner):`` makes every
  call on the store inside the block (from this thread) one transaction that no other writer of the
  owner interleaves with, from any thread, process or machine: a write path reads the near matches
  and writes what it decided from them in one step, so two processes adding the same sentence for
  one user at once store it once.

- :class:`SearchVectors` (``supports_search_vectors``): ``search_with_vectors`` returns a search's
  results with their stored vectors, taken from the rows the search read: a re-ranker's candidates
  and their vectors in one read (:class:`memnets.memory.search.Searcher`).

- :class:`LexicalSearch` (``supports_lexical_search``): ``lexical_search`` ranks the owner's current
  memories by the words of a query (BM25), under ``search``'s contract (owner-scoped, filters before
  ranking, current and unexpired rows only), from an index of the text that no deletion leaves behind:
  what hybrid search fuses with the dense ranking (:mod:`memnets.memory.hybrid`). A store sets the flag
  per instance: an encrypted one keeps no such index (it would hold the text in clear).

A store without a flag has none of these; the manager then forgets deletions made in its own
process only. The contract suite (:mod:`memnets.store.testing`) checks every declared capability.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Protocol, TypeGuard, TypeVar, runtime_checkable

import numpy as np

from memnets.records import Memory
from memnets.store.filters import MemoryFilter


@runtime_checkable
class MemoryStore(Protocol):
    """A persistent, owner-scoped store of memories and their unit vectors (inner-product search)."""

    dim: int

    def upsert(self, memories: Sequence[Memory], vectors) -> None:
        """Store memories with their vectors [N, dim] in one transaction; an existing (owner, id) is replaced."""

    def search(self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None) -> list[tuple[Memory, float]]:
        """The owner's k best current memories passing ``filters`` by inner product, best first."""

    def get(self, ids: Iterable[str], owner: str) -> list[Memory]:
        """The owner's memories with exactly these ids (superseded ones included), in the order asked."""

    def vectors(self, ids: Iterable[str], owner: str) -> np.ndarray:
        """The stored vectors [N, dim] of these ids (all must exist: KeyError otherwise)."""

    def list_memories(
        self, owner: str, *, limit: int | None = None, offset: int = 0, filters: MemoryFilter | None = None
    ) -> list[Memory]:
        """The owner's current memories passing ``filters``, ordered by (t, id), paged by offset/limit."""

    def export(self, owner: str) -> list[Memory]:
        """Every stored row of the owner (older versions, expired rows not swept yet), by (t, id), read as one
        snapshot: what the right of access and ``memnets memories export`` read, unskewed by concurrent writes."""

    def count(self, owner: str) -> int:
        """How many current (not superseded) memories the owner has."""

    def new_version(self, memory: Memory, vector, *, older: bool = False) -> Memory:
        """Make ``memory`` the current version of its (owner, id) in one atomic step; returns the older version.

        The current row becomes ``{id}~{n}`` (``superseded_by=id``, n the next free number, its
        ``valid_to`` closed at ``memory.valid_from``: :func:`memnets.store.rows.closed_by`) and
        ``memory`` with ``vector`` [dim] takes its place, under one lock: concurrent calls on one id
        (any thread, process or machine) are serialised, so every acknowledged version is kept in
        ``history``, in the order they committed. KeyError when there is no current memory ``id``.
        ``older=True``: ``memory`` held before the current version (a backdated statement); it is stored as
        the next ``{id}~{n}`` itself and the current row stays; returns it as stored. The store is the one
        place that numbers versions: callers never name an ``{id}~{n}`` row they write.
        """

    def touch(self, ids: Iterable[str], owner: str, when: datetime) -> int:
        """Set last_access of these memories; returns how many were updated."""

    def delete(self, ids: Iterable[str], owner: str) -> int:
        """Delete these memories and every row superseded by them; returns how many rows went."""

    def delete_owner(self, owner: str) -> int:
        """Delete everything of an owner; returns how many rows went."""

    def purge_older_than(self, cutoff: datetime, owner: str | None = None) -> int:
        """Delete memories with t < cutoff (of one owner or all) with their older versions; returns how many."""

    def owners(self) -> list[str]:
        """Every owner that has at least one memory, sorted."""

    def history(self, id: str, owner: str) -> list[Memory]:
        """The older versions of memory ``id`` (rows with superseded_by == id), oldest first."""

    def close(self) -> None:
        """Release connections and files; safe to call twice."""


@runtime_checkable
class DeletionLedger(Protocol):
    """Capability: a ledger of deletions that writers holding memories in process check before they write."""

    supports_deletion_ledger: bool

    def deletion_mark(self) -> int:
        """The newest tombstone's sequence number (0: nothing was ever deleted)."""

    def deleted_since(self, mark: int, owner: str, memories: Sequence[Memory]) -> tuple[int, set[str]]:
        """Which of ``memories`` (the owner's, held by a writer) were deleted after ``mark``, and the newest mark.

        Every delete, delete_owner and purge records its tombstones (also for ids the store never
        held) in its own transaction, so a deletion by any connection or process is seen here.
        """


@runtime_checkable
class Compaction(Protocol):
    """Capability: give the space (and bytes) of deleted rows back now."""

    supports_compaction: bool

    def compact(self) -> object:
        """Reclaim deleted rows' space now (the return value is the store's own report)."""


@runtime_checkable
class IndexRebuild(Protocol):
    """Capability: rebuild the search index from the stored vectors."""

    supports_index_rebuild: bool

    def rebuild_index(self) -> object:
        """Build the index again from the table (the return value is the store's own report)."""


@runtime_checkable
class EncoderBinding(Protocol):
    """Capability: the store knows which encoder filled it and refuses vectors of another."""

    supports_encoder_binding: bool

    def encoder_identity(self) -> object:
        """The recorded :class:`~memnets.store.identity.EncoderIdentity`, None before the first vector."""

    def bind_encoder(self, identity) -> None:
        """Refuse (EncoderMismatchError) unless ``identity`` filled the store; record it with the first vector."""


@runtime_checkable
class Reembedding(Protocol):
    """Capability: re-embed every row with a new encoder, resumably, swapping atomically at the end."""

    supports_reembed: bool

    def reembed_start(self, identity) -> str:
        """Begin or resume re-embedding to ``identity``: "started", "resumed" or "current"."""

    def reembed_batch(self, size: int) -> object:
        """A context manager yielding a ReembedBatch of rows still to embed (empty when none is left)."""

    def reembed_progress(self) -> tuple[int, int]:
        """(rows with their new vector, rows in the store)."""

    def reembed_finish(self) -> bool:
        """Swap to the new vectors and encoder in one transaction if no row is left; True if it swapped."""


@runtime_checkable
class Expiry(Protocol):
    """Capability: memories with an ``expires_at`` vanish from reads when it passes, and can be swept."""

    supports_expiry: bool

    def refresh_expiry(self, ids: Iterable[str], owner: str, now: datetime) -> int:
        """Set the expiry of these unexpired memories with a TTL to ``now + ttl``; returns how many."""

    def expired(self, now: datetime, owner: str | None = None) -> list[tuple[str, str]]:
        """(owner, id) of every stored row expired at ``now`` (of one owner or all), sorted: what a sweep deletes."""

    def delete_expired(self, id: str, owner: str, now: datetime, *, with_ids: Iterable[str] = ()) -> int:
        """Delete ``id`` with ``with_ids`` (and their older versions) only if ``id`` is still expired at ``now``,
        checked in the deletion's transaction (a put or refresh since the sweep listed it keeps it); rows deleted."""


@runtime_checkable
class Chunks(Protocol):
    """Capability: several vectors per long memory, searched as one memory at its best window."""

    supports_chunks: bool

    def chunk_vectors(self, ids: Iterable[str], owner: str) -> list[np.ndarray]:
        """The further window vectors [m, dim] of these memories, in order (m = 0 for a memory without; KeyError for an unknown id)."""


@runtime_checkable
class LocalState(Protocol):
    """Capability: the store's files are in a folder of this machine, where per-user state may sit beside them."""

    supports_local_state: bool
    directory: Path


@runtime_checkable
class AtomicWrites(Protocol):
    """Capability: several reads and writes of one owner as one transaction, serialised with other writers."""

    supports_atomic_write: bool

    def atomic_write(self, owner: str) -> AbstractContextManager[None]:
        """A block whose store calls (this thread's) are one transaction, holding the owner's write lock:
        committed when it ends, rolled back (nothing written) when it raises. Blocks nest (an inner one
        adds its owner's lock to the outer transaction); take several owners' in sorted order."""


@runtime_checkable
class SearchVectors(Protocol):
    """Capability: a search that returns its results' stored vectors too, from the rows it read."""

    supports_search_vectors: bool

    def search_with_vectors(
        self, vector, k: int, owner: str, *, filters: MemoryFilter | None = None
    ) -> tuple[list[tuple[Memory, float]], np.ndarray]:
        """(``search``'s results, their stored vectors [n, dim] in that order): what ``vectors`` of their ids
        returns, without reading the rows again."""


@runtime_checkable
class LexicalSearch(Protocol):
    """Capability: a ranking of the owner's memories by the words of a query, beside the dense one."""

    supports_lexical_search: bool

    def lexical_search(
        self, text: str, k: int, owner: str, *, filters: MemoryFilter | None = None
    ) -> list[tuple[Memory, float]]:
        """The owner's k current memories passing ``filters`` that hold a word of ``text``, best first by the
        lexical score (higher is better); fewer when fewer hold one."""


CAPABILITIES: dict[type, str] = {
    DeletionLedger: "supports_deletion_ledger",
    Compaction: "supports_compaction",
    IndexRebuild: "supports_index_rebuild",
    EncoderBinding: "supports_encoder_binding",
    Reembedding: "supports_reembed",
    Expiry: "supports_expiry",
    Chunks: "supports_chunks",
    LocalState: "supports_local_state",
    AtomicWrites: "supports_atomic_write",
    SearchVectors: "supports_search_vectors",
    LexicalSearch: "supports_lexical_search",
}
"""Every optional capability and the flag a store sets to declare it."""

_C = TypeVar("_C")


_IMPLEMENTED: dict[tuple[type, type], bool] = {}  # (store class, capability) -> has its methods


def supports(store: object, capability: type[_C]) -> TypeGuard[_C]:
    """Whether ``store`` declares ``capability`` (one of :data:`CAPABILITIES`) by its ``supports_*`` flag.

    Raises TypeError for a capability that is not in :data:`CAPABILITIES`, and for a store that
    sets the flag but lacks a method of the capability (a declaration that would fail later). The
    method check runs once per store class and capability: ``isinstance`` against a runtime Protocol
    costs ~30 us, and the write path asks several times per add.
    """
    flag = CAPABILITIES.get(capability)
    if flag is None:
        raise TypeError(
            f"supports: {capability!r} is not a store capability; known: {[c.__name__ for c in CAPABILITIES]}"
        )
    if getattr(store, flag, False) is not True:
        return False
    checked = (type(store), capability)
    if checked not in _IMPLEMENTED:
        _IMPLEMENTED[checked] = isinstance(store, capability)
    if not _IMPLEMENTED[checked]:
        raise TypeError(f"{type(store).__name__} sets {flag} = True but lacks a method of {capability.__name__}")
    return True
