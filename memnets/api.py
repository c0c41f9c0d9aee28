"""``memnets.open``: one memory for many users, sharing one encoder, the heads and one store.

This is the layer an agent (or a framework adapter: LangGraph, LangChain, MCP) talks to::

    import memnets

    with memnets.open("memories/") as memory:            # a folder: SQLite + FAISS, no server
        memory.add("I adopted a beagle named Rex", user="ann")
        hits = memory.search("What is Ann's dog called?", user="ann", k=3)
        manager = memory.manager("ann")                    # tiers, moves, gate, reflection, planning

What it guarantees (each tested in tests/test_api*.py):

- Scoping: every call names a ``user``; nothing of another user is read, counted or changed.
- Durability: ``add``/``add_many``/``update`` have written to the store when they return (the
  hybrid ingestion of ``add_many`` writes the important memories first, then the rest in batches,
  all before it returns; only a :class:`~memnets.memory.manager.MemoryManager` buffers).
- Identity: an add without an explicit id whose text is a near-duplicate (cosine >=
  ``duplicate_threshold``, chosen on LoCoMo, see docs/memory.md) of a memory of the same kind of
  that user refreshes that memory (last access = ``t``) and returns it. An add with the id of an
  existing memory, or ``update``, writes a new version and keeps the old one: it is re-stored under
  the id ``f"{id}~{n}"`` (n = 1, 2, ...) with ``superseded_by=id``, so search and listings skip
  it and ``history(id)`` returns it. ``add(..., replaces=old)`` stores a new memory and marks
  ``old`` (kept under its own id) ``superseded_by`` the new one.
- Deletion is final: ``delete``/``delete_all`` remove the memory and all its older versions from
  the store and the index, and from the tiers and write buffer of every live manager of that user
  in this process; managers in other processes learn it from the store's deletion ledger before
  they next write, query or close (see :meth:`MemoryManager._forget_deleted`).
- Time: aware UTC; a naive datetime is read as UTC; ``t`` defaults to now (:mod:`memnets.timeutil`).
- Bad input (an empty user or text, k < 1, an unknown filter field, a wrong type) raises
  ValueError/TypeError naming the argument, before anything is written.

Ranking: without a pack, ``search`` ranks by cosine (the store's inner product of unit vectors;
Generative Agents' hand-set recency + importance mix retrieves far worse on LoCoMo, see
docs/benchmarks.md). With a pack that has fitted scorer weights, the store returns
``fetch_factor * k`` candidates (filtered first) and the pack's LearnedScorer re-ranks them.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import NamedTuple

import numpy as np

from memnets.memory.manager import ManagerConfig, MemoryManager, default_state_path, nearest_of_kind
from memnets.memory.signals import HeuristicGate, HeuristicImportance, pack_components
from memnets.protocols import TextEncoder
from memnets.records import DERIVED_KINDS, MEMORY_KINDS, Memory
from memnets.scoring import HeuristicScorer
from memnets.store import MemoryFilter, StoreFormatError, open_store
from memnets.store.identity import bind_encoder
from memnets.timeutil import as_utc_or_now
from memnets.timeutil import now as utc_now

VERSION_SEPARATOR = "~"  # older versions of memory "x" are stored as "x~1", "x~2", ...


class SearchHit(NamedTuple):
    """One search result: the memory and its score (cosine, or the pack's learned score), higher first."""

    memory: Memory
    score: float


def open(
    location: str | os.PathLike,
    *,
    pack=None,
    key: bytes | str | None = None,
    encoder: TextEncoder | str | os.PathLike | None = None,
    **options,
) -> AgentMemory:
    """Open (or create) a memory at ``location`` for any number of users.

    Args:
        location: a folder (the embedded SQLite + FAISS store) or a ``postgresql://`` URL.
        pack: a pack folder or a loaded :class:`~memnets.pack.Pack`: its encoder, importance head,
            recall gate, scorer weights and thresholds replace the heuristics.
        key: encrypts memory text at rest (see docs/security.md).
        encoder: an encoder object (anything with ``encode(texts, kind=...)``, ``dim`` and
            ``tokenizer``) or an encoder folder; default: the pack's, else the bundled
            all-MiniLM-L6-v2. Not together with ``pack`` (the pack's heads were trained on its encoder).
        options: :class:`~memnets.memory.manager.ManagerConfig` fields (defaults of every
            ``manager(user)``; ``duplicate_threshold``, ``fetch_factor``, ``write_through_threshold``
            and ``batch_size`` also apply to ``add``/``add_many``/``search``); the rest go to the
            store (e.g. ``index="hnsw"``).
    """
    names = {f.name for f in fields(ManagerConfig)}
    settings = {name: options.pop(name) for name in list(options) if name in names}
    components: dict = {}
    if pack is not None:
        if encoder is not None:
            raise ValueError(
                "memnets.open: give pack or encoder, not both (the pack's heads and scorer were fitted to its encoder)"
            )
        if isinstance(pack, (str, os.PathLike)):
            from memnets.pack import load_pack

            pack = load_pack(pack)
        components = pack_components(pack)
        encoder = components.pop("encoder")
    else:
        encoder = load_encoder(None, encoder)
    for name in names & set(components):  # thresholds the pack chose (write-through, duplicate), unless given
        settings.setdefault(name, components.pop(name))
    config = ManagerConfig.build(**settings)
    try:
        store = open_store(location, encoder.dim, key=key, **options)
    except StoreFormatError as error:
        # vectors of another dim: open it as it is, so that the identity check names the encoder that filled it
        try:
            store = open_store(location, None, key=key, **options)
        except Exception:
            raise error from None
        if store.dim == encoder.dim:  # the format error was about something else
            store.close()
            raise
    try:
        return AgentMemory(store, encoder, config=config, owns_store=True, **components)
    except BaseException:
        store.close()
        raise


def load_encoder(pack=None, encoder: TextEncoder | str | os.PathLike | None = None) -> TextEncoder:
    """The encoder of ``pack`` (a folder or a loaded Pack), else ``encoder`` (an object or a folder),
    else the bundled all-MiniLM-L6-v2."""
    if pack is not None:
        if encoder is not None:
            raise ValueError("give pack or encoder, not both")
        from memnets.pack import load_pack

        return (load_pack(pack) if isinstance(pack, (str, os.PathLike)) else pack).encoder
    if encoder is None or isinstance(encoder, (str, os.PathLike)):
        from memnets.nn.encoder import MemoryEncoder

        return MemoryEncoder.from_pretrained(*([encoder] if encoder is not None else []))
    return encoder


def reembed(
    location: str | os.PathLike,
    *,
    pack=None,
    encoder: TextEncoder | str | os.PathLike | None = None,
    key: bytes | str | None = None,
    batch_size: int = 64,
    progress: bool | None = None,
    **options,
):
    """Move the store at ``location`` to a new encoder: re-embed every memory of every user with the
    encoder of ``pack`` (or ``encoder``, or the bundled one), then swap in one transaction.

    Resumable (a killed run carries on where it stopped), answering from the old vectors until the
    swap, and on PostgreSQL shareable by several workers at once; see :mod:`memnets.store.reembed`.
    ``options`` go to the store. Returns a :class:`~memnets.store.reembed.ReembedReport`.

    Example::

        memnets.reembed("memories/", pack="checkpoints/pack")
        memory = memnets.open("memories/", pack="checkpoints/pack")  # now accepted
    """
    from memnets.store.reembed import reembed as run

    new = load_encoder(pack, encoder)
    with open_store(location, None, key=key, **options) as store:
        return run(store, new, batch_size=batch_size, progress=progress)


class AgentMemory:
    """One memory for many users: a store, one encoder and the decisions, shared by every user.

    Build it with :func:`memnets.open`. ``encoder``, ``store`` and ``config`` are public;
    ``importance``, ``gate`` and ``scorer`` are the decisions handed to every manager.

    Args:
        store: an open :class:`~memnets.store.MemoryStore` of the encoder's dim.
        encoder: embeds texts (``encode(texts, kind="memory"|"query")`` -> [n, dim] unit rows).
        config: the defaults of every manager; also the duplicate threshold, fetch factor,
            write-through threshold and batch size of ``add``/``add_many``/``search``.
        importance, gate: the importance and recall-gate decisions (default: the heuristics).
        scorer: a re-ranker for ``search`` and the managers (a pack's LearnedScorer); None ranks
            search by cosine and gives managers Generative Agents' heuristic scorer.
        llm: the text model of the managers' reflections, summaries and plans.
        owns_store: close the store in :meth:`close`.
    """

    def __init__(
        self,
        store,
        encoder: TextEncoder,
        *,
        config: ManagerConfig | None = None,
        importance=None,
        gate=None,
        scorer=None,
        llm=None,
        owns_store: bool = False,
    ):
        self.identity = bind_encoder(store, encoder)  # a store another encoder filled: EncoderMismatchError
        if store.dim != encoder.dim:
            raise ValueError(
                f"AgentMemory: the store holds {store.dim}-d vectors but the encoder gives {encoder.dim}-d ones"
            )
        self.store = store
        self.encoder = encoder
        self.config = config or ManagerConfig()
        self.importance = importance if importance is not None else HeuristicImportance()
        self.gate = gate if gate is not None else HeuristicGate()
        self.scorer = scorer
        self.llm = llm
        self.owns_store = owns_store
        self.closed = False
        self._lock = threading.RLock()  # one writer at a time: dedup check and write are one step
        self._managers: weakref.WeakSet[MemoryManager] = weakref.WeakSet()

    # ------------------------------------------------------------------ writing
    def add(
        self,
        text_or_record: str | Memory,
        *,
        user: str,
        t: datetime | None = None,
        kind: str = "observation",
        metadata: dict | None = None,
        id: str | None = None,
        importance: float | None = None,
        agent: str | None = None,
        action: str | None = None,
        objects: Sequence[str] | None = None,
        location: str | None = None,
        replaces: str | None = None,
    ) -> Memory:
        """Store one memory of ``user`` (durable on return) and return it as stored.

        ``text_or_record``: the text (the other arguments fill the record), or a :class:`Memory`
        of this user (stored as it is; only ``replaces`` applies). ``importance`` defaults to the
        importance decision's score. See the module docstring for near-duplicates, ids that exist
        already and ``replaces``.
        """
        if replaces is not None:
            _check_id(replaces, "replaces")
        memory = self._record(
            text_or_record,
            user,
            t=t,
            kind=kind,
            metadata=metadata,
            id=id,
            importance=importance,
            agent=agent,
            action=action,
            objects=objects,
            location=location,
        )
        explicit = id is not None or isinstance(text_or_record, Memory)
        return self._add_encoded(
            [memory],
            self._encode([memory.content]),
            user,
            explicit=[explicit],
            scored=[importance is not None or isinstance(text_or_record, Memory)],
            replaces=replaces,
        )[0]

    def add_many(
        self,
        items: Iterable[str | Memory],
        *,
        user: str,
        t: datetime | None = None,
        kind: str = "observation",
        metadata: dict | None = None,
        importance: float | None = None,
        agent: str | None = None,
        action: str | None = None,
        objects: Sequence[str] | None = None,
        location: str | None = None,
        ids: Sequence[str | None] | None = None,
    ) -> list[Memory]:
        """Store many memories of ``user`` with one encoder batch; returns them in order (durable on return).

        Items are texts (the keyword arguments fill their records; ``ids``, aligned with the items,
        gives them ids, else each gets a new one) or :class:`Memory` records of this user. An item
        with an id is keyed by it, as in :meth:`add`. The seed's hybrid ingestion: the important ones
        (importance >= ``write_through_threshold``) are written first, in one transaction, then
        the rest in batches of ``batch_size``. Near-duplicates (of stored memories or of an
        earlier item of the same call) return the memory they duplicate.
        """
        if isinstance(items, (str, Memory)):
            raise TypeError(
                f"add_many: items must be a list of texts or Memory records, not a single {type(items).__name__}"
            )
        items = list(items)
        if ids is None:
            ids = [None] * len(items)
        elif isinstance(ids, str) or len(ids := list(ids)) != len(items):
            raise ValueError(f"add_many: ids must be a list with one entry (an id or None) per item, got {ids!r:.60}")
        memories = []
        for n, (item, memory_id) in enumerate(zip(items, ids)):
            if memory_id is not None and isinstance(item, Memory):
                raise ValueError(f"add_many: ids[{n}] given for a Memory record, which has its own id")
            memories.append(
                self._record(
                    item,
                    user,
                    t=t,
                    kind=kind,
                    metadata=metadata,
                    id=memory_id,
                    importance=importance,
                    agent=agent,
                    action=action,
                    objects=objects,
                    location=location,
                    where=f"add_many: items[{n}]",
                )
            )
        repeated = sorted(i for i, count in Counter(m.id for m in memories).items() if count > 1)
        if repeated:
            raise ValueError(f"add_many: ids repeated within the call: {repeated[:5]}")
        if not memories:
            return []
        records = [isinstance(item, Memory) for item in items]
        explicit = [record or memory_id is not None for record, memory_id in zip(records, ids)]
        return self._add_encoded(
            memories,
            self._encode([m.content for m in memories]),
            user,
            explicit=explicit,
            scored=[r or importance is not None for r in records],
        )

    def _add_encoded(
        self,
        memories: list[Memory],
        vectors: np.ndarray,
        user: str,
        *,
        explicit: list[bool],
        scored: list[bool],
        replaces: str | None = None,
    ) -> list[Memory]:
        """Dedup, version, score and write prepared records (all validated) in the hybrid order."""
        unscored = [n for n, done in enumerate(scored) if not done]
        if unscored:
            values = self.importance([memories[n].content for n in unscored], vectors[unscored])
            for n, value in zip(unscored, values):
                memories[n] = memories[n].replace(importance=float(value))
        with self._lock:
            self._require_open()
            if replaces is not None:
                replaced = self._current(replaces, user, "replaces")
                new = memories[0]
                if new.id == replaced.id:
                    raise ValueError(f"add: replaces={replaces!r} is the id of the memory being added")
                old_vector = self.store.vectors([replaced.id], user)[0]
                self.store.upsert([new, replaced.replace(superseded_by=new.id)], np.stack([vectors[0], old_vector]))
                self._refresh_managers(user, new, vectors[0])
                self._forget_in_managers(user, [replaced.id], reason="superseded")
                return [new]
            out: list[Memory | None] = [None] * len(memories)
            fresh: list[int] = []
            for n, memory in enumerate(memories):
                if explicit[n]:
                    existing = self.store.get([memory.id], user)
                    if existing:
                        out[n] = self._new_version(existing[0], memory, vectors[n])
                        continue
                else:
                    duplicate = self._duplicate(memory, vectors[n], memories, vectors, fresh)
                    if duplicate is not None:
                        out[n] = duplicate
                        continue
                fresh.append(n)
            self._write_hybrid([memories[n] for n in fresh], vectors[fresh])
            for n in fresh:
                out[n] = memories[n]
            # a later item that duplicated an earlier one of this call gets that one, as written
            return [memories[m] if isinstance(m, int) else m for m in out]

    def _duplicate(
        self, memory: Memory, vector: np.ndarray, batch: list[Memory], vectors: np.ndarray, fresh: list[int]
    ) -> Memory | int | None:
        """The stored memory (refreshed) or earlier item of this batch (its index) ``memory`` nearly duplicates."""
        threshold = self.config.duplicate_threshold
        if threshold is None:
            return None
        kind, user = memory.kind, memory.owner
        same = [n for n in fresh if batch[n].kind == kind]
        if same:
            scores = vectors[same] @ vector
            if scores.max() >= threshold:
                return same[int(np.argmax(scores))]
        found = nearest_of_kind(self.store, vector, user, kind)
        if found is not None and found[1] >= threshold:
            existing = found[0]
            when = max(memory.t, existing.last_access)
            self.store.touch([existing.id], user, when)
            return existing.replace(last_access=when)
        return None

    def _write_hybrid(self, memories: list[Memory], vectors: np.ndarray) -> None:
        """Important memories first in one transaction, then the rest in batches of ``batch_size``."""
        if not memories:
            return
        threshold = self.config.write_through_threshold
        important = [n for n, m in enumerate(memories) if m.importance >= threshold]
        rest = [n for n, m in enumerate(memories) if m.importance < threshold]
        if important:
            self.store.upsert([memories[n] for n in important], vectors[important])
        for start in range(0, len(rest), self.config.batch_size):
            chunk = rest[start : start + self.config.batch_size]
            self.store.upsert([memories[n] for n in chunk], vectors[chunk])

    def _new_version(self, current: Memory, new: Memory, vector: np.ndarray) -> Memory:
        """Write ``new`` under ``current``'s id and keep ``current`` as ``{id}~{n}`` superseded by it (one transaction)."""
        user = current.owner
        n = len(self.store.history(current.id, user)) + 1
        while self.store.get([f"{current.id}{VERSION_SEPARATOR}{n}"], user):
            n += 1  # an id a user chose happens to have the form: never overwrite it
        old = current.replace(id=f"{current.id}{VERSION_SEPARATOR}{n}", superseded_by=current.id)
        old_vector = self.store.vectors([current.id], user)[0]
        self.store.upsert([old, new], np.stack([old_vector, vector]))
        self._refresh_managers(user, new, vector)
        return new

    def update(
        self, id: str, text: str | None = None, *, user: str, metadata: dict | None = None, t: datetime | None = None
    ) -> Memory:
        """A new version of memory ``id`` (new text and/or metadata, at ``t``); the old one stays in its history.

        The text is re-encoded and its importance re-scored when it changes. KeyError when
        ``user`` has no current memory ``id``.
        """
        _check_user(user)
        _check_id(id, "id")
        if text is None and metadata is None:
            raise ValueError("update: give text and/or metadata to change")
        if text is not None:
            _check_text(text, "text")
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"update: metadata must be a dict, got {type(metadata).__name__}")
        when = as_utc_or_now(t, "t")
        with self._lock:
            self._require_open()
            current = self._current(id, user, "id")
            changes = {"t": when, "last_access": when}
            if metadata is not None:
                changes["metadata"] = dict(metadata)
            if text is not None and text != current.content:
                vector = self._encode([text])[0]
                importance = float(self.importance([text], vector[None, :])[0])
                changes.update(content=text, importance=importance)
            else:
                vector = self.store.vectors([id], user)[0]
            return self._new_version(current, current.replace(**changes), vector)

    # ------------------------------------------------------------------ reading
    def search(
        self, query: str, *, user: str, k: int = 5, filters: MemoryFilter | Mapping | None = None
    ) -> list[SearchHit]:
        """The ``k`` memories of ``user`` best for ``query``, best first, among those passing ``filters``.

        ``filters``: a :class:`~memnets.store.MemoryFilter` or a mapping with keys ``kind`` (a kind
        or a list), ``metadata`` (field -> value or ``{"$gt": ...}``-style operators), ``since``
        and ``until`` (a time range on ``t``). Filtering happens in the store before ranking, so
        k results come back whenever k memories match. Older versions are never returned.
        """
        return self.search_many(query, users=[user], k=k, filters=filters)[user]

    def search_many(
        self, query: str, *, users: Sequence[str], k: int = 5, filters: MemoryFilter | Mapping | None = None
    ) -> dict[str, list[SearchHit]]:
        """:meth:`search` for each of ``users``, the query encoded once: ``{user: hits}`` in the order given.

        For callers that search several users' memories with one query (the LangGraph store over a
        namespace prefix); each user's hits are exactly what ``search`` returns for that user.
        """
        if isinstance(users, str) or not isinstance(users, Sequence):
            raise TypeError(f"users must be a list of user ids, got {users!r}")
        for user in users:
            _check_user(user)
        _check_text(query, "query")
        _check_k(k)
        parsed = MemoryFilter.parse(filters)
        self._require_open()
        if not users:
            return {}
        vector = self._encode([query], kind="query")[0]
        return {user: self._search_encoded(query, vector, user, k, parsed) for user in users}

    def _search_encoded(
        self, query: str, vector: np.ndarray, user: str, k: int, parsed: MemoryFilter | None
    ) -> list[SearchHit]:
        if self.scorer is None:
            return [SearchHit(m, float(s)) for m, s in self.store.search(vector, k, user, filters=parsed)]
        candidates = self.store.search(vector, self.config.fetch_factor * k, user, filters=parsed)
        if not candidates:
            return []
        memories = [m for m, _ in candidates]
        scores = np.asarray(
            self.scorer.score(
                memories,
                query,
                utc_now(),
                query_vector=vector,
                memory_vectors=self.store.vectors([m.id for m in memories], user),
            ),
            dtype=np.float64,
        ).reshape(-1)
        order = np.argsort(-scores, kind="stable")[:k]
        return [SearchHit(memories[i], float(scores[i])) for i in order]

    def get(self, id: str, *, user: str) -> Memory | None:
        """Memory ``id`` of ``user`` (an older version too, by its own id), or None."""
        _check_user(user)
        _check_id(id, "id")
        found = self.store.get([id], user)
        return found[0] if found else None

    def history(self, id: str, *, user: str) -> list[Memory]:
        """Every version of memory ``id``: the older ones oldest first, then the current one ([] if unknown).

        Memories it replaced (``add(..., replaces=...)``) count as its older versions, with theirs.
        """
        _check_user(user)
        _check_id(id, "id")
        current = self.store.get([id], user)
        return [*self._older(id, user), *current]

    def _older(self, id: str, user: str) -> list[Memory]:
        older = []
        for version in self.store.history(id, user):
            if not version.id.startswith(f"{id}{VERSION_SEPARATOR}"):
                older.extend(self._older(version.id, user))  # a replaced memory brings its own history
            older.append(version)
        return older

    def list_memories(
        self, *, user: str, limit: int | None = 100, offset: int = 0, filters: MemoryFilter | Mapping | None = None
    ) -> list[Memory]:
        """The current memories of ``user`` passing ``filters``, by (t, id), ``limit`` from ``offset``."""
        _check_user(user)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise ValueError(f"limit must be None or an int >= 0, got {limit!r}")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        return self.store.list_memories(user, limit=limit, offset=offset, filters=MemoryFilter.parse(filters))

    def users(self) -> list[str]:
        """Every user with at least one memory, sorted."""
        return self.store.owners()

    # ------------------------------------------------------------------ forgetting
    def delete(self, id: str, *, user: str) -> bool:
        """Delete memory ``id`` of ``user`` with all its older versions, everywhere; True if anything held it.

        Gone from the store and its index, from every live manager of ``user`` in this process
        (tiers, write buffer), and, through the store's deletion ledger, from managers in other
        processes before their next write. The reflections, summaries and plans derived from it
        (directly or through one another, by their ``links``) go with it: their text may quote it.
        """
        _check_user(user)
        _check_id(id, "id")
        with self._lock:
            self._require_open()
            versions = self._versions(id, user)
            for derived in self._derived_from(versions, user):
                versions += self._versions(derived, user)
            held = self._forget_in_managers(user, versions, reason="deleted")
            removed = self.store.delete(versions, user)
            return bool(removed or held)

    def _versions(self, id: str, user: str) -> list[str]:
        """``id`` and the ids of its older versions."""
        return [id, *(m.id for m in self._older(id, user))]

    def _derived_from(self, ids: Sequence[str], user: str) -> list[str]:
        """Ids of the user's derived memories (DERIVED_KINDS) that link to one of ``ids``, directly or
        through other derived memories."""
        derived = self.store.list_memories(user, limit=None, filters=MemoryFilter(kinds=DERIVED_KINDS))
        gone, found = set(ids), []
        while new := [m.id for m in derived if m.id not in gone and gone.intersection(m.links)]:
            gone.update(new)
            found.extend(new)
        return found

    def delete_all(self, *, user: str) -> int:
        """Delete every memory of ``user`` (store, index, managers, their saved state); returns how many current ones went."""
        _check_user(user)
        with self._lock:
            self._require_open()
            for manager in self._live(user):
                manager.forget(list(manager._held()), reason="deleted_all")
            count = self.store.count(user)
            self.store.delete_owner(user)
            directory = getattr(self.store, "directory", None)
            if directory is not None:
                default_state_path(directory, user).unlink(missing_ok=True)  # it names deleted ids
            return count

    # ------------------------------------------------------------------ managers
    def manager(self, user: str, **config) -> MemoryManager:
        """A :class:`MemoryManager` of ``user`` sharing this memory's encoder, store and decisions.

        ``config``: :class:`ManagerConfig` fields changed from this memory's defaults, or
        ``events``/``state_path``/``resume``/``llm`` for the manager itself. It stays registered
        (weakly) so that ``delete`` reaches its tiers and buffer; ``close`` closes it.
        """
        _check_user(user)
        self._require_open()
        own = {name: config.pop(name) for name in ("events", "state_path", "resume", "llm") if name in config}
        own.setdefault("llm", self.llm)
        manager = MemoryManager(
            self.encoder,
            self.store,
            owner=user,
            config=ManagerConfig.build(self.config, **config),
            importance=self.importance,
            gate=self.gate,
            scorer=self.scorer if self.scorer is not None else HeuristicScorer(),
            **own,
        )
        self._managers.add(manager)
        return manager

    def _live(self, user: str) -> list[MemoryManager]:
        return [m for m in list(self._managers) if m.owner == user and not m.closed]

    def _forget_in_managers(self, user: str, ids: list[str], *, reason: str) -> bool:
        held = [manager.forget(ids, reason=reason) for manager in self._live(user)]  # every one, no short cut
        return any(held)

    def _refresh_managers(self, user: str, memory: Memory, vector: np.ndarray) -> None:
        for manager in self._live(user):
            manager.refresh(memory, vector)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the live managers (flushing their buffers), then the store. Safe to call twice."""
        with self._lock:
            if self.closed:
                return
            for manager in list(self._managers):
                manager.close()
            self.closed = True
            if self.owns_store:
                self.store.close()

    def __enter__(self) -> AgentMemory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        scorer = type(self.scorer).__name__ if self.scorer is not None else "cosine"
        return f"AgentMemory({self.store!r}, dim={self.encoder.dim}, search={scorer}, {state})"

    # ------------------------------------------------------------------ helpers
    def _require_open(self) -> None:
        if self.closed:
            raise RuntimeError("this AgentMemory is closed")

    def _encode(self, texts: list[str], kind: str = "memory") -> np.ndarray:
        return np.asarray(self.encoder.encode(texts, kind=kind), dtype=np.float32).reshape(len(texts), self.encoder.dim)

    def _current(self, id: str, user: str, name: str) -> Memory:
        found = self.store.get([id], user)
        if not found:
            raise KeyError(f"{name}={id!r}: user {user!r} has no memory with this id")
        if found[0].superseded_by is not None:
            raise ValueError(f"{name}={id!r} is an older version, superseded by {found[0].superseded_by!r}")
        return found[0]

    def _record(
        self,
        item,
        user: str,
        *,
        t,
        kind,
        metadata,
        id,
        importance,
        agent,
        action,
        objects,
        location,
        where: str = "add",
    ) -> Memory:
        """A validated record of ``user`` from a text and the keyword arguments, or a given record."""
        _check_user(user)
        if isinstance(item, Memory):
            if item.owner != user:
                raise ValueError(f"{where}: the record's owner {item.owner!r} is not user {user!r}")
            if VERSION_SEPARATOR in item.id:
                raise ValueError(f"{where}: id {item.id!r} contains {VERSION_SEPARATOR!r}, reserved for older versions")
            return item
        if not isinstance(item, str):
            raise TypeError(f"{where}: text must be a str or a Memory record, got {type(item).__name__}")
        _check_text(item, "text")
        if id is not None:
            _check_id(id, "id")
            if VERSION_SEPARATOR in id:
                raise ValueError(f"id {id!r} contains {VERSION_SEPARATOR!r}, reserved for older versions")
        if kind not in MEMORY_KINDS:
            raise ValueError(f"kind must be one of {MEMORY_KINDS}, got {kind!r}")
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
        if objects is not None and (isinstance(objects, str) or not all(isinstance(o, str) for o in objects)):
            raise TypeError(f"objects must be a list of strings, got {objects!r:.60}")
        if importance is not None and (
            isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0.0 <= importance <= 1.0
        ):
            raise ValueError(f"importance must be a number in [0, 1], got {importance!r}")
        for name, value in (("agent", agent), ("action", action), ("location", location)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {type(value).__name__}")
        when = as_utc_or_now(t, "t")
        return Memory(
            id=id if id is not None else uuid.uuid4().hex,
            owner=user,
            t=when,
            content=item,
            importance=0.0 if importance is None else float(importance),
            kind=kind,
            agent=agent,
            action=action,
            objects=tuple(objects or ()),
            location=location,
            metadata=dict(metadata or {}),
        )


def _check_user(user) -> None:
    if not isinstance(user, str):
        raise TypeError(f"user must be a str, got {type(user).__name__}")
    if not user.strip():
        raise ValueError(f"user must be a non-empty string, got {user!r}")


def _check_text(text, name: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{name} must be non-empty text, got {text!r}")


def _check_id(value, name: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{name} must be a non-empty string")


def _check_k(k) -> None:
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


__all__ = ["AgentMemory", "SearchHit", "open"]
