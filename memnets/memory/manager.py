"""The memory manager: three tiers, four moves, and the seed's management loop.

Tiers (MemGPT's hierarchy, with Generative Agents' scoring):

- context: the messages the LLM sees, bounded by a token budget counted with the encoder's tokenizer;
- working memory: memories at hand, bounded by a capacity in memory units;
- archive: a :class:`~memnets.store.MemoryStore` (the embedded SQLite + FAISS
  :class:`~memnets.store.archive.Archive`, or PostgreSQL), persistent and unbounded; several
  managers (one per user, from ``memnets.open(...).manager(user)``) share one store and encoder.

Moves, each logged as an :class:`~memnets.memory.events.Event`:

- RETAIN (context -> working): context overflow spills the least recent messages;
- BURY (working -> archive, moved out): working-memory overflow buries the least important;
- EMIT (working -> archive, a copy persisted; the memory stays in working memory);
- RECALL (archive -> working, by query): when the recall gate says the query needs it.

Writes: every kept observation reaches the archive. Important ones (importance >= the
write-through threshold) are written at once; the rest wait in a buffer written in batches
(and before every archive search and every bury, so nothing buried or searched for is missing).
Observations below the keep threshold are not kept: they live in the context only and are dropped
when they leave it.

Reading for a query (:meth:`MemoryManager.context_for`): the gate looks at the query and the
context; if it says so, the archive is searched and the best memories (scored by the
:class:`~memnets.scoring.Scorer`, diversified with MMR) are recalled into working memory; then the
top ``k`` of working memory, by the same scoring, join the context's messages in a
:class:`ContextView` - what the LLM is shown.

Forgetting is final: a memory deleted through ``AgentMemory`` leaves every live manager of its user
at once (:meth:`MemoryManager.forget`); one deleted any other way (the store directly, another
process) is found in the store's deletion ledger before the manager's next write, query or close,
so it is never written back, shown or restored (:meth:`MemoryManager._forget_deleted`).

Settings are one :class:`ManagerConfig`; times are aware UTC, ``t``/``now`` default to now.

Without a pack, everything runs on heuristics (:class:`~memnets.memory.signals.HeuristicImportance`,
:class:`~memnets.memory.signals.HeuristicGate`, ``HeuristicScorer``); ``from_pretrained`` swaps in
the trained encoder, heads and scorer weights of a pack.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

import numpy as np

import memnets.timeutil as timeutil
from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.llm import LLM, ExtractiveLLM
from memnets.memory import compression
from memnets.memory.config import DUPLICATE_THRESHOLD, ManagerConfig
from memnets.memory.events import EventLog, Move
from memnets.memory.ids import check_new_id
from memnets.memory.mmr import mmr_current_first
from memnets.memory.opening import memory_components
from memnets.memory.planning import Goal, Plan, Planner
from memnets.memory.reflection import Reflector
from memnets.memory.search import Searcher, score
from memnets.memory.signals import Gate, HeuristicGate, HeuristicImportance, Importance, keeps
from memnets.memory.state import STATE_VERSION, default_state_path, legacy_state_path, read_state, write_state
from memnets.memory.tiers import ContextView, ContextWindow, Entry, WorkingMemory, refreshed
from memnets.memory.writes import WritePath, embed
from memnets.protocols import TextEncoder
from memnets.records import Memory
from memnets.scoring import HeuristicScorer, min_max
from memnets.store.identity import bind_encoder
from memnets.store.protocol import DeletionLedger, LocalState, supports
from memnets.timeutil import as_utc_or_now

logger = logging.getLogger(__name__)


def _positive_k(k) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ArgumentValueError(f"k must be an int >= 1, got {k!r}", field="k")
    return k


class MemoryManager:
    """Context, working memory and archive for one owner, with the four moves and their policies.

    Args:
        encoder: a :class:`~memnets.protocols.TextEncoder`, e.g. a MemoryEncoder (embeds texts; its tokenizer counts tokens).
        store: an open :class:`~memnets.store.MemoryStore` of the encoder's dim (the archive tier).
        owner: whose memories these are; every archive read and write is scoped to it.
        config: a :class:`ManagerConfig`; ``**settings`` change single fields of it (or of the defaults).
        importance, gate, scorer: the pluggable decisions (defaults: the heuristics).
        llm: writes reflections, summaries and plans (default: :class:`~memnets.llm.ExtractiveLLM`).
        events: an :class:`EventLog`, or a path for a JSONL event file, or None (in memory only).
        state_path: where :meth:`close` saves the tiers and :meth:`__init__` restores them from
            (default: ``manager-<owner>.json`` in the archive's directory; None with ``resume=False``).
        resume: restore the tiers saved at the last :meth:`close`, if any.
        owns_store: close the store in :meth:`close` (set by the constructors that open it).
        supersession: the write path's supersession step (:mod:`memnets.memory.supersession`), or None.

    Several managers (one per user) may share one encoder and one store: :meth:`memnets.open`
    builds them with ``AgentMemory.manager(user)``.
    """

    def __init__(
        self,
        encoder: TextEncoder,
        store,
        *,
        owner: str = "agent",
        config: ManagerConfig | None = None,
        importance: Importance | None = None,
        gate: Gate | None = None,
        scorer=None,
        llm: LLM | None = None,
        events: EventLog | str | Path | None = None,
        state_path: str | Path | None = None,
        resume: bool = True,
        owns_store: bool = False,
        supersession=None,
        **settings,
    ):
        if getattr(store, "dim", encoder.dim) != encoder.dim:
            raise ValueError(f"store dim {store.dim} does not match the encoder's dim {encoder.dim}")
        if not isinstance(owner, str) or not owner:
            raise ArgumentValueError(f"owner must be a non-empty string, got {owner!r}", field="owner")
        self.config = ManagerConfig.build(config, **settings)
        self.identity = bind_encoder(store, encoder)  # another encoder's store: EncoderMismatchError
        self.encoder, self.store, self.owner = encoder, store, owner
        self.importance = importance if importance is not None else HeuristicImportance()
        self.gate = gate if gate is not None else HeuristicGate()
        self.scorer = scorer if scorer is not None else HeuristicScorer()
        self.llm = llm if llm is not None else ExtractiveLLM()
        self.context = ContextWindow(self.config.context_budget)
        self.working = WorkingMemory(self.config.working_capacity, self.config.working_policy)
        self.events = events if isinstance(events, EventLog) else EventLog(events)
        threshold = self.config.reflection_threshold
        self.reflector = Reflector(self.llm, threshold=threshold) if threshold else None
        self.planner = Planner(self.llm)
        self.pending: dict[str, Entry] = {}  # kept, not yet in the archive
        self._writes = WritePath(store, encoder, self.importance, self.config, supersession=supersession)
        self._policy = _TierPolicy(self)
        self._searcher = Searcher(store, self.scorer, self.config.fetch_factor)
        self.unkept: set[str] = set()  # in the context only; dropped when they leave it
        self.owns_store = owns_store
        self.closed = False
        # the store's deletion ledger position this manager has caught up with (see _forget_deleted)
        self._ledger = supports(store, DeletionLedger)
        self._deletion_mark = store.deletion_mark() if self._ledger else 0
        if not self._ledger:
            logger.warning(
                "%s declares no deletion ledger (supports_deletion_ledger): the manager of %r forgets "
                "deletions made through AgentMemory in this process only",
                type(store).__name__,
                owner,
            )
        self._legacy_state: Path | None = None  # a state file under the old name, removed once saved anew
        if state_path is None and supports(store, LocalState):
            state_path = default_state_path(store.directory, owner)
            legacy = legacy_state_path(store.directory, owner)
            if not state_path.is_file() and legacy.is_file():
                self._legacy_state = legacy
        self.state_path = Path(state_path) if state_path is not None else None
        if resume and self.state_path is not None and (self._legacy_state or self.state_path).is_file():
            self._restore()

    @property
    def archive(self):
        """The archive tier: the store this manager reads and writes (MemGPT's name for it)."""
        return self.store

    # ------------------------------------------------------------------ constructors
    @classmethod
    def open(cls, archive_dir: str | Path, *, encoder=None, key=None, **kwargs) -> MemoryManager:
        """The heuristic manager: an encoder (default: the untrained backbone) and an archive folder."""
        return cls._open(archive_dir, memory_components(encoder=encoder), key, kwargs)

    @classmethod
    def from_pretrained(cls, pack_dir: str | Path, archive_dir: str | Path, *, key=None, **kwargs) -> MemoryManager:
        """The trained manager: encoder, importance head, recall gate and scorer weights of a pack.

        Parts the pack lacks fall back to the heuristics; keyword arguments override the rest
        (e.g. ``gate=FixedGate(True)``). See :func:`memnets.memory.opening.memory_components`.
        """
        return cls._open(archive_dir, memory_components(pack=pack_dir), key, kwargs)

    @classmethod
    def _open(cls, archive_dir: str | Path, components: dict, key, overrides: dict) -> MemoryManager:
        """A manager owning the store it opens at ``archive_dir`` for these components, ``overrides`` applied."""
        from memnets.store import open_store

        components = {**components, **overrides}
        encoder = components.pop("encoder")
        return cls(encoder, open_store(archive_dir, encoder.dim, key=key), owns_store=True, **components)

    # ------------------------------------------------------------------ helpers
    def _embed(self, texts: Sequence[str], kind: str = "memory") -> np.ndarray:
        return embed(self.encoder, texts, kind)

    def _tokens(self, text: str) -> int:
        return len(self.encoder.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _entry(self, memory: Memory, vector: np.ndarray) -> Entry:
        return Entry(memory, np.asarray(vector, dtype=np.float32), self._tokens(memory.content))

    def _persist(self, entries: list[Entry], t: datetime | None, judged: bool = False) -> list[Entry]:
        """Upsert entries into the store, except those deleted since we took them (checked right
        before the write, against the store's deletion ledger); returns the entries written. ``judged``: kept
        observations entering the store, which the supersession step reads (:meth:`WritePath.persist`)."""
        if not entries:
            return []
        gone = self._forget_deleted(t)
        entries = [e for e in entries if e.id not in gone]
        if entries:
            self._writes.persist([e.memory for e in entries], np.stack([e.vector for e in entries]), judged=judged)
        for entry in entries:
            self.pending.pop(entry.id, None)
        return entries

    def _write(self, entries: list[Entry], mode: str, t: datetime | None, judged: bool = False) -> None:
        written = self._persist(entries, t, judged)
        if written:
            self.events.log(Move.WRITE, [e.id for e in written], t, mode=mode)

    def _held(self) -> dict[str, Memory]:
        """Every memory this manager holds in process: context, working memory, write buffer, reflection queue."""
        held = {e.id: e.memory for e in self.context.entries}
        held.update((e.id, e.memory) for e in self.working.entries.values())
        held.update((e.id, e.memory) for e in self.pending.values())
        if self.reflector is not None:
            held.update((m.id, m) for m in self.reflector.pending)
        return held

    def _forget_deleted(self, t: datetime | None = None) -> set[str]:
        """Catch up with the store's deletion ledger: forget what any connection or process deleted,
        and what has expired (by the wall clock, whatever ``t`` says).

        Called before every write, every query and at close, so a memory deleted elsewhere (even
        one still in our write buffer, which the store never saw) is never written back, shown or
        restored. Stores without a ledger (:class:`~memnets.store.protocol.DeletionLedger`) only get
        in-process deletions, through :meth:`forget`.
        """
        held = self._held()
        now = timeutil.now()
        expired = {memory_id for memory_id, memory in held.items() if memory.expired(now)}
        if expired:
            self.forget(expired, t, reason="expired")
        if not self._ledger:
            return expired
        self._deletion_mark, gone = self.store.deleted_since(
            self._deletion_mark, self.owner, [m for i, m in held.items() if i not in expired]
        )
        if gone:
            self.forget(gone, t, reason="deleted in the store")
        return gone | expired

    def forget(self, ids: Iterable[str], t: datetime | None = None, *, reason: str = "deleted") -> list[str]:
        """Drop memories from every tier and from the write buffer (they are never written); returns those held.

        ``AgentMemory.delete`` calls this on every live manager of the user; deletions made
        elsewhere reach it through the store's ledger (:meth:`_forget_deleted`).
        """
        ids = set(ids)
        held = [i for i in self._held() if i in ids]
        self.context.remove(ids)
        self.working.remove([i for i in ids if i in self.working])
        for memory_id in ids:
            self.pending.pop(memory_id, None)
        self.unkept.difference_update(ids)
        if self.reflector is not None:
            self.reflector.pending = [m for m in self.reflector.pending if m.id not in ids]
        if held:
            self.events.log(Move.FORGET, held, t, reason=reason)
        return held

    def refresh(self, memory: Memory, vector: np.ndarray) -> bool:
        """A newer version of a memory (``AgentMemory.update``) replaces the one held, in place; True if held."""
        entry = self.working.get(memory.id) or next((e for e in self.context.entries if e.id == memory.id), None)
        if entry is None:
            return False
        entry.memory, entry.vector, entry.tokens = (
            memory,
            np.asarray(vector, dtype=np.float32),
            self._tokens(memory.content),
        )
        self.pending.pop(memory.id, None)  # the store holds the new version already
        return True

    def _score(self, entries: list[Entry], query: str, query_vector: np.ndarray, now: datetime) -> np.ndarray:
        """The scorer's scores of held entries for the query (:func:`memnets.memory.search.score`)."""
        if not entries:
            return np.empty(0)
        vectors = np.stack([e.vector for e in entries])
        return score(self.scorer, [e.memory for e in entries], query, now, query_vector, vectors)

    def _pick(self, entries: list[Entry], scores: np.ndarray, k: int, query_vector: np.ndarray) -> list[Entry]:
        """The best ``k`` entries by their scorer ``scores``, min-max scaled, diversified by MMR, in the order a
        search answers (:func:`~memnets.memory.mmr.mmr_current_first`: a stale fact never in its successor's place,
        nor a memory in that of its likely replacement for the query, ``Supersession.ranked_links``)."""
        if not entries:
            return []
        vectors = np.stack([e.vector for e in entries])
        memories = [e.memory for e in entries]
        step, relevance = self._writes.supersession, min_max(scores)
        links = step.ranked_links(memories, vectors, scores, query_vector) if step is not None else {}
        order = mmr_current_first(memories, vectors, relevance, scores, k, lambda_=self.config.mmr_lambda, links=links)
        return [entries[n] for n in order]

    # ------------------------------------------------------------------ the moves
    def retain(self, ids: Iterable[str], t: datetime | None = None) -> list[Memory]:
        """RETAIN: move context messages into working memory (unkept ones are dropped instead)."""
        wanted = set(ids)
        leaving = [e for e in self.context.entries if e.id in wanted]
        self.context.remove(wanted)
        kept = [e for e in leaving if e.id not in self.unkept]
        dropped = [e.id for e in leaving if e.id in self.unkept]
        if dropped:
            self.unkept.difference_update(dropped)
            self.events.log(Move.DROP, dropped, t, reason="below keep threshold")
        for entry in kept:
            self.working.add(entry)
        if kept:
            self.events.log(Move.RETAIN, [e.id for e in kept], t)
        self._settle_working(t)
        return [e.memory for e in kept]

    def bury(self, ids: Iterable[str], t: datetime | None = None) -> list[Memory]:
        """BURY: move working memories out to the archive (writing any that are not there yet)."""
        entries = self.working.remove(list(ids))
        self._write([e for e in entries if e.id in self.pending], "bury", t, judged=True)
        if entries:
            self.events.log(Move.BURY, [e.id for e in entries], t, importance=[e.memory.importance for e in entries])
        return [e.memory for e in entries]

    def emit(self, ids: Iterable[str], t: datetime | None = None) -> list[Memory]:
        """EMIT: persist a copy of working memories in the archive (they stay in working memory)."""
        ids = list(ids)
        missing = [i for i in ids if i not in self.working]
        if missing:
            raise KeyError(f"emit: not in working memory: {missing}")
        entries = [self.working.get(i) for i in ids]  # buffered ones enter the store now: judged as a flush's
        buffered = {e.id for e in entries if e.id in self.pending}
        written = self._persist([e for e in entries if e.id in buffered], t, judged=True)
        written += self._persist([e for e in entries if e.id not in buffered], t)
        self.events.log(Move.EMIT, [e.id for e in written], t)
        return [e.memory for e in written]

    def recall(
        self,
        query: str,
        *,
        now: datetime | None = None,
        k: int | None = None,
        query_vector: np.ndarray | None = None,
        stamp: bool = True,
    ) -> list[Memory]:
        """RECALL: search the archive for the query and bring the best ``k`` new memories into working memory.

        Fetches ``fetch_factor * k`` nearest memories (skipping those already in context or working
        memory), re-scores them with the scorer, picks ``k`` with MMR and adds them to working
        memory; overflow then buries others, never the ones just recalled. With ``stamp`` they are
        marked accessed now (``context_for`` stamps later, after it has ranked them for the query,
        so that the access this very query causes does not change its own ranking). ``now``
        defaults to the current time.
        """
        now = as_utc_or_now(now, "recall: now")
        k = self.config.k if k is None else _positive_k(k)
        chosen = self._recall(query, now, k, query_vector)
        if stamp:
            self._stamp(chosen, now)
        self._settle_working(now, protected=[e.id for e in chosen])
        return [e.memory for e in chosen]

    def _recall(self, query: str, now: datetime, k: int, query_vector: np.ndarray | None) -> list[Entry]:
        """RECALL without settling working memory: the entries added (the caller settles the overflow)."""
        self.flush(now)
        if query_vector is None:
            query_vector = self._embed([query], "query")[0]
        found, vectors = self._searcher.candidates(query_vector, k, self.owner)
        self.events.log(Move.SEARCH, [m.id for m in found], now, query=query, fetched=len(found))
        found, vectors, _ = self._searcher.with_successors(found, vectors, self.owner, None)  # a stale fact's too
        fresh = [n for n, m in enumerate(found) if m.id not in self.working and m.id not in self.context]
        if not fresh:
            return []
        memories, vectors = [found[n] for n in fresh], vectors[fresh]
        scores = score(self.scorer, memories, query, now, query_vector, vectors)
        entries = [self._entry(m, v) for m, v in zip(memories, vectors)]
        chosen = self._pick(entries, scores, k, query_vector)
        for entry in chosen:
            self.working.add(entry)
        self.events.log(Move.RECALL, [e.id for e in chosen], now, query=query)
        return chosen

    def _stamp(self, entries: list[Entry], now: datetime) -> None:
        """Mark working-memory entries accessed now, here and (for those already written) in the archive."""
        if not entries:
            return
        for entry in entries:
            entry.memory = entry.memory.replace(last_access=now)
        self.store.touch([e.id for e in entries if e.id not in self.pending], self.owner, now)

    def _settle_working(self, t: datetime | None, protected: Iterable[str] = ()) -> None:
        """Working-memory overflow: bury what the policy picks until it fits."""
        overflow = self.working.overflow(protected)
        if overflow:
            self.bury([e.id for e in overflow], t)

    def flush(self, t: datetime | None = None) -> None:
        """Write the buffered observations to the archive in one batch."""
        self._write(list(self.pending.values()), "batch", t, judged=True)

    # ------------------------------------------------------------------ the loop
    def observe(
        self,
        content: str,
        *,
        t: datetime | None = None,
        id: str | None = None,
        kind: str = "observation",
        speaker: str | None = None,
        importance: float | None = None,
        metadata: dict | None = None,
        action: str | None = None,
        objects: Sequence[str] = (),
        location: str | None = None,
    ) -> Memory:
        """A new message enters the context; the management loop runs.

        The message is embedded and scored for importance (unless given), kept (importance >=
        ``keep_threshold``) or not, written through or buffered, counted towards reflection; then
        context overflow RETAINs the least recent messages into working memory and working-memory
        overflow BURYs the least important. ``t`` defaults to now; ``speaker``, ``action``,
        ``objects`` and ``location`` fill the record's structured fields (the seed's observation).

        Consistency, the same rule as ``AgentMemory.add`` (:mod:`memnets.memory.writes`): an
        observation without an id that says the same as a memory of its kind held here or stored
        refreshes that memory (accessed at ``t``, back at the end of the context) and returns it
        with ``outcome`` "unchanged"; one that changes a fact of a near match becomes that
        memory's new version (written at once, the old one kept in its history; "updated");
        anything else is "added". Observing an existing id again is "unchanged" when the record
        states the same, else a new version of it.
        """
        if not isinstance(content, str):
            raise ArgumentTypeError(f"observe: content must be a str, got {type(content).__name__}", field="content")
        if id is not None:
            check_new_id(id, "observe: id")
        memory = Memory(
            id=id if id is not None else f"{self.owner}/{uuid.uuid4().hex[:12]}",
            owner=self.owner,
            t=as_utc_or_now(t, "observe: t"),
            content=content,
            importance=0.0 if importance is None else importance,
            kind=kind,
            agent=speaker,
            action=action,
            objects=() if objects is None else objects,
            location=location,
            metadata={} if metadata is None else (dict(metadata) if isinstance(metadata, dict) else metadata),
        )  # validates every field before anything changes
        self._forget_deleted(memory.t)
        return self._writes.observe(
            memory, self._policy, scored=importance is not None, explicit=id is not None, name="observe: content"
        )

    def _settle_context(self, t: datetime) -> None:
        """Context overflow: RETAIN the least recent messages until the rest fits."""
        overflow = self.context.overflow()
        if overflow:
            self.retain([e.id for e in overflow], t)

    def _entry_of(self, memory: Memory) -> Entry:
        """The held entry of ``memory``, or a new one from the store's vector."""
        held = self.working.get(memory.id) or next((e for e in self.context.entries if e.id == memory.id), None)
        held = held or self.pending.get(memory.id)
        return held if held is not None else self._entry(memory, self.store.vectors([memory.id], self.owner)[0])

    def context_for(self, query: str, *, now: datetime | None = None, k: int | None = None) -> ContextView:
        """What the LLM should see for ``query``: gate, maybe RECALL, then the best of working memory (``now``: default now)."""
        if not isinstance(query, str) or not query.strip():
            raise ArgumentValueError(f"context_for: query must be non-empty text, got {query!r:.60}", field="query")
        now = as_utc_or_now(now, "context_for: now")
        k = self.config.k if k is None else _positive_k(k)
        self._forget_deleted(now)
        query_vector = self._embed([query], "query")[0]
        context_vectors = (
            np.stack([e.vector for e in self.context.entries])
            if len(self.context)
            else np.empty((0, len(query_vector)))
        )
        verdict = self.gate(query_vector, context_vectors)
        self.events.log(
            Move.GATE, [], now, query=query, recall=verdict.recall, score=verdict.score, gate=self.gate.name
        )
        recalled = self._recall(query, now, k, query_vector) if verdict.recall else []
        # the view is picked before working memory settles its overflow, so what the search found
        # competes with everything held and nothing the query needs is buried before it is shown
        held = list(self.working.entries.values())  # as the store holds them now: a later ending or link included
        refreshed(held, self.store.get([e.id for e in held if e.id not in self.pending], self.owner))
        chosen = self._pick(held, self._score(held, query, query_vector, now), k, query_vector)
        shown = {e.id for e in chosen} | {e.id for e in recalled}
        self._stamp([e for e in self.working.entries.values() if e.id in shown], now)
        # what the view shows and the search found stay at hand; what it shows at least, if both do not fit
        protected = shown if len(shown) <= self.config.working_capacity else {e.id for e in chosen}
        self._settle_working(now, protected=protected)
        return ContextView(
            messages=tuple(e.memory for e in self.context.entries),
            memories=tuple(e.memory for e in chosen),
            recalled=verdict.recall,
            gate_score=verdict.score,
        )

    # ------------------------------------------------------------------ higher-level memories
    def _store(self, memory: Memory, t: datetime) -> Entry:
        """A derived memory (reflection, summary, plan): written through and put in working memory."""
        entry = self._entry(memory, self._embed([memory.content])[0])
        self._write([entry], "through", t)
        self.working.add(entry)
        return entry

    def reflect(self, *, now: datetime | None = None) -> Memory:
        """Write a reflection over the memories since the last one (it links to its evidence)."""
        now = as_utc_or_now(now, "reflect: now")
        if self.reflector is None:
            raise RuntimeError("reflect: this manager has no reflection_threshold, so it does not reflect")
        reflection = self.reflector.reflect(self.owner, now)
        entry = self._store(reflection, now)
        self.events.log(Move.REFLECT, [reflection.id], now, evidence=list(reflection.links))
        self._settle_working(now, protected=[entry.id])
        return reflection

    def compress(
        self,
        *,
        now: datetime | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        min_importance: float = 0.0,
        bury_sources: bool = True,
    ) -> Memory:
        """Summarise working memory's memories of a time window above an importance floor into one.

        The summary links to its sources; with ``bury_sources`` they leave working memory for the
        archive (the summary stands in for them), freeing room.
        """
        now = as_utc_or_now(now, "compress: now")
        candidates = [e.memory for e in self.working.entries.values() if e.memory.kind != "summary"]
        sources = compression.select(candidates, min_importance=min_importance, start=start, end=end)
        summary = compression.summarise(sources, self.llm, owner=self.owner, now=now)
        entry = self._store(summary, now)
        self.events.log(Move.COMPRESS, [summary.id], now, sources=list(summary.links))
        if bury_sources:
            self.bury(summary.links, now)
        self._settle_working(now, protected=[entry.id])
        return summary

    def plan(self, goal: Goal, *, now: datetime | None = None, previous: Plan | None = None) -> Plan:
        """A plan for ``goal`` from the memories relevant to it (remade when ``previous`` failed)."""
        now = as_utc_or_now(now, "plan: now")
        view = self.context_for(goal.description, now=now)
        plan = self.planner.plan(goal, list(view.memories), owner=self.owner, now=now, previous=previous)
        self._store(plan.memory, now)
        move = Move.REPLAN if previous is not None else Move.PLAN
        self.events.log(
            move, [plan.memory.id], now, goal=goal.description, steps=plan.steps, failures=list(goal.failures)
        )
        self._settle_working(now, protected=[plan.memory.id])
        return plan

    def replan(self, plan: Plan, failed_step: str, reason: str, *, now: datetime | None = None) -> Plan:
        """Record that a step failed and make a new plan that knows it."""
        plan.goal.failures.append(f"step '{failed_step}' failed: {reason}")
        return self.plan(plan.goal, now=now, previous=plan)

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict:
        """The tiers by id (their contents live in the archive) and the reflection counter."""
        return {
            "version": STATE_VERSION,
            "owner": self.owner,
            "context": [e.id for e in self.context.entries if e.id not in self.unkept],
            "working": self.working.ids(),
            "reflection": self.reflector.state() if self.reflector is not None else None,
        }

    def _restore(self) -> None:
        state = read_state(self._legacy_state or self.state_path, self.owner)
        for tier, ids in (("context", state["context"]), ("working", state["working"])):
            memories = self.store.get(ids, self.owner) if ids else []
            if not memories:
                continue
            vectors = self.store.vectors([m.id for m in memories], self.owner)
            for memory, vector in zip(memories, vectors):
                (self.context if tier == "context" else self.working).add(self._entry(memory, vector))
        if self.reflector is not None and state.get("reflection"):
            reflection = state["reflection"]
            self.reflector.accumulated = float(reflection["accumulated"])
            self.reflector.pending = self.store.get(reflection["pending"], self.owner) if reflection["pending"] else []

    def close(self) -> None:
        """Forget what was deleted elsewhere, flush the buffer, save the tiers' state next to the
        archive, and close what we opened. Safe to call twice.

        A manager that holds nothing (nothing observed, or everything deleted, e.g. by
        ``delete_all``) writes no state file and removes its old one: after an erasure no file
        names the user or their memories.
        """
        if self.closed:
            return
        self._forget_deleted()
        self.flush()
        if self.state_path is not None:
            write_state(self.state_path, self.state())
            if self._legacy_state is not None:
                self._legacy_state.unlink(missing_ok=True)
        self.closed = True
        if self.owns_store:
            self.store.close()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _TierPolicy:
    """The manager's side of :meth:`WritePath.observe` (a :class:`~memnets.memory.writes.ObservePolicy`).

    Its context, working memory and write buffer hold memories; a repeated or updated memory moves
    to the end of the context; a new observation enters the context and is kept (importance >=
    ``keep_threshold``) or not, written at once (>= ``write_through_threshold``) or buffered until
    ``batch_size`` wait, and counted towards reflection.
    """

    def __init__(self, manager: MemoryManager):
        self.manager = manager

    def held(self) -> dict[str, Memory]:
        return self.manager._held()

    def held_vectors(self, kind: str) -> list[tuple[Memory, np.ndarray]]:
        tiers = (*self.manager.context.entries, *self.manager.working.entries.values())
        held = {e.id: e for e in tiers if e.memory.kind == kind}
        return [(e.memory, e.vector) for e in held.values()]

    def buffered(self, memory_id: str) -> bool:
        return memory_id in self.manager.pending

    def repeated(self, memory: Memory, t: datetime) -> Memory:
        manager = self.manager
        entry = manager._entry_of(memory)
        entry.memory = entry.memory.replace(last_access=max(t, entry.memory.last_access))
        manager.context.remove([entry.id])
        manager.working.remove([entry.id])
        manager.context.add(entry)
        manager.events.log(Move.OBSERVE, [entry.id], t, duplicate=True, tokens=entry.tokens)
        manager._settle_context(t)
        return entry.memory

    def store_held(self, memory: Memory, t: datetime) -> None:
        self.manager._write([self.manager._entry_of(memory)], "through", t)

    def versioned(self, current: Memory, new: Memory, vector: np.ndarray, t: datetime) -> None:
        manager = self.manager
        manager.forget([current.id], t, reason="updated")
        entry = manager._entry(new, vector)
        manager.context.add(entry)
        manager.events.log(Move.OBSERVE, [new.id], t, importance=new.importance, tokens=entry.tokens, updated=True)
        manager.events.log(Move.WRITE, [new.id], t, mode="version")
        manager._settle_context(t)

    def added(self, memory: Memory, vector: np.ndarray) -> None:
        manager, config, t = self.manager, self.manager.config, memory.t
        entry = manager._entry(memory, vector)
        manager.context.add(entry)
        kept = keeps(memory.importance, config.keep_threshold)
        manager.events.log(Move.OBSERVE, [memory.id], t, importance=memory.importance, tokens=entry.tokens, kept=kept)
        if kept:
            if memory.importance >= config.write_through_threshold:
                manager._write([entry], "through", t, judged=True)
            else:
                manager.pending[memory.id] = entry
                if len(manager.pending) >= config.batch_size:
                    manager.flush(t)
            if manager.reflector is not None and manager.reflector.add(memory):
                manager.reflect(now=t)
        else:
            manager.unkept.add(memory.id)
        manager._settle_context(t)


__all__ = [
    "DUPLICATE_THRESHOLD",  # its home is memnets.memory.config; named here too, where callers found it
    "ContextView",
    "ManagerConfig",
    "MemoryManager",
    "default_state_path",
    "legacy_state_path",
]
