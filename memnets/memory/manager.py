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

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path

import numpy as np

import memnets.timeutil as timeutil
from memnets.llm import LLM, ExtractiveLLM
from memnets.memory import compression
from memnets.memory.events import EventLog, Move
from memnets.memory.ids import check_new_id
from memnets.memory.mmr import mmr
from memnets.memory.planning import Goal, Plan, Planner
from memnets.memory.reflection import Reflector
from memnets.memory.signals import Gate, HeuristicGate, HeuristicImportance, Importance, pack_components
from memnets.memory.tiers import ContextWindow, Entry, WorkingMemory, policy
from memnets.memory.writes import (
    check_text,
    check_tokens,
    chunk_vectors,
    classify,
    embed,
    nearest,
    same_record,
    successor,
    upsert,
    write_version,
)
from memnets.protocols import TextEncoder
from memnets.records import Memory
from memnets.scoring import HeuristicScorer, min_max
from memnets.store.identity import bind_encoder
from memnets.store.protocol import DeletionLedger, supports
from memnets.timeutil import as_utc_or_now

logger = logging.getLogger(__name__)
STATE_VERSION = 1
# near-match cosine for the bundled all-MiniLM-L6-v2: the smallest multiple of 0.01 at which at most 0.1% of
# LoCoMo's training turns (conv-26/30/41/42/43/47) merge into or update an earlier one (bench/duplicates.py,
# docs/memory.md: 3 of 3,443 at 0.96; 8 of bench/fact_changes.py's 10 one-detail changes are near matches)
DUPLICATE_THRESHOLD = 0.96


def _positive_k(k) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    return k


def default_state_path(directory: str | Path, owner: str) -> Path:
    """Where a manager of ``owner`` saves its tiers in a store folder: ``manager-<sha256 of owner>.json``.

    A hash, not the name: distinct owners never share a file ("a b" and "a_b" did when names were
    sanitised), and no file name in the folder spells a user's name.
    """
    return Path(directory) / f"manager-{hashlib.sha256(owner.encode('utf-8')).hexdigest()}.json"


def legacy_state_path(directory: str | Path, owner: str) -> Path:
    """Where memnets before the hashed names saved ``owner``'s state (read once, then replaced)."""
    return Path(directory) / f"manager-{re.sub(r'[^A-Za-z0-9_.-]', '_', owner)}.json"


@dataclass(frozen=True)
class ContextView:
    """What the LLM is shown for a query: the context's messages and the memories brought to it."""

    messages: tuple[Memory, ...]
    memories: tuple[Memory, ...]
    recalled: bool
    gate_score: float

    def ids(self) -> list[str]:
        """Ids of everything in view (messages first, then memories)."""
        return [m.id for m in self.messages] + [m.id for m in self.memories]

    def render(self) -> str:
        """The prompt text: the memories, then the conversation, each line a bullet (see memnets.llm)."""
        parts = []
        if self.memories:
            parts.append("Relevant memories:\n" + "\n".join(f"- {m.content}" for m in self.memories))
        if self.messages:
            parts.append("Conversation:\n" + "\n".join(f"- {m.content}" for m in self.messages))
        return "\n\n".join(parts)


@dataclass(frozen=True)
class ManagerConfig:
    """The manager's settings (the pluggable decisions are passed beside it, not in it).

    Attributes:
        context_budget: tokens the context's messages may take.
        working_capacity: memories working memory may hold.
        k: memories recalled per archive search, and memories added to the context per query.
        keep_threshold: observations with importance below it are not kept (0 keeps all).
        write_through_threshold: observations at or above it are written to the archive at once.
        batch_size: the other kept observations are written when this many are waiting.
        reflection_threshold: accumulated importance that triggers a reflection (None: never reflect).
        mmr_lambda: relevance against diversity when picking memories (1 = plain top-k).
        fetch_factor: an archive search fetches ``fetch_factor * k`` candidates for re-scoring and MMR.
        context_policy, working_policy: overflow policies (see :mod:`memnets.memory.tiers`).
        duplicate_threshold: the cosine of a near match: an observation (or ``AgentMemory.add``)
            without an explicit id that reaches it with a memory of the same kind and speaker is
            that memory again ("unchanged") when its facts are the same, else its new version
            ("updated"); see :mod:`memnets.memory.writes` (None: every text is a new memory).
            Chosen on LoCoMo's training conversations, see docs/memory.md.
    """

    context_budget: int = 512
    working_capacity: int = 50
    k: int = 5
    keep_threshold: float = 0.0
    write_through_threshold: float = 0.5
    batch_size: int = 32
    reflection_threshold: float | None = None
    mmr_lambda: float = 1.0  # plain top-k; chosen on conv-49 over 0.7 and 0.5 (docs/memory.md)
    fetch_factor: int = 3
    context_policy: str = "least_recent"
    working_policy: str = "least_important"
    duplicate_threshold: float | None = DUPLICATE_THRESHOLD

    def __post_init__(self) -> None:
        for name in ("context_budget", "working_capacity", "k", "batch_size", "fetch_factor"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ManagerConfig.{name} must be an int >= 1, got {value!r}")
        for name in ("keep_threshold", "write_through_threshold", "mmr_lambda"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"ManagerConfig.{name} must be a number in [0, 1], got {value!r}")
        if self.reflection_threshold is not None and not (
            isinstance(self.reflection_threshold, (int, float)) and self.reflection_threshold > 0
        ):
            raise ValueError(
                f"ManagerConfig.reflection_threshold must be None or a positive number, got {self.reflection_threshold!r}"
            )
        if self.duplicate_threshold is not None and not (
            isinstance(self.duplicate_threshold, (int, float)) and -1.0 <= self.duplicate_threshold <= 1.0
        ):
            raise ValueError(
                f"ManagerConfig.duplicate_threshold is a cosine: None or a number in [-1, 1], got {self.duplicate_threshold!r}"
            )
        policy(self.working_policy)  # an unknown name raises ValueError naming the choices
        if self.context_policy != "least_recent":
            raise ValueError(
                f"the context spills in arrival order; context_policy must be 'least_recent', got {self.context_policy!r}"
            )

    @classmethod
    def build(cls, config: ManagerConfig | None = None, **settings) -> ManagerConfig:
        """``config`` (default: the defaults) with some settings changed; an unknown name is a TypeError naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"unknown manager setting(s) {unknown}; ManagerConfig has {sorted(known)}")
        return replace(config or cls(), **settings)


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
        **settings,
    ):
        if getattr(store, "dim", encoder.dim) != encoder.dim:
            raise ValueError(f"store dim {store.dim} does not match the encoder's dim {encoder.dim}")
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"owner must be a non-empty string, got {owner!r}")
        self.config = ManagerConfig.build(config, **settings)
        self.identity = bind_encoder(store, encoder)  # another encoder's store: EncoderMismatchError
        self.encoder = encoder
        self.store = store
        self.owner = owner
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
        if state_path is None and getattr(store, "directory", None) is not None:
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
        from memnets.nn.encoder import MemoryEncoder
        from memnets.store import open_store

        if encoder is None or isinstance(encoder, (str, Path)):
            encoder = MemoryEncoder.from_pretrained(*([encoder] if encoder is not None else []))
        store = open_store(archive_dir, encoder.dim, key=key)
        return cls(encoder, store, owns_store=True, **kwargs)

    @classmethod
    def from_pretrained(cls, pack_dir: str | Path, archive_dir: str | Path, *, key=None, **kwargs) -> MemoryManager:
        """The trained manager: encoder, importance head, recall gate and scorer weights of a pack.

        Parts the pack lacks fall back to the heuristics; keyword arguments override the rest
        (e.g. ``gate=FixedGate(True)``). See :func:`memnets.memory.signals.pack_components`.
        """
        from memnets.pack import load_pack
        from memnets.store import open_store

        components = pack_components(load_pack(pack_dir))
        components.update(kwargs)
        encoder = components.pop("encoder")
        store = open_store(archive_dir, encoder.dim, key=key)
        return cls(encoder, store, owns_store=True, **components)

    # ------------------------------------------------------------------ helpers
    def _embed(self, texts: Sequence[str], kind: str = "memory") -> np.ndarray:
        return embed(self.encoder, texts, kind)

    def _tokens(self, text: str) -> int:
        return len(self.encoder.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _entry(self, memory: Memory, vector: np.ndarray) -> Entry:
        return Entry(memory, np.asarray(vector, dtype=np.float32), self._tokens(memory.content))

    def _persist(self, entries: list[Entry], t: datetime | None) -> list[Entry]:
        """Upsert entries into the store, except those deleted since we took them (checked right
        before the write, against the store's deletion ledger); returns the entries written."""
        if not entries:
            return []
        gone = self._forget_deleted(t)
        entries = [e for e in entries if e.id not in gone]
        if entries:
            chunks = chunk_vectors(self.encoder, [e.memory.content for e in entries])  # a long memory's windows
            upsert(self.store, [e.memory for e in entries], np.stack([e.vector for e in entries]), chunks)
        for entry in entries:
            self.pending.pop(entry.id, None)
        return entries

    def _write(self, entries: list[Entry], mode: str, t: datetime | None) -> None:
        written = self._persist(entries, t)
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
        memories = [e.memory for e in entries]
        vectors = np.stack([e.vector for e in entries])
        scores = self.scorer.score(memories, query, now, query_vector=query_vector, memory_vectors=vectors)
        return np.asarray(scores, dtype=np.float64).reshape(len(entries))

    def _pick(self, entries: list[Entry], query: str, query_vector: np.ndarray, now: datetime, k: int) -> list[Entry]:
        """The best ``k`` entries for the query: scorer scores, min-max scaled, diversified by MMR."""
        if not entries:
            return []
        relevance = min_max(self._score(entries, query, query_vector, now))
        order = mmr(np.stack([e.vector for e in entries]), relevance, k, lambda_=self.config.mmr_lambda)
        return [entries[i] for i in order]

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
        self._write([e for e in entries if e.id in self.pending], "bury", t)
        if entries:
            self.events.log(Move.BURY, [e.id for e in entries], t, importance=[e.memory.importance for e in entries])
        return [e.memory for e in entries]

    def emit(self, ids: Iterable[str], t: datetime | None = None) -> list[Memory]:
        """EMIT: persist a copy of working memories in the archive (they stay in working memory)."""
        ids = list(ids)
        missing = [i for i in ids if i not in self.working]
        if missing:
            raise KeyError(f"emit: not in working memory: {missing}")
        written = self._persist([self.working.get(i) for i in ids], t)
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
        found = self.store.search(query_vector, self.config.fetch_factor * k, self.owner)
        self.events.log(Move.SEARCH, [m.id for m, _ in found], now, query=query, fetched=len(found))
        fresh = [m for m, _ in found if m.id not in self.working and m.id not in self.context]
        if not fresh:
            return []
        vectors = self.store.vectors([m.id for m in fresh], self.owner)
        entries = [self._entry(m, v) for m, v in zip(fresh, vectors)]
        chosen = self._pick(entries, query, query_vector, now, k)
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
        self._write(list(self.pending.values()), "batch", t)

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
            raise TypeError(f"observe: content must be a str, got {type(content).__name__}")
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
        check_text(content, "observe: content")
        t = memory.t
        self._forget_deleted(t)
        check_tokens(content, self.encoder, "observe: content")
        vector = self._embed([content])[0]
        if importance is None:
            memory = memory.replace(importance=float(self.importance([content], vector[None, :])[0]))
        if id is None:
            outcome, match = classify(memory, self._candidates(vector, kind), self.config.duplicate_threshold)
        else:
            match = self._held().get(id) or next(iter(self.store.get([id], self.owner)), None)
            outcome = "added" if match is None else "unchanged" if same_record(match, memory) else "updated"
        if outcome == "unchanged":
            return self._refresh_duplicate(self._entry_of(match), t)
        if outcome == "updated":
            return self._observe_version(match, successor(match, memory, merge_metadata=id is None), vector, t)
        entry = self._entry(memory, vector)
        self.context.add(entry)
        kept = memory.importance >= self.config.keep_threshold
        self.events.log(Move.OBSERVE, [memory.id], t, importance=memory.importance, tokens=entry.tokens, kept=kept)
        if kept:
            if memory.importance >= self.config.write_through_threshold:
                self._write([entry], "through", t)
            else:
                self.pending[memory.id] = entry
                if len(self.pending) >= self.config.batch_size:
                    self.flush(t)
            if self.reflector is not None and self.reflector.add(memory):
                self.reflect(now=t)
        else:
            self.unkept.add(memory.id)
        self._settle_context(t)
        return memory.replace(outcome="added")

    def _settle_context(self, t: datetime) -> None:
        """Context overflow: RETAIN the least recent messages until the rest fits."""
        overflow = self.context.overflow()
        if overflow:
            self.retain([e.id for e in overflow], t)

    def _candidates(self, vector: np.ndarray, kind: str) -> list[tuple[Memory, float]]:
        """The memories of this kind held here and the nearest stored ones, with their cosine, best first."""
        held = {e.id: e for e in (*self.context.entries, *self.working.entries.values()) if e.memory.kind == kind}
        found = [(e.memory, float(e.vector @ vector)) for e in held.values()]
        found += [(m, s) for m, s in nearest(self.store, vector, self.owner, kind) if m.id not in self._held()]
        return sorted(found, key=lambda c: -c[1])

    def _entry_of(self, memory: Memory) -> Entry:
        """The held entry of ``memory``, or a new one from the store's vector."""
        held = self.working.get(memory.id) or next((e for e in self.context.entries if e.id == memory.id), None)
        held = held or self.pending.get(memory.id)
        return held if held is not None else self._entry(memory, self.store.vectors([memory.id], self.owner)[0])

    def _observe_version(self, current: Memory, new: Memory, vector: np.ndarray, t: datetime) -> Memory:
        """An observation that changes ``current``: written at once as its new version (the old one in its
        history), in place of the held entry, at the end of the context."""
        if current.id in self.pending or not self.store.get([current.id], self.owner):
            self._write([self._entry_of(current)], "through", t)  # its history needs the old version stored
        write_version(self.store, current, new, vector, chunk_vectors(self.encoder, [new.content])[0])
        self.forget([current.id], t, reason="updated")
        entry = self._entry(new, vector)
        self.context.add(entry)
        self.events.log(Move.OBSERVE, [new.id], t, importance=new.importance, tokens=entry.tokens, updated=True)
        self.events.log(Move.WRITE, [new.id], t, mode="version")
        self._settle_context(t)
        return new.replace(outcome="updated")

    def _refresh_duplicate(self, entry: Entry, t: datetime) -> Memory:
        """The same fact observed again: the held (or stored) memory is accessed now and moves to the context's end."""
        entry.memory = entry.memory.replace(last_access=max(t, entry.memory.last_access))
        self.context.remove([entry.id])
        self.working.remove([entry.id])
        self.context.add(entry)
        if entry.id not in self.pending:
            self.store.touch([entry.id], self.owner, entry.memory.last_access)
        self.events.log(Move.OBSERVE, [entry.id], t, duplicate=True, tokens=entry.tokens)
        self._settle_context(t)
        return entry.memory.replace(outcome="unchanged")

    def context_for(self, query: str, *, now: datetime | None = None, k: int | None = None) -> ContextView:
        """What the LLM should see for ``query``: gate, maybe RECALL, then the best of working memory (``now``: default now)."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"context_for: query must be non-empty text, got {query!r:.60}")
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
        chosen = self._pick(list(self.working.entries.values()), query, query_vector, now, k)
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
        path = self._legacy_state or self.state_path
        state = json.loads(path.read_text())
        if state.get("version") != STATE_VERSION or state.get("owner") != self.owner:
            raise ValueError(
                f"manager state {path} has version {state.get('version')} and owner "
                f"{state.get('owner')!r}; expected version {STATE_VERSION} and owner {self.owner!r}"
            )
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
            state = self.state()
            if state["context"] or state["working"] or (state["reflection"] or {}).get("pending"):
                self.state_path.write_text(json.dumps(state, indent=2) + "\n")
            else:
                self.state_path.unlink(missing_ok=True)
            if self._legacy_state is not None:
                self._legacy_state.unlink(missing_ok=True)
        self.closed = True
        if self.owns_store:
            self.store.close()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
