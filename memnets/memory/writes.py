"""The one write path of every door: validate -> consistency -> chunk -> encode -> store (+ history) -> managers.

``AgentMemory.add``/``add_many``/``update`` and ``MemoryManager.observe`` go through these steps,
and the framework adapters (LangGraph, LangChain, MCP) reach them only through ``AgentMemory``, so
a memory written through any door is checked, merged, versioned and read back the same way.

1. **Validate.** A :class:`~memnets.records.Memory` validates its fields when it is built; the text
   itself is checked by :mod:`memnets.memory.texts`: a str, showing something, valid Unicode (a lone surrogate
   is refused with InvalidMemoryError naming its position), at most ``MAX_TEXT_CHARS``
   characters, and one the encoder's tokenizer takes. Queries get the
   same text check.
2. **Consistency** (:func:`classify`): a new text against the user's nearest memories of its kind
   (:func:`nearest`; and, for ``add_many`` and the manager, what the call or the manager holds):

   - *unchanged*: it says the same thing as one of them: equal after :func:`normalise`, or a near
     match (cosine >= the duplicate threshold) by the same speaker whose facts (:func:`facts`:
     numbers, dates, times, names, negations, in order) are equal. Nothing is written but the
     memory's last access.
   - *updated*: a near match by the same speaker whose facts differ (the flight at 10:30 that now
     leaves at 11:30), or, at any cosine, a memory by the same speaker with the same sentence
     :func:`frame` (its words with each fact as a slot, at least :data:`MIN_FRAME_WORDS` of them)
     whose differing facts are all names (the puppy named Rex that is now named Max: a changed
     name moves the cosine far below any safe threshold; a changed number does not, and "note 3
     ..." / "note 4 ..." stay two memories unless they are near matches). The new text becomes
     the current memory under the old id, the old one is kept in its history (:func:`successor`,
     :func:`write_version`): nothing said is lost.
   - *added*: anything else; a new memory.

   Only memories of the same scope (:func:`same_scope`: agent and session) are candidates.

   An add with an explicit id (or a Memory record) is keyed by it: an existing memory with that
   id is *unchanged* when the new record states the same (:func:`same_record`), else *updated*.
3. **Chunk and encode** (:mod:`memnets.memory.encoding`): the memory's vector is the
   encoder's embedding of its text (the first window); a text longer than the window also gets
   the vectors of its further windows (:mod:`memnets.chunking`: overlapping token windows cut on
   the tokenizer's offsets), which a store with the Chunks capability keeps with the memory, so
   that search finds a fact anywhere in it and returns the memory once.
4. **Store**, with history; the important memories first (:func:`write_hybrid`, :func:`upsert`). The
   store numbers every older version (``new_version``; a later item of one call that changes an
   earlier one is that item's next version too). Steps 2 and 4 are one store transaction holding the
   owner's write lock (:class:`~memnets.memory.owners.Writers`): serialised per user, never across users.
5. **Live managers** of the user learn new versions (``refresh``) and superseded memories
   (``forget``) at once; the caller (``AgentMemory``) hands them in.

``update`` is a write of this path too: a :class:`~memnets.memory.revision.Revision` applied to the
version current under the owner's lock (:meth:`WritePath.update`).

The rule was chosen and measured on LoCoMo's training conversations (``python -m bench.experiments.duplicates``,
docs/memory.md): what merges, what becomes an update, with examples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

import numpy as np

from memnets.argerrors import ArgumentValueError
from memnets.memory import expiry
from memnets.memory.consistency import check_same_scope, classify, normalise, restated, same_record, same_scope
from memnets.memory.encoding import chunk_vectors, embed  # re-exported: the write path's encoder calls
from memnets.memory.owners import Writers
from memnets.memory.revision import Revision, current_version, successor
from memnets.memory.texts import check_text, check_tokens
from memnets.memory.validity import backdated
from memnets.records import Memory
from memnets.store.protocol import Chunks, supports
from memnets.store.rows import VERSION_SEPARATOR, closed_by  # versions of "x": "x~1", "x~2", ...
from memnets.temporal.dates import DATES_KEY, date_metadata

DUPLICATE_CANDIDATES = 5  # nearest memories (any kind) looked at for a near match of the same kind


def nearest(store, vector: np.ndarray, owner: str, kind: str) -> list[tuple[Memory, float]]:
    """The owner's stored memories of ``kind`` among its :data:`DUPLICATE_CANDIDATES` nearest (any kind), best first.

    The one near-match lookup of every door. An unfiltered search runs on the index (a kind-filtered
    one would be exact over the owner's rows of that kind); a near match is missed only when five
    memories of other kinds are nearer still, i.e. are near matches themselves.
    """
    return [(m, float(s)) for m, s in store.search(vector, DUPLICATE_CANDIDATES, owner) if m.kind == kind]


def write_version(store, new: Memory, vector: np.ndarray, chunks: np.ndarray | None = None) -> Memory:
    """Store ``new`` (with its further window vectors ``chunks``) under its id and keep the current row
    of that id as ``{id}~{n}`` superseded by it (the store numbers it).

    One atomic step of the store (``MemoryStore.new_version``): concurrent updates of one id, from
    any thread, process or machine, each keep their version in the history, in commit order.
    """
    store.new_version(new, vector, **_chunks_for(store, chunks))
    return new


def upsert(store, memories: list[Memory], vectors: np.ndarray, chunks: Sequence[np.ndarray] | None) -> None:
    """``store.upsert``, with each memory's further window vectors where the store keeps them (Chunks)."""
    store.upsert(memories, vectors, **_chunks_for(store, chunks))


def _chunks_for(store, chunks) -> dict:
    """The ``chunks=`` argument of a store write: given only when there are chunks and the store keeps them."""
    return {"chunks": chunks} if chunks is not None and supports(store, Chunks) else {}


def write_hybrid(
    store,
    memories: list[Memory],
    vectors: np.ndarray,
    threshold: float,
    batch_size: int,
    chunks: Sequence[np.ndarray] | None = None,
) -> None:
    """The seed's hybrid ingestion: importance >= ``threshold`` first in one upsert, then the rest in batches."""
    if not memories:
        return
    important = [n for n, m in enumerate(memories) if m.importance >= threshold]
    rest = [n for n, m in enumerate(memories) if m.importance < threshold]
    parts = ([important] if important else []) + [rest[i : i + batch_size] for i in range(0, len(rest), batch_size)]
    for part in parts:
        upsert(store, [memories[n] for n in part], vectors[part], None if chunks is None else [chunks[n] for n in part])


# ---------------------------------------------------------------------- 4-5. store and managers
class ObservePolicy(Protocol):
    """What a writer that holds memories in process (a ``MemoryManager``) brings to :meth:`WritePath.observe`.

    The memories it holds are consistency candidates beside the stored ones; those in its write
    buffer are not in the store yet; and its observation filter and buffering decide where a new
    observation goes (kept or not, written at once or later in a batch). The hooks change only
    what it holds; the write path makes the consistency decision and the store's writes.
    """

    def held(self) -> Mapping[str, Memory]:
        """Every memory held in process, by id."""

    def held_vectors(self, kind: str) -> list[tuple[Memory, np.ndarray]]:
        """The held memories of ``kind`` that a new observation is compared with, with their vectors."""

    def buffered(self, memory_id: str) -> bool:
        """Whether the memory waits in the write buffer (the store has not seen it)."""

    def repeated(self, memory: Memory, t: datetime) -> Memory:
        """An observation at ``t`` said again what ``memory`` (held or stored) says: it is accessed now; returns it."""

    def store_held(self, memory: Memory, t: datetime) -> None:
        """Write ``memory`` (held, not stored) now: its next version is about to be written over it."""

    def versioned(self, current: Memory, new: Memory, vector: np.ndarray, t: datetime) -> None:
        """``new`` (stored) is the next version of ``current``: held in its place."""

    def added(self, memory: Memory, vector: np.ndarray) -> None:
        """A new observation: kept or not, written through :meth:`WritePath.persist` at once or buffered."""


def with_resolved_dates(memory: Memory) -> Memory:
    """``memory`` with the dates its text names, resolved from its own time, in its metadata
    (:data:`~memnets.temporal.dates.DATES_KEY`), unless the caller gave that key."""
    if DATES_KEY in memory.metadata:
        return memory
    found = date_metadata(memory.content, memory.t)
    return memory.replace(metadata={**memory.metadata, **found}) if found else memory


class WritePath:
    """Steps 1-5 of every door: ``AgentMemory``'s writes and ``MemoryManager.observe``.

    Args:
        store: the memory's store.
        encoder: embeds (and chunks) texts.
        importance: the importance decision (texts, vectors) -> scores.
        config: the ``ManagerConfig`` (duplicate threshold, write-through threshold, batch size).
        managers: user -> that user's live managers (each with ``refresh(memory, vector)`` and
            ``forget(ids, reason=...)``), told of the versions this path writes; none by default.
        supersession: a :class:`~memnets.memory.supersession.Supersession` run on every memory a
            write adds or changes, inside the write's transaction; None: off.
        writers: the per-owner serialisation of the store's writes (shared with the deletion path, closed
            with the memory); default: one of its own.

    :meth:`commit`, :meth:`observe` and :meth:`update` hold the owners' write locks around the consistency
    check and the write (one step); :meth:`prepare` (encoding) runs before, outside them.
    """

    def __init__(
        self,
        store,
        encoder,
        importance,
        config,
        managers: Callable[[str], list] = lambda user: [],
        supersession=None,
        writers: Writers | None = None,
    ):
        self.store, self.encoder, self.importance, self.config = store, encoder, importance, config
        self.managers, self.supersession = managers, supersession
        self.writers = writers if writers is not None else Writers(store)

    def encode(
        self, memories: list[Memory], scored: list[bool], names: Sequence[str] | None = None
    ) -> tuple[list[Memory], np.ndarray]:
        """Check the texts, encode them ``[n, dim]`` and score the importance of those without one."""
        for memory, name in zip(memories, names or ["text"] * len(memories)):
            check_text(memory.content, name)
            check_tokens(memory.content, self.encoder, name)
        if self.config.resolve_dates:
            memories = [with_resolved_dates(m) for m in memories]
        vectors = embed(self.encoder, [m.content for m in memories])
        unscored = [n for n, done in enumerate(scored) if not done]
        if unscored:
            values = self.importance([memories[n].content for n in unscored], vectors[unscored])
            memories = list(memories)
            for n, value in zip(unscored, values):
                memories[n] = memories[n].replace(importance=float(value))
        return memories, vectors

    def prepare(
        self, memories: list[Memory], scored: list[bool], names: Sequence[str] | None = None
    ) -> tuple[list[Memory], np.ndarray, list[np.ndarray]]:
        """:meth:`encode`, and a long text's further windows (one array ``[m, dim]`` per memory)."""
        memories, vectors = self.encode(memories, scored, names)
        return memories, vectors, chunk_vectors(self.encoder, [m.content for m in memories])

    def persist(self, memories: list[Memory], vectors: np.ndarray, *, judged: bool = False) -> None:
        """Store encoded records in one upsert, with a long text's further window vectors; ``judged``: they enter
        the store now (a manager's kept observations), and the supersession step reads them in the same
        transaction. An observation is judged when it is stored, not when it is observed, so one the manager never
        keeps, or deletes from its buffer, ends no fact."""
        with self.writers.owning({m.owner for m in memories}):
            upsert(self.store, memories, vectors, chunk_vectors(self.encoder, [m.content for m in memories]))
            if judged:
                self._supersede(memories, vectors)

    def observe(
        self, memory: Memory, policy: ObservePolicy, *, scored: bool, explicit: bool, name: str = "content"
    ) -> Memory:
        """A manager's observation through steps 1-5; returned with its ``outcome``.

        The same consistency rule as :meth:`commit`, against the stored memories and those
        ``policy`` holds; where an added observation goes (kept, written, buffered) is the policy's. As in
        :meth:`commit`, the decision and the writes it makes are one transaction where the store can.
        """
        [memory], [vector] = self.encode([memory], [scored], [name])
        with self.writers.owning([memory.owner]):
            observed = self._observe(memory, vector, policy, explicit=explicit)
            if observed.outcome != "updated":  # an added one is judged when the policy stores it (persist)
                return observed
            return self._supersede([observed], [vector])[0]

    def _observe(self, memory: Memory, vector: np.ndarray, policy: ObservePolicy, *, explicit: bool) -> Memory:
        if explicit:
            match = policy.held().get(memory.id) or next(iter(self.store.get([memory.id], memory.owner)), None)
            memory = memory if match is None else restated(match, memory)
            outcome = "added" if match is None else "unchanged" if same_record(match, memory) else "updated"
        else:
            held = [(m, float(v @ vector)) for m, v in policy.held_vectors(memory.kind)]
            candidates = self._candidates(memory, vector, held, exclude=policy.held())
            outcome, match = classify(memory, candidates, self.config.duplicate_threshold)
        if outcome == "unchanged":
            buffered = policy.buffered(match.id)  # asked first: the policy's moves may write its buffer
            repeated = policy.repeated(match, memory.t)
            if not buffered:
                self.store.touch([repeated.id], repeated.owner, repeated.last_access)
            return repeated.replace(outcome="unchanged")
        if outcome == "updated":
            if policy.buffered(match.id) or not self.store.get([match.id], match.owner):
                policy.store_held(match, memory.t)  # its history needs the old version stored
            new = successor(match, memory, merge_metadata=not explicit)
            write_version(self.store, new, vector, chunk_vectors(self.encoder, [new.content])[0])
            policy.versioned(match, new, vector, memory.t)
            return new.replace(outcome="updated")
        policy.added(memory, vector)
        return memory.replace(outcome="added")

    def _candidates(
        self,
        memory: Memory,
        vector: np.ndarray,
        held: list[tuple[Memory, float]],
        exclude: Mapping | frozenset = frozenset(),
    ) -> list[tuple[Memory, float]]:
        """The memories a new text may repeat or update, with their cosine, best first: ``held`` (in process)
        and its nearest stored ones of its kind (:func:`nearest`) but those in ``exclude``."""
        stored = [(m, s) for m, s in nearest(self.store, vector, memory.owner, memory.kind) if m.id not in exclude]
        return sorted(held + stored, key=lambda c: -c[1])

    def commit(
        self,
        memories: list[Memory],
        vectors: np.ndarray,
        chunks: list[np.ndarray],
        *,
        explicit: list[bool],
        replaces: str | None = None,
    ) -> list[Memory]:
        """Write prepared records; each returned with its ``outcome``. ``replaces``: the id of the current memory
        that the one record given becomes the next version of (KeyError / ValueError naming ``replaces``).

        The near-match search and the writes it decides are one transaction of the store where it
        can (:class:`~memnets.store.AtomicWrites`), so another process's write cannot come between them.
        """
        with self.writers.owning({m.owner for m in memories}):
            replaced = (
                None if replaces is None else current_version(self.store, replaces, memories[0].owner, "replaces")
            )
            if replaced is not None and replaced.id == memories[0].id:
                raise ArgumentValueError(
                    f"add: replaces={replaces!r} is the id of the memory being added", field="replaces"
                )
            if replaced is not None:
                check_same_scope(replaced, memories[0], f"replaces={replaces!r}", "replaces")
            self._check_links(memories)
            return self._supersede(self._commit(memories, vectors, chunks, explicit, replaced), vectors)

    def _check_links(self, memories: list[Memory]) -> None:
        """ValueError naming the field where a record given whole links (``invalidated_by``, ``likely_replaced_by``)
        to no memory of its scope, in this write or stored: a link moves its target below the record in every search,
        so one to another agent's memory let a token narrowed to one agent reorder another's answers."""
        written = {(m.owner, m.id): m for m in memories}
        for memory in memories:
            for field in ("invalidated_by", "likely_replaced_by"):
                if (target := getattr(memory, field)) is None:
                    continue
                found = written.get((memory.owner, target)) or next(iter(self.store.get([target], memory.owner)), None)
                if found is None or found.id == memory.id or not same_scope(found, memory):
                    raise ArgumentValueError(
                        f"add: memory {memory.id!r}: {field}={target!r} names no other memory of its user, agent and "
                        "session",
                        field=field,
                    )

    def _supersede(self, written: list[Memory], vectors: np.ndarray) -> list[Memory]:
        """Inside a write's transaction: the supersession step, if any, on what it wrote (returned as it was)."""
        return written if self.supersession is None else self.supersession.apply(written, vectors, self.next_version)

    def _commit(self, memories, vectors, chunks, explicit: list[bool], replaces: Memory | None) -> list[Memory]:
        if replaces is not None:
            new = memories[0]
            old_vector = self.store.vectors([replaces.id], replaces.owner)[0]
            pair = [new, closed_by(replaces, new).replace(superseded_by=new.id)]  # the older version keeps no chunks
            upsert(self.store, pair, np.stack([vectors[0], old_vector]), [chunks[0], chunks[0][:0]])
            self._refresh(new, vectors[0])
            for manager in self.managers(new.owner):
                manager.forget([replaces.id], reason="superseded")
            return [new.replace(outcome="updated")]
        out: list = [None] * len(memories)  # a Memory written at once, or the id of this call's row that answers it
        versions: dict[str, list[list]] = {}  # id -> [memory, n] versions of an id new in this call, in order
        for n, memory in enumerate(memories):
            if explicit[n]:
                existing = self.store.get([memory.id], memory.owner)
                if existing and existing[0].superseded_by is None:
                    out[n] = self._keyed(existing[0], memory, vectors[n], chunks[n])
                    continue
                outcome, match = "added", None
            else:
                latest = [v[-1] for v in versions.values() if v[-1][0].kind == memory.kind]
                scores = vectors[[i for _, i in latest]] @ vectors[n] if latest else []
                pending = [(m, float(score)) for (m, _), score in zip(latest, scores)]
                outcome, match = classify(
                    memory, self._candidates(memory, vectors[n], pending), self.config.duplicate_threshold
                )
            if match is not None and match.id in versions:  # an item of this very call
                if outcome == "unchanged":
                    versions[match.id][-1][0] = match.replace(last_access=max(memory.t, match.last_access))
                else:  # it changes that item: that one becomes its history, numbered by the store
                    versions[match.id].append([successor(match, memory), n])
                out[n] = (match.id, outcome)
            elif outcome == "unchanged":
                out[n] = self._unchanged(match, memory)
            elif outcome == "updated":
                out[n] = (
                    self._backdated(match, memory, vectors[n])  # said of a time before the match held
                    if memory.valid_from < match.valid_from
                    else self._version(match, successor(match, memory), vectors[n], chunks[n])
                )
            else:
                versions[memory.id] = [[memory, n]]
                out[n] = (memory.id, "added")
        first = [v[0] for v in versions.values()]
        write_hybrid(
            self.store,
            [m for m, _ in first],
            vectors[[n for _, n in first]],
            self.config.write_through_threshold,
            self.config.batch_size,
            [chunks[n] for _, n in first],
        )
        for later in versions.values():
            for memory, n in later[1:]:
                write_version(self.store, memory, vectors[n], chunks[n])
        # an item that a later one of this call repeated or changed answers with its id's row as written
        return [item if isinstance(item, Memory) else versions[item[0]][-1][0].replace(outcome=item[1]) for item in out]

    def update(self, revision: Revision) -> Memory:
        """``AgentMemory.update``: ``revision`` written as the next version of the memory current when the owner's
        lock is held; "unchanged" when it changes nothing. A new text is checked and encoded (and its importance
        scored) first, outside the lock: its vector depends on the text alone; the supersession step, where there
        is one, judges it against the owner's older memories as it judges an added one."""
        encoded = None
        if revision.text is not None:
            probe = revision.next_of(current_version(self.store, revision.id, revision.user, "id"))
            [encoded], vectors, [chunks] = self.prepare([probe], [False])
        with self.writers.owning([revision.user]):
            current = current_version(self.store, revision.id, revision.user, "id")
            new = revision.next_of(current)
            if encoded is None or new.content == current.content:
                return self.next_version(current, new, None)
            if new != probe:  # another version came in between: the plan applied to it, with the text's scores
                new = with_resolved_dates(new) if self.config.resolve_dates else new
                encoded = new.replace(importance=encoded.importance)
            # a new text is a new statement: the decisions of the old one withdrawn, the supersession step reads it
            # as it reads an add's
            if self.supersession is not None:
                self.supersession.withdraw(current, encoded.updated_at, self.next_version)
            return self._supersede([self.next_version(current, encoded, vectors[0], chunks)], vectors)[0]

    def next_version(
        self, current: Memory, new: Memory, vector: np.ndarray | None, chunks: np.ndarray | None = None
    ) -> Memory:
        """A new version ``new`` of ``current`` (``vector`` None: the text is unchanged, its vector and chunks kept)."""
        if same_record(current, new):
            if new.ttl is not None and new.expires_at != current.expires_at:  # the same TTL again: restarted
                return self._refreshed(current).replace(outcome="unchanged")
            return current.replace(outcome="unchanged")
        if vector is None:
            vector = self.store.vectors([current.id], current.owner)[0]
            if supports(self.store, Chunks):
                chunks = self.store.chunk_vectors([current.id], current.owner)[0]
        return self._version(current, new, vector, chunks)

    def _keyed(self, existing: Memory, memory: Memory, vector: np.ndarray, chunks: np.ndarray) -> Memory:
        """An add keyed by the id of an existing memory: unchanged if it states the same, else its next version
        (of the same scope only, :func:`check_same_scope`)."""
        check_same_scope(existing, memory, f"id {memory.id!r}", "id")
        memory = restated(existing, memory)
        if same_record(existing, memory):
            return self._unchanged(existing, memory)
        if memory.valid_from < existing.valid_from:
            return self._backdated(existing, memory, vector)
        return self._version(existing, successor(existing, memory, merge_metadata=False), vector, chunks)

    def _version(self, current: Memory, new: Memory, vector: np.ndarray, chunks: np.ndarray | None) -> Memory:
        written = write_version(self.store, new, vector, chunks)
        self._refresh(written, vector)
        return written.replace(outcome="updated")

    def _backdated(self, current: Memory, memory: Memory, vector: np.ndarray) -> Memory:
        """``memory`` changes ``current`` but held from before it: kept as its older version
        (:func:`~memnets.memory.validity.backdated`; ``current`` stays as it is), in one write; "unchanged"
        when a version of the history says the same and held at its time (the transcript read again)."""
        owner = current.owner
        history = self.store.history(current.id, owner)
        start, said = memory.valid_from, normalise(memory.content)
        for version in history:  # a transcript read again: its history says this already, holding then
            held = version.valid_from <= start and (version.valid_to is None or start < version.valid_to)
            if held and normalise(version.content) == said:
                return version.replace(outcome="unchanged")
        said, cut = backdated(current, history, memory)
        older = self.store.new_version(said, vector, older=True)  # numbered by the store
        if cut:
            upsert(
                self.store, cut, self.store.vectors([v.id for v in cut], owner), None
            )  # older versions keep no chunks
        return older.replace(outcome="updated")

    def _unchanged(self, existing: Memory, memory: Memory) -> Memory:
        """The same statement again: only the last access of ``existing`` moves (to ``memory.t`` if later)."""
        when = max(memory.t, existing.last_access)
        self.store.touch([existing.id], existing.owner, when)
        return self._refreshed(existing).replace(last_access=when, outcome="unchanged")

    def _refreshed(self, memory: Memory) -> Memory:
        """``memory`` with its TTL (if any) restarted from now, in the store too: a write refreshes it, as a read may."""
        return expiry.refresh(self.store, [memory], memory.owner)[0]

    def _refresh(self, memory: Memory, vector: np.ndarray) -> None:
        for manager in self.managers(memory.owner):
            manager.refresh(memory, vector)


__all__ = [
    "ObservePolicy",
    "VERSION_SEPARATOR",
    "WritePath",
    "chunk_vectors",
    "embed",
    "nearest",
    "successor",
]
