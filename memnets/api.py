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
- One write path (:mod:`memnets.memory.writes`, also the manager's ``observe``): every add says
  what it did in ``outcome``. An add without an explicit id whose text says what one of that
  user's memories of its kind says (equal after normalisation, or a near match - cosine >=
  ``duplicate_threshold`` - by the same speaker with the same numbers, dates, times, names and
  negations) is "unchanged": that memory is returned, its last access moved to ``t``. A near match
  that changes one of those facts is "updated": the new text becomes that memory's current
  version (same id, creation time kept, metadata merged), the old one stays in its history.
  Anything else is "added". An add with the id of an existing memory, or ``update``, writes a new
  version ("unchanged" when nothing differs) and keeps the old one: it is re-stored under the id
  ``f"{id}~{n}"`` (n = 1, 2, ...) with ``superseded_by=id``, so search and listings skip it and
  ``history(id)`` returns it. ``add(..., replaces=old)`` stores a new memory and marks ``old``
  (kept under its own id) ``superseded_by`` the new one ("updated").
- Times: ``t`` (``created_at``) is when a memory was first written and stays with every version,
  so listings keep creation order; ``updated_at`` is when its current version was written.
- Deletion is final: ``delete``/``delete_all`` remove the memory and all its older versions from
  the store and the index, and from the tiers and write buffer of every live manager of that user
  in this process; managers in other processes learn it from the store's deletion ledger before
  they next write, query or close (see :meth:`MemoryManager._forget_deleted`).
- Time: aware UTC; a naive datetime is read as UTC; ``t`` defaults to now (:mod:`memnets.timeutil`).
- Bad input (an empty user or text, k < 1, an unknown filter field, a wrong type) raises
  ValueError/TypeError naming the argument, before anything is written; a text (or query) that is
  not valid Unicode, longer than ``MAX_TEXT_CHARS`` or refused by the encoder's tokenizer raises
  InvalidMemoryError naming the position or the limit.

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
from datetime import datetime, timedelta
from typing import NamedTuple

import numpy as np

import memnets.timeutil as timeutil
from memnets.memory.manager import ManagerConfig, MemoryManager, default_state_path, legacy_state_path
from memnets.memory.signals import HeuristicGate, HeuristicImportance, pack_components
from memnets.memory.writes import VERSION_SEPARATOR, WritePath, check_new_id, check_text, embed, successor
from memnets.protocols import TextEncoder
from memnets.records import DERIVED_KINDS, Memory
from memnets.scoring import HeuristicScorer
from memnets.store import Expiry, MemoryFilter, StoreFormatError, open_store, supports
from memnets.store.identity import bind_encoder
from memnets.timeutil import as_utc_or_now, ttl_seconds
from memnets.timeutil import now as utc_now


class _KeepTTL:
    """The default of ``update(ttl=...)``: leave the memory's expiry as it is."""

    def __repr__(self) -> str:
        return "KEEP_TTL"


KEEP_TTL = _KeepTTL()


# tries of one update when other writers keep changing the memory while it is encoded (each try
# re-reads the current version; a retry is rare, so a few are plenty)
UPDATE_ATTEMPTS = 5


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
    backend: str = "torch",
    agent: str | None = None,
    session: str | None = None,
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
        backend: how a pack's or a folder's encoder computes (``MemoryEncoder.from_pretrained``):
            "torch" (exact), "onnx", "int8" (the fast CPU path, the ``[onnx]`` extra), "fp16"/"bf16" (GPU).
        agent, session: the default scope of what this memory writes (``add``/``add_many`` without
            ``agent=``/``session=``); reads filter by scope only when asked (``filters``), so a new
            session still recalls the user's older ones.
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

            pack = load_pack(pack, backend=backend)
        components = pack_components(pack)
        encoder = components.pop("encoder")
    elif encoder is None or isinstance(encoder, (str, os.PathLike)):
        from memnets.nn.encoder import MemoryEncoder

        encoder = MemoryEncoder.from_pretrained(*([encoder] if encoder is not None else []), backend=backend)
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
        return AgentMemory(store, encoder, config=config, owns_store=True, agent=agent, session=session, **components)
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
        agent, session: the default scope of writes (see :func:`open`).
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
        agent: str | None = None,
        session: str | None = None,
    ):
        self.identity = bind_encoder(store, encoder)  # a store another encoder filled: EncoderMismatchError
        if store.dim != encoder.dim:
            raise ValueError(
                f"AgentMemory: the store holds {store.dim}-d vectors but the encoder gives {encoder.dim}-d ones"
            )
        self.store = store
        self._encoder = encoder
        self.config = config or ManagerConfig()
        self.importance = importance if importance is not None else HeuristicImportance()
        self.gate = gate if gate is not None else HeuristicGate()
        self.scorer = scorer
        self.llm = llm
        self.owns_store = owns_store
        for name, value in (("agent", agent), ("session", session)):
            if value is not None:
                _check_id(value, name)
        self.scope = {"agent": agent, "session": session}  # the default scope of writes
        self.closed = False
        self._lock = threading.RLock()  # one writer at a time: dedup check and write are one step
        self._managers: weakref.WeakSet[MemoryManager] = weakref.WeakSet()
        self._writes = WritePath(store, encoder, self.importance, self.config, self._live)

    @property
    def encoder(self):
        """The encoder of this memory's writes and queries."""
        return self._encoder

    @encoder.setter
    def encoder(self, encoder) -> None:
        """Replace it with a wrapper of the same model (the server's BatchingEncoder): the write path
        encodes with it too, and so do the managers opened after."""
        if getattr(encoder, "dim", None) != self.store.dim:
            raise ValueError(
                f"encoder: the store holds {self.store.dim}-d vectors but this encoder gives "
                f"{getattr(encoder, 'dim', None)}-d ones"
            )
        self._encoder = encoder
        self._writes.encoder = encoder

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
        session: str | None = None,
        ttl: timedelta | float | None = None,
    ) -> Memory:
        """Store one memory of ``user`` (durable on return) and return it as stored, with its ``outcome``.

        ``text_or_record``: the text (the other arguments fill the record), or a :class:`Memory`
        of this user (stored as it is; only ``replaces`` applies). ``importance`` defaults to the
        importance decision's score. ``outcome`` of the returned memory: "added", "updated" (it
        became the new version of an existing memory, whose old text is in ``history``) or
        "unchanged" (the user's memories said this already; that memory is returned). See the
        module docstring for the rule, ids that exist already and ``replaces``. ``agent``/``session``
        default to this memory's scope (:func:`open`). ``ttl`` (a timedelta or seconds, counted from
        now, not from ``t``) makes it expire (docs/memory.md, "Expiry"); a repeated statement keeps
        the stored memory's expiry, refreshed when it has a TTL.
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
            session=session,
            ttl=ttl,
        )
        explicit = id is not None or isinstance(text_or_record, Memory)
        memories, vectors, chunks = self._writes.prepare(
            [memory], [importance is not None or isinstance(text_or_record, Memory)]
        )
        with self._lock:
            self._require_open()
            replaced = None
            if replaces is not None:
                replaced = self._current(replaces, user, "replaces")
                if replaced.id == memories[0].id:
                    raise ValueError(f"add: replaces={replaces!r} is the id of the memory being added")
            return self._writes.commit(memories, vectors, chunks, explicit=[explicit], replaces=replaced)[0]

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
        session: str | None = None,
        ttl: timedelta | float | None = None,
    ) -> list[Memory]:
        """Store many memories of ``user`` with one encoder batch; returns them in order (durable on return).

        Items are texts (the keyword arguments fill their records; ``ids``, aligned with the items,
        gives them ids, else each gets a new one) or :class:`Memory` records of this user. An item
        with an id is keyed by it, as in :meth:`add`. The seed's hybrid ingestion: the important ones
        (importance >= ``write_through_threshold``) are written first, in one transaction, then
        the rest in batches of ``batch_size``. Each item gets :meth:`add`'s outcome, against the
        stored memories and the earlier items of the same call (an item that repeats an earlier
        one returns it, "unchanged"; one that changes a fact of it makes it its history, "updated").
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
                    session=session,
                    ttl=ttl,
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
        memories, vectors, chunks = self._writes.prepare(
            memories,
            [r or importance is not None for r in records],
            [f"add_many: items[{n}]" for n in range(len(items))],
        )
        with self._lock:
            self._require_open()
            return self._writes.commit(memories, vectors, chunks, explicit=explicit)

    def update(
        self,
        id: str,
        text: str | None = None,
        *,
        user: str,
        metadata: dict | None = None,
        merge_metadata: bool = False,
        t: datetime | None = None,
        ttl=KEEP_TTL,
    ) -> Memory:
        """A new version of memory ``id`` (new text and/or metadata, written at ``t``); the old one stays in its history.

        ``merge_metadata``: the given metadata updates the memory's (keys not given are kept);
        else (the default) it replaces it. The text is re-encoded and its importance re-scored
        when it changes. The memory keeps its id and creation time ``t`` (listings stay in
        creation order); its ``updated_at`` is this call's ``t``. Returns the memory with
        ``outcome`` "updated", or "unchanged" (nothing written) when text and metadata are the
        same as now. ``ttl``: left out, the expiry stays as it was; a timedelta or seconds, it
        expires that long from now; None, it never expires. KeyError when ``user`` has no current
        memory ``id``.
        """
        _check_user(user)
        _check_id(id, "id")
        expiry = {} if ttl is KEEP_TTL else _expiry(self._ttl(ttl))
        if text is None and metadata is None and not expiry:
            raise ValueError("update: give text and/or metadata (or ttl) to change")
        if text is not None:
            check_text(text, "text")
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"update: metadata must be a dict, got {type(metadata).__name__}")
        when = as_utc_or_now(t, "t")
        for _ in range(UPDATE_ATTEMPTS):  # encode outside the lock; build on what is current when writing
            with self._lock:
                self._require_open()
                current = self._current(id, user, "id")
            content = text if text is not None else current.content
            given = current.replace(
                content=content, t=when, metadata=dict(metadata) if metadata is not None else {}, **expiry
            )
            new = successor(current, given, merge_metadata=metadata is None or merge_metadata)
            vector = chunks = None
            if content != current.content:
                [new], vectors, [chunks] = self._writes.prepare([new], [False])
                vector = vectors[0]
            with self._lock:
                self._require_open()
                if self._current(id, user, "id") == current:
                    return self._writes.update(current, new, vector, chunks)
            # another writer changed the memory while this one was encoded: redo on top of its version
        raise RuntimeError(
            f"update: memory {id!r} of user {user!r} changed {UPDATE_ATTEMPTS} times while this update was "
            "encoded; nothing was written"
        )

    # ------------------------------------------------------------------ reading
    def search(
        self,
        query: str,
        *,
        user: str,
        k: int = 5,
        filters: MemoryFilter | Mapping | None = None,
        refresh_ttl: bool = False,
    ) -> list[SearchHit]:
        """The ``k`` memories of ``user`` best for ``query``, best first, among those passing ``filters``.

        ``filters``: a :class:`~memnets.store.MemoryFilter` or a mapping with keys ``kind`` (a kind
        or a list), ``metadata`` (field -> value or ``{"$gt": ...}``-style operators), ``agent``
        and ``session`` (scopes), ``since`` and ``until`` (a time range on ``t``), ``$and``/``$or``
        (lists of such filters); see docs/memory.md, "Filters". Filtering happens in the store
        before ranking, so k results come back whenever k memories match. Older versions and
        expired memories are never returned. ``refresh_ttl``: as in :meth:`get`, for the hits.
        """
        return self.search_many(query, users=[user], k=k, filters=filters, refresh_ttl=refresh_ttl)[user]

    def search_many(
        self,
        query: str,
        *,
        users: Sequence[str],
        k: int = 5,
        filters: MemoryFilter | Mapping | None = None,
        refresh_ttl: bool = False,
    ) -> dict[str, list[SearchHit]]:
        """:meth:`search` for each of ``users``, the query encoded once: ``{user: hits}`` in the order given.

        For callers that search several users' memories with one query (the LangGraph store over a
        namespace prefix); each user's hits are exactly what ``search`` returns for that user.
        """
        if isinstance(users, str) or not isinstance(users, Sequence):
            raise TypeError(f"users must be a list of user ids, got {users!r}")
        for user in users:
            _check_user(user)
        check_text(query, "query")
        _check_k(k)
        parsed = MemoryFilter.parse(filters)
        self._require_open()
        if not users:
            return {}
        vector = embed(self.encoder, [query], kind="query")[0]
        found = {user: self._search_encoded(query, vector, user, k, parsed) for user in users}
        if refresh_ttl:
            for user, hits in found.items():
                memories = self._refresh_ttl([hit.memory for hit in hits], user)
                found[user] = [SearchHit(memory, hit.score) for memory, hit in zip(memories, hits)]
        return found

    def search_vector(
        self,
        vector: Sequence[float] | np.ndarray,
        *,
        user: str,
        k: int = 5,
        filters: MemoryFilter | Mapping | None = None,
    ) -> list[SearchHit]:
        """:meth:`search` with the query already encoded: ``vector`` is a ``[dim]`` query vector of
        this memory's encoder (``encoder.encode([q], kind="query")[0]``), ranked exactly as
        ``search`` ranks (the store's cosine, or a pack's scorer, which needs no query text once the
        vector is given). For framework calls that hand over an embedding (LangChain's ``*_by_vector``).
        """
        _check_user(user)
        _check_k(k)
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vector.shape != (self.encoder.dim,) or not np.isfinite(vector).all():
            raise ValueError(f"vector must be {self.encoder.dim} finite numbers, got shape {vector.shape}")
        parsed = MemoryFilter.parse(filters)
        self._require_open()
        return self._search_encoded("", vector, user, k, parsed)

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

    def get(self, id: str, *, user: str, refresh_ttl: bool = False) -> Memory | None:
        """Memory ``id`` of ``user`` (an older version too, by its own id), or None (also once it expired).

        ``refresh_ttl``: a memory with a TTL expires ``ttl`` from now again (LangGraph's refresh on read).
        """
        _check_user(user)
        _check_id(id, "id")
        found = self.store.get([id], user)
        if found and refresh_ttl:
            found = self._refresh_ttl(found, user)
        return found[0] if found else None

    def _ttl(self, ttl) -> float | None:
        """A ttl argument in seconds (None: no expiry); an error naming it if bad or the store cannot expire."""
        seconds = ttl_seconds(ttl, "ttl")
        if seconds is not None and not supports(self.store, Expiry):
            raise ValueError(f"ttl: {type(self.store).__name__} does not support expiry (supports_expiry)")
        return seconds

    def _refresh_ttl(self, memories: list[Memory], user: str) -> list[Memory]:
        """The memories with a TTL, their expiry moved to now + ttl in the store; returned as refreshed."""
        with_ttl = [m for m in memories if m.ttl is not None]
        if not with_ttl or not supports(self.store, Expiry):
            return memories
        when = timeutil.now()
        self.store.refresh_expiry([m.id for m in with_ttl], user, when)
        return [m if m.ttl is None else m.replace(expires_at=when + timedelta(seconds=m.ttl)) for m in memories]

    def history(self, id: str, *, user: str) -> list[Memory]:
        """Every version of memory ``id``: the older ones oldest first, then the current one ([] if unknown).

        Memories it replaced (``add(..., replaces=...)``) count as its older versions, with theirs.
        """
        _check_user(user)
        _check_id(id, "id")
        current = self.store.get([id], user)
        now = timeutil.now()
        return [*(m for m in self._older(id, user) if not m.expired(now)), *current]

    def _older(self, id: str, user: str) -> list[Memory]:
        older = []
        for version in self.store.history(id, user):
            if not version.id.startswith(f"{id}{VERSION_SEPARATOR}"):
                older.extend(self._older(version.id, user))  # a replaced memory brings its own history
            older.append(version)
        return older

    def list_memories(
        self,
        *,
        user: str,
        limit: int | None = 100,
        offset: int = 0,
        filters: MemoryFilter | Mapping | None = None,
        refresh_ttl: bool = False,
    ) -> list[Memory]:
        """The current (unexpired) memories of ``user`` passing ``filters``, by (t, id), ``limit`` from ``offset``.

        ``refresh_ttl``: as in :meth:`get`, for the memories returned.
        """
        _check_user(user)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise ValueError(f"limit must be None or an int >= 0, got {limit!r}")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        listed = self.store.list_memories(user, limit=limit, offset=offset, filters=MemoryFilter.parse(filters))
        return self._refresh_ttl(listed, user) if refresh_ttl else listed

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
        removed, held = self._delete([id], user, reason="deleted")
        return bool(removed or held)

    def _delete(
        self, ids: Sequence[str], user: str, *, reason: str, expired_at: datetime | None = None
    ) -> tuple[int, bool]:
        """The one deletion path (delete, delete_all by scope, the expiry sweep): these memories of
        ``user``, their older versions and the memories derived from them, out of the store and every
        live manager; returns how many rows the store deleted and whether a manager held any.
        ``expired_at`` (the sweep, one id): only if that memory is still expired, checked by the store."""
        with self._lock:
            self._require_open()
            versions = [version for id in ids for version in self._versions(id, user)]
            for derived in self._derived_from(versions, user):
                versions += self._versions(derived, user)
            if expired_at is not None:
                deleted = self.store.delete_expired(ids[0], user, expired_at, with_ids=versions)
                return deleted, bool(deleted) and self._forget_in_managers(user, versions, reason=reason)
            held = self._forget_in_managers(user, versions, reason=reason)
            return self.store.delete(versions, user), held

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

    def delete_all(self, *, user: str | None = None, agent: str | None = None, session: str | None = None) -> int:
        """Delete every memory of a scope for good; returns how many current memories went.

        ``user`` alone: everything of that user (store, index, ledger rows naming them, every live
        manager, their saved state): erasure, see docs/security.md. With ``agent`` and/or
        ``session``: the memories of that scope (of ``user`` only, when given, else of every user),
        with their older versions and derived memories, through the path of :meth:`delete`. At
        least one of the three is required: there is no "delete everything" by omission.
        """
        for name, value in (("user", user), ("agent", agent), ("session", session)):
            if value is not None:
                _check_id(value, name)
        if user is None and agent is None and session is None:
            raise ValueError("delete_all: give user, agent and/or session (the scope to delete)")
        if agent is not None or session is not None:
            scope = MemoryFilter(agent=agent, session=session)
            with self._lock:
                self._require_open()
                count = 0
                for owner in [user] if user is not None else self.store.owners():
                    ids = [m.id for m in self.store.list_memories(owner, limit=None, filters=scope)]
                    if ids:
                        count += len(ids)
                        self._delete(ids, owner, reason="deleted_all")
                return count
        _check_user(user)
        with self._lock:
            self._require_open()
            for manager in self._live(user):
                manager.forget(list(manager._held()), reason="deleted_all")
            count = self.store.count(user)
            self.store.delete_owner(user)
            directory = getattr(self.store, "directory", None)
            if directory is not None:  # they name deleted ids (the managers closed later write none)
                default_state_path(directory, user).unlink(missing_ok=True)
                legacy_state_path(directory, user).unlink(missing_ok=True)
            return count

    def sweep_expired(self) -> int:
        """Delete for good every memory that has expired (of every user); returns how many rows went.

        Expired memories are already invisible to every read; the sweep removes them through the
        path of :meth:`delete` (older versions and derived memories with them, the deletion ledger
        for other processes, live managers). The LangGraph store runs it on a timer when its
        ``TTLConfig`` has a ``sweep_interval_minutes``; otherwise call it from a job of your own.
        """
        with self._lock:
            self._require_open()
            if not supports(self.store, Expiry):
                return 0  # no memory of such a store has a TTL (add refuses one)
            now = timeutil.now()  # a memory put again or refreshed after this listing is kept (delete_expired)
            return sum(
                self._delete([memory_id], owner, reason="expired", expired_at=now)[0]
                for owner, memory_id in self.store.expired(now)
            )

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
        session=None,
        ttl=None,
        where: str = "add",
    ) -> Memory:
        """A record of ``user`` from a text and the keyword arguments (the record validates them), or a given record."""
        _check_user(user)
        if isinstance(item, Memory):
            if item.owner != user:
                raise ValueError(f"{where}: the record's owner {item.owner!r} is not user {user!r}")
            check_new_id(item.id, where)
            return item
        if not isinstance(item, str):
            raise TypeError(f"{where}: text must be a str or a Memory record, got {type(item).__name__}")
        if id is not None:
            _check_id(id, "id")
            check_new_id(id, where)
        return Memory(
            id=id if id is not None else uuid.uuid4().hex,
            owner=user,
            t=as_utc_or_now(t, "t"),
            content=item,
            importance=0.0 if importance is None else importance,
            kind=kind,
            agent=agent if agent is not None else self.scope["agent"],
            action=action,
            objects=() if objects is None else objects,
            location=location,
            metadata={} if metadata is None else (dict(metadata) if isinstance(metadata, dict) else metadata),
            session=session if session is not None else self.scope["session"],
            **_expiry(self._ttl(ttl)),
        )


def _expiry(seconds: float | None) -> dict:
    """The ``expires_at``/``ttl`` fields of a record whose time to live (seconds, or None) starts now."""
    if seconds is None:
        return {"expires_at": None, "ttl": None}
    return {"expires_at": timeutil.now() + timedelta(seconds=seconds), "ttl": seconds}


def _check_user(user) -> None:
    if not isinstance(user, str):
        raise TypeError(f"user must be a str, got {type(user).__name__}")
    if not user.strip():
        raise ValueError(f"user must be a non-empty string, got {user!r}")


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
