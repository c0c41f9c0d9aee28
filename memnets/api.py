"""``memnets.open``: one memory for many users, sharing one encoder, the heads and one store.

This is the layer an agent (or a framework adapter: LangGraph, LangChain, MCP) talks to::

    import memnets

    with memnets.open("memories/") as memory:            # a folder: SQLite + FAISS, no server
        memory.add("I adopted a beagle named Rex", user="ann")
        hits = memory.search("What is Ann's dog called?", user="ann", k=3)
        manager = memory.manager("ann")                    # tiers, moves, gate, reflection, planning

What it guarantees (tested in tests/memory/test_api*.py and the memory contract, memnets.memory.testing):

- Scoping: every call names a ``user``; nothing of another user is read, counted or changed.
- Durability: ``add``/``add_many``/``update`` have written to the store when they return (the
  hybrid ingestion of ``add_many`` writes the important memories first, then the rest in batches,
  all before it returns; only a :class:`~memnets.memory.manager.MemoryManager` buffers).
- One write path (:mod:`memnets.memory.writes`, also the manager's ``observe``; the rule and its
  measurements there): every add says what it did in ``outcome``: "unchanged" (a memory of the
  user, of its kind and scope, says this already: returned, its last access moved to ``t``),
  "updated" (a near match changes a fact of it, the add names its id, or ``update``: the new text
  is that memory's current version, the old one in its history as ``f"{id}~{n}"``,
  ``superseded_by=id``; ``add(..., replaces=old)`` makes ``old`` its history) or "added".
- Times (aware UTC; a naive datetime is read as UTC; ``t`` defaults to now): ``t`` (``created_at``)
  is when a memory was first written, kept by every version; ``updated_at`` when its current version
  was; ``valid_from``/``valid_to`` when its fact held (:mod:`memnets.memory.validity`, ``.supersession``).
- Deletion is final (no validity change): ``delete``/``delete_all`` remove the memory and its older
  versions from the store, the index and every live manager of that user; managers in other
  processes learn it from the store's deletion ledger (:meth:`MemoryManager._forget_deleted`).
- Bad input raises ValueError/TypeError (an unknown id KeyError) naming the argument in its ``field``
  (:mod:`memnets.argerrors`), before anything is written; a text that is not valid Unicode, too long or
  refused by the tokenizer raises InvalidMemoryError naming the position or the limit.

``AgentMemory`` is a facade: it checks the arguments, holds the live managers, and hands the
work to the write path (:class:`~memnets.memory.writes.WritePath`, which serialises each user's writes, never two
users': :mod:`memnets.memory.owners`), the searcher (:class:`~memnets.memory.search.Searcher`:
cosine, or a pack's re-rank, shared with the managers' RECALL; fused with the store's lexical ranking where ``search`` says,
:mod:`memnets.memory.hybrid`) and the deletion path (:class:`~memnets.memory.deletion.DeletionPath`); :mod:`memnets.memory.opening` opens its parts.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

import numpy as np

import memnets.timeutil as timeutil
from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.memory import expiry, spans
from memnets.memory.arguments import (
    aligned_ids,
    check_count,
    check_items,
    check_k,
    check_scope,
    check_unrepeated,
    check_user,
    check_users,
    check_vector,
)
from memnets.memory.deletion import DeletionPath
from memnets.memory.expiry import KEEP_TTL
from memnets.memory.explain import Explanation, explain_found
from memnets.memory.fields import MEMORY_SCOPE, STRUCTURED_FIELDS, MemoryFields
from memnets.memory.hybrid import HybridSearcher, hybrid_store
from memnets.memory.ids import check_id, check_ids
from memnets.memory.intake import new_record
from memnets.memory.manager import ManagerConfig, MemoryManager
from memnets.memory.messages import MessageOutcome, MessageWriter, is_message
from memnets.memory.opening import open_parts, reembed
from memnets.memory.owners import Writers
from memnets.memory.revision import Revision
from memnets.memory.search import Searcher, SearchHit
from memnets.memory.signals import HeuristicGate, HeuristicImportance
from memnets.memory.snapshot import GATE_DECISIONS_SHOWN, ManagerSnapshot, snapshot
from memnets.memory.supersession import Supersession
from memnets.memory.texts import check_text
from memnets.memory.validity import KEEP, as_of_filter
from memnets.memory.writes import WritePath, embed
from memnets.protocols import TextEncoder
from memnets.records import Memory
from memnets.scoring import HeuristicScorer
from memnets.store import MemoryFilter
from memnets.store.identity import bind_encoder
from memnets.timeutil import as_utc_or_now
from memnets.tracing import traced_methods


def open(
    location: str | os.PathLike,
    *,
    pack=None,
    key: bytes | str | None = None,
    encoder: TextEncoder | str | os.PathLike | None = None,
    backend: str | None = None,
    agent: str | None = None,
    session: str | None = None,
    supersession=None,
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
        backend: how a pack's or a folder's encoder computes: "torch" (exact), "onnx", "int8" / "int8_vnni" /
            "int8_vnni_ffn" (fast CPU paths; a folder's on ONNX Runtime without torch, :mod:`memnets.nn.loading`),
            "fp16"/"bf16" (GPU), "auto"; None: "torch" where torch is installed, else "onnx" (docs/serving.md).
        agent, session: the default scope of what this memory writes (``add``/``add_many`` without
            ``agent=``/``session=``); reads filter by scope only when asked (``filters``), so a new
            session still recalls the user's older ones.
        supersession: a :class:`~memnets.memory.supersession.SupersessionJudge` (a new memory ends older ones
            it replaces); "auto": the pack's change judge, else memnets' own (on ONNX Runtime when torch is not loaded); None: off.
        options: :class:`~memnets.memory.manager.ManagerConfig` fields (defaults of every ``manager(user)``;
            ``duplicate_threshold``, ``fetch_factor``, ``write_through_threshold``, ``batch_size`` and ``search``
            (hybrid or dense: :mod:`memnets.memory.hybrid`) also apply to ``add``/``add_many``/``search``); the
            rest go to the store (e.g. ``index="hnsw"``).
    """
    parts = open_parts(
        location, pack=pack, key=key, encoder=encoder, backend=backend, options=options, supersession=supersession
    )
    try:
        return AgentMemory(
            parts.store,
            parts.encoder,
            config=parts.config,
            owns_store=True,
            agent=agent,
            session=session,
            **parts.components,
        )
    except BaseException:
        parts.store.close()
        raise


@traced_methods("memnets", "add", "add_many", "add_messages", _search_users="search", results=spans.RESULT_ATTRIBUTES)
class AgentMemory:
    """One memory for many users: a store, one encoder and the decisions, shared by every user.

    Build it with :func:`memnets.open`. ``encoder``, ``store``, ``config`` and ``hybrid`` (``search`` fuses the
    store's lexical ranking) are public; ``importance``, ``gate`` and ``scorer`` are the decisions handed to every manager.

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
        agent, session, supersession: the default scope of writes and the supersession judge (see :func:`open`).
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
        supersession=None,
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
        self.scorer, self.hybrid = scorer, hybrid_store(store, self.config.search)  # hybrid: fused with the words
        self.llm = llm
        self.owns_store = owns_store
        for name, value in (("agent", agent), ("session", session)):
            if value is not None:
                check_scope(value, name)
        self.scope = {"agent": agent, "session": session}  # the default scope of writes
        self.closed = False
        self._writers = Writers(store, "AgentMemory")  # per-user write locks; closed with the memory
        self._managers: weakref.WeakSet[MemoryManager] = weakref.WeakSet()
        judge = None if supersession is None else Supersession(store, supersession)
        self._writes = WritePath(store, encoder, self.importance, self.config, self._live, judge, self._writers)
        self._messages = MessageWriter(self._writes, store, self.scope)
        self._deletion = DeletionPath(store, self._live, self._writers, self._writes.next_version)

    @property
    def encoder(self):
        """The encoder of this memory's writes and queries."""
        return self._encoder

    @property
    def supersession(self) -> Supersession | None:
        """The write path's supersession step (its ``judge``, and the likely replacements a search reads,
        :meth:`~memnets.memory.supersession.Supersession.ranked_links`), or None where it is off."""
        return self._writes.supersession

    # ------------------------------------------------------------------ writing
    def add(
        self,
        text_or_record: str | Memory | None = None,
        *,
        user: str,
        t: datetime | None = None,
        kind: str = "observation",
        metadata: dict | None = None,
        id: str | None = None,
        importance: float | None = None,
        agent: str | None = MEMORY_SCOPE,  # type: ignore[assignment]
        action: str | None = None,
        objects: Sequence[str] | None = None,
        location: str | None = None,
        replaces: str | None = None,
        session: str | None = MEMORY_SCOPE,  # type: ignore[assignment]
        ttl: timedelta | float | None = None,
        messages: Sequence[Mapping] | None = None,
        keep: str = "all",
        roles: Sequence[str] | None = None,
    ) -> Memory | list[MessageOutcome]:
        """Store one memory of ``user`` (durable on return) and return it as stored, with its ``outcome``.

        ``text_or_record``: the text (the other arguments fill the record), or a :class:`Memory` of this user
        (stored as it is; only ``replaces`` applies). ``importance`` defaults to the importance decision's
        score. ``outcome`` of the returned memory: "added", "updated" (it became the new version of an existing
        memory, whose old text is in ``history``) or "unchanged" (the user's memories said this already; that
        memory is returned). See the module docstring for the rule, ids that exist already and ``replaces``.
        ``agent``/``session`` left out are this memory's scope (:func:`open`), None is none. ``ttl`` (a timedelta or seconds,
        counted from now, not from ``t``) makes it expire (docs/memory.md, "Expiry"); a repeated statement keeps
        the stored memory's expiry, refreshed when it has a TTL. ``messages`` instead of a text: a chat
        transcript, as :meth:`add_messages` (the call to use for one: its return type is the outcomes').
        """
        fields = MemoryFields(t, kind, metadata, importance, agent, action, objects, location, session, ttl)
        if messages is not None or text_or_record is None:  # a chat transcript: add_messages
            unused = dict(text=text_or_record, id=id, replaces=replaces)
            return self._add_messages(messages, user, fields, keep, roles, unused)
        if replaces is not None:
            check_id(replaces, "replaces")
        memory = self._record(text_or_record, user, id=id, fields=fields)
        explicit = id is not None or isinstance(text_or_record, Memory)
        memories, vectors, chunks = self._writes.prepare(
            [memory], [importance is not None or isinstance(text_or_record, Memory)]
        )
        return self._writes.commit(memories, vectors, chunks, explicit=[explicit], replaces=replaces)[0]

    def add_many(
        self,
        items: Iterable[str | Memory],
        *,
        user: str,
        t: datetime | None = None,
        kind: str = "observation",
        metadata: dict | None = None,
        importance: float | None = None,
        agent: str | None = MEMORY_SCOPE,  # type: ignore[assignment]
        action: str | None = None,
        objects: Sequence[str] | None = None,
        location: str | None = None,
        ids: Sequence[str | None] | None = None,
        session: str | None = MEMORY_SCOPE,  # type: ignore[assignment]
        ttl: timedelta | float | None = None,
        keep: str = "all",
        roles: Sequence[str] | None = None,
    ) -> list[Memory] | list[MessageOutcome]:
        """Store many memories of ``user`` with one encoder batch; returns them in order (durable on return).

        Items are texts (the keyword arguments fill their records; ``ids``, aligned with the items, gives them
        ids, else each gets a new one) or :class:`Memory` records of this user (or messages, mappings: then it is
        ``add(messages=items, ...)``). An item with an id is keyed by it, as in :meth:`add`. The seed's hybrid
        ingestion: the important ones (importance >= ``write_through_threshold``) are written first, in one
        transaction, then the rest in batches of ``batch_size``. Each item gets :meth:`add`'s outcome, against
        the stored memories and the earlier items of the same call (an item that repeats an earlier one returns
        it, "unchanged"; one that changes a fact of it makes it its history, "updated").
        """
        items = check_items(items)
        fields = MemoryFields(t, kind, metadata, importance, agent, action, objects, location, session, ttl)
        if any(is_message(item) for item in items):  # a chat transcript: add_messages
            return self._add_messages(items, user, fields, keep, roles, dict(ids=ids))
        ids = aligned_ids(items, ids)
        memories = [
            self._record(item, user, id=memory_id, fields=fields, where=f"add_many: items[{n}]")
            for n, (item, memory_id) in enumerate(zip(items, ids))
        ]
        check_unrepeated(m.id for m in memories)
        if not memories:
            return []
        records = [isinstance(item, Memory) for item in items]
        explicit = [record or memory_id is not None for record, memory_id in zip(records, ids)]
        memories, vectors, chunks = self._writes.prepare(
            memories,
            [r or importance is not None for r in records],
            [f"add_many: items[{n}]" for n in range(len(items))],
        )
        return self._writes.commit(memories, vectors, chunks, explicit=explicit)

    def add_messages(
        self,
        messages: Sequence[Mapping],
        *,
        user: str,
        t: datetime | None = None,
        kind: str = "observation",
        metadata: dict | None = None,
        importance: float | None = None,
        agent: str | None = MEMORY_SCOPE,  # type: ignore[assignment]
        session: str | None = MEMORY_SCOPE,  # type: ignore[assignment]
        ttl: timedelta | float | None = None,
        keep: str = "all",
        roles: Sequence[str] | None = None,
    ) -> list[MessageOutcome]:
        """Store a chat transcript of ``user`` (durable on return): one memory per kept message, ``"{speaker}: {text}"``
        with its role and speaker in its metadata; one :class:`~memnets.memory.messages.MessageOutcome` per message, in
        order. A message is ``{"role", "content", "name"?, "time"?, "id"?}`` or a LangChain message; the other arguments
        are every message's memory's fields, as in :meth:`add`; ``keep``, ``roles``: :mod:`memnets.memory.messages`."""
        fields = MemoryFields(t, kind, metadata, importance, agent, session=session, ttl=ttl)
        return self._add_messages(messages, user, fields, keep, roles, {})

    def _add_messages(
        self, messages, user: str, fields: MemoryFields, keep, roles, unused: dict
    ) -> list[MessageOutcome]:
        """:meth:`add_messages` for every door of it; ``unused``: the caller's arguments that do not go with
        messages, and the structured view (``action``, ``objects``, ``location``), refused when given."""
        unused.update((name, getattr(fields, name)) for name in STRUCTURED_FIELDS)
        return self._messages.add(messages, user=user, fields=fields, keep=keep, roles=roles, refused=unused)

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
        valid_from: datetime | None = None,
        valid_to=KEEP,
    ) -> Memory:
        """A new version of memory ``id`` (new text and/or metadata, written at ``t``); the old one stays in its history.

        ``merge_metadata``: the given metadata updates the memory's, else (the default) replaces it. A
        changed text is re-encoded and its importance re-scored. The memory keeps its id and creation
        time ``t``; its ``updated_at`` is this call's ``t``. Returns it with ``outcome`` "updated", or
        "unchanged" (nothing written) when nothing changes. ``ttl``: left out, the expiry stays; a
        timedelta or seconds from now; None, never. ``valid_from``/``valid_to``: when the new version's
        fact holds (:mod:`memnets.memory.validity`; ``valid_to=None`` reopens it). KeyError when
        ``user`` has no current memory ``id``.
        """
        check_user(user)
        check_id(id, "id")
        expires = {} if ttl is KEEP_TTL else expiry.expiry_fields(expiry.check_ttl(self.store, ttl))
        if text is None and metadata is None and not expires and valid_from is None and valid_to is KEEP:
            raise ArgumentValueError("update: give text, metadata, ttl, valid_from or valid_to to change", field="text")
        if text is not None:
            check_text(text, "text")
        if metadata is not None and not isinstance(metadata, dict):
            raise ArgumentTypeError(f"update: metadata must be a dict, got {type(metadata).__name__}", field="metadata")
        revision = Revision(
            id, user, as_utc_or_now(t, "t"), text, metadata, merge_metadata, expires, valid_from, valid_to
        )
        self._require_open()
        return self._writes.update(revision)

    # ------------------------------------------------------------------ reading
    def search(
        self,
        query: str,
        *,
        user: str,
        k: int = 5,
        filters: MemoryFilter | Mapping | None = None,
        refresh_ttl: bool = False,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
    ) -> list[SearchHit]:
        """The ``k`` memories of ``user`` best for ``query``, best first, among those passing ``filters``.

        ``filters``: a :class:`~memnets.store.MemoryFilter` or a mapping with keys ``kind`` (a kind
        or a list), ``metadata`` (field -> value or ``{"$gt": ...}``-style operators), ``agent``
        and ``session`` (scopes), ``since`` and ``until`` (a time range on ``t``), ``$and``/``$or``
        (lists of such filters); see docs/memory.md, "Filters". Filtering happens in the store
        before ranking, so k results come back whenever k memories match. Older versions and
        expired memories are never returned. ``refresh_ttl``: as in :meth:`get`, for the hits.
        ``as_of``/``known_at``: the versions valid / written by then (:mod:`memnets.store.as_of`). Ranking: ``search`` of :func:`open`.
        """
        filters = as_of_filter(filters, as_of, known_at)
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
        namespace prefix); each user's hits are exactly what ``search`` returns for that user."""
        return self._search_users(query, users, k, filters, refresh_ttl)[1]

    def _search_users(
        self, query, users, k, filters, refresh_ttl, vectors: dict | None = None
    ) -> tuple[np.ndarray | None, dict[str, list[SearchHit]]]:
        """(the query's vector, or None for no users; :meth:`search_many`'s ``{user: hits}``); ``vectors``: as
        for :meth:`_search_encoded`."""
        check_users(users)
        check_text(query, "query")
        check_k(k)
        parsed = MemoryFilter.parse(filters)
        self._require_open()
        if not users:
            return None, {}
        vector = embed(self.encoder, [query], kind="query")[0]
        found = {user: self._search_encoded(query, vector, user, k, parsed, vectors) for user in users}
        if refresh_ttl:
            for user, hits in found.items():
                memories = expiry.refresh(self.store, [hit.memory for hit in hits], user)
                found[user] = [SearchHit(memory, hit.score) for memory, hit in zip(memories, hits)]
        return vector, found

    def search_vector(
        self,
        vector: Sequence[float] | np.ndarray,
        *,
        user: str,
        k: int = 5,
        filters: MemoryFilter | Mapping | None = None,
    ) -> list[SearchHit]:
        """:meth:`search` with the query already encoded (a ``[dim]`` vector of this memory's encoder), ranked as
        ``search`` ranks but densely (no words to look up); for frameworks that hand over an embedding (LangChain)."""
        check_user(user)
        check_k(k)
        vector = check_vector(vector, self.encoder.dim)
        parsed = MemoryFilter.parse(filters)
        self._require_open()
        return self._search_encoded("", vector, user, k, parsed)

    def _search_encoded(
        self,
        query: str,
        vector: np.ndarray,
        user: str,
        k: int,
        parsed: MemoryFilter | None,
        vectors: dict | None = None,
    ) -> list[SearchHit]:
        """The user's hits; ``vectors``, where given, gets ``{user: the hits' stored vectors [n, dim]}``, from the
        rows the search read (what :meth:`explain` takes the scores apart with, no second read)."""
        searcher = (HybridSearcher if self.hybrid else Searcher)(
            self.store, self.scorer, self.config.fetch_factor, self.supersession
        )
        hits = [SearchHit(m, s) for m, s in searcher.search(query, vector, user, k, parsed, timeutil.now())]
        if vectors is not None:
            vectors[user] = searcher.vectors_of([hit.memory for hit in hits], user)
        return hits

    def get(self, id: str, *, user: str, refresh_ttl: bool = False) -> Memory | None:
        """Memory ``id`` of ``user`` (an older version too, by its own id), or None (also once it expired).

        ``refresh_ttl``: a memory with a TTL expires ``ttl`` from now again (LangGraph's refresh on read).
        """
        check_user(user)
        check_id(id, "id")
        found = self.store.get([id], user)
        if found and refresh_ttl:
            found = expiry.refresh(self.store, found, user)
        return found[0] if found else None

    def history(self, id: str, *, user: str) -> list[Memory]:
        """Every version of memory ``id``: the older ones oldest first, then the current one ([] if unknown).

        Memories it replaced (``add(..., replaces=...)``) count as its older versions, with theirs.
        """
        check_user(user)
        check_id(id, "id")
        current = self.store.get([id], user)
        now = timeutil.now()
        return [*(m for m in self._deletion.older(id, user) if not m.expired(now)), *current]

    def list_memories(
        self,
        *,
        user: str,
        limit: int | None = 100,
        offset: int = 0,
        filters: MemoryFilter | Mapping | None = None,
        refresh_ttl: bool = False,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
    ) -> list[Memory]:
        """The current (unexpired) memories of ``user`` passing ``filters``, by (t, id), ``limit`` from ``offset``.

        ``refresh_ttl``: as in :meth:`get`, for the memories returned. ``as_of``/``known_at``: as in :meth:`search`.
        """
        check_user(user)
        if limit is not None:
            check_count(limit, "limit")
        check_count(offset, "offset")
        filters = as_of_filter(filters, as_of, known_at)
        listed = self.store.list_memories(user, limit=limit, offset=offset, filters=filters)
        return expiry.refresh(self.store, listed, user) if refresh_ttl else listed

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
        check_user(user)
        check_id(id, "id")
        removed, held = self._deletion.delete([id], user, reason="deleted")
        return bool(removed or held)

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
                check_scope(value, name)
        if user is None and agent is None and session is None:
            raise ValueError("delete_all: give user, agent and/or session (the scope to delete)")
        if agent is None and session is None:
            check_user(user)
        self._require_open()
        if agent is not None or session is not None:
            return self._deletion.delete_scope(user, agent, session)
        return self._deletion.erase(user)

    def sweep_expired(self) -> int:
        """Delete for good every memory that has expired (of every user); returns how many rows went.

        Expired memories are already invisible to every read; the sweep removes them through the path of
        :meth:`delete`. The LangGraph store runs it on a timer (``TTLConfig.sweep_interval_minutes``);
        otherwise call it from a job of your own.
        """
        self._require_open()
        return self._deletion.sweep_expired()

    # ------------------------------------------------------------------ managers
    def manager(self, user: str, **config) -> MemoryManager:
        """A :class:`MemoryManager` of ``user`` sharing this memory's encoder, store and decisions.

        ``config``: :class:`ManagerConfig` fields changed from this memory's defaults, or
        ``events``/``state_path``/``resume``/``llm`` for the manager itself. It stays registered
        (weakly) so that ``delete`` reaches its tiers and buffer; ``close`` closes it.
        """
        check_user(user)
        self._require_open()
        own = {name: config.pop(name) for name in ("events", "state_path", "resume", "llm") if name in config}
        own.update(llm=own.get("llm", self.llm), supersession=self.supersession)
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

    # ------------------------------------------------------------------ for servers and inspectors
    def get_many(self, ids: Sequence[str], *, user: str, include_expired: bool = False) -> list[Memory]:
        """The memories of ``user`` among ``ids`` (older versions too, by their own ids; unknown ids left out, and
        expired ones unless ``include_expired``: an expired memory holds its id until the sweep), in one store
        read: e.g. a server checking a token's scope over every row that holds an id."""
        check_user(user)
        ids = check_ids(ids)
        self._require_open()
        return self.store.get(ids, user, include_expired=include_expired) if ids else []

    def explain(
        self,
        query: str,
        *,
        users: Sequence[str],
        k: int = 5,
        filters: MemoryFilter | Mapping | None = None,
        refresh_ttl: bool = False,
    ) -> Explanation:
        """:meth:`search_many` with each hit's score taken apart (relevance, recency, importance and
        the learned score: :mod:`memnets.memory.explain`), the query encoded once for both."""
        vectors: dict[str, np.ndarray] = {}  # the hits' stored vectors, as the search read them
        vector, found = self._search_users(query, users, k, filters, refresh_ttl, vectors)
        return explain_found(found, vector, vectors, self.scorer)

    def manager_snapshot(
        self, manager: MemoryManager, *, gate_decisions: int = GATE_DECISIONS_SHOWN
    ) -> ManagerSnapshot:
        """What ``manager`` (one of this memory's, from :meth:`manager`) holds in each tier, its recall
        gate's last ``gate_decisions`` decisions and its move counts, as a copy."""
        if manager not in self._managers:
            raise ValueError(f"manager_snapshot: {manager!r} is not a manager of this memory (see manager(user))")
        return snapshot(manager, gate_decisions)

    def ping(self) -> None:
        """Return once the store answers a query; raise its error otherwise (a readiness probe)."""
        self._require_open()
        self.store.count("memnets-ping")

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the live managers (flushing their buffers), then the store, once the writes under way are done
        (new ones are refused). Safe to call twice."""
        if not self._writers.close():
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
        scorer = (type(self.scorer).__name__ if self.scorer is not None else "cosine") + "+lexical" * self.hybrid
        return f"AgentMemory({self.store!r}, dim={self.encoder.dim}, search={scorer}, {state})"

    # ------------------------------------------------------------------ helpers
    def _require_open(self) -> None:
        if self.closed:
            raise RuntimeError("this AgentMemory is closed")

    def _record(self, item, user: str, *, id, fields: MemoryFields, where: str = "add") -> Memory:
        """A record of ``user`` from a text and its fields (the record validates them), or a given record
        (:func:`~memnets.memory.intake.new_record`); ``agent``/``session`` left out are this memory's scope."""
        check_user(user)
        if id is not None and isinstance(item, str):
            check_id(id, "id")
        return new_record(item, user, where, self.store, id=id, fields=fields.scoped(self.scope))


__all__ = ["AgentMemory", "SearchHit", "open", "reembed"]
