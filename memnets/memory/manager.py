"""The memory manager: three tiers, four moves, and the seed's management loop.

Tiers (MemGPT's hierarchy, with Generative Agents' scoring):

- context: the messages the LLM sees, bounded by a token budget counted with the encoder's tokenizer;
- working memory: memories at hand, bounded by a capacity in memory units;
- archive: :class:`~memnets.memory.archive.Archive`, persistent (SQLite + FAISS) and unbounded.

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

Without a pack, everything runs on heuristics (:class:`~memnets.memory.signals.HeuristicImportance`,
:class:`~memnets.memory.signals.HeuristicGate`, ``HeuristicScorer``); ``from_pretrained`` swaps in
the trained encoder, heads and scorer weights of a pack.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from memnets.llm import LLM, ExtractiveLLM
from memnets.memory import compression
from memnets.memory.events import EventLog, Move
from memnets.memory.mmr import mmr
from memnets.memory.planning import Goal, Plan, Planner
from memnets.memory.reflection import Reflector
from memnets.memory.signals import Gate, HeadGate, HeadImportance, HeuristicGate, HeuristicImportance, Importance
from memnets.memory.tiers import ContextWindow, Entry, WorkingMemory
from memnets.records import Memory
from memnets.scoring import HeuristicScorer, min_max

STATE_VERSION = 1


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


class MemoryManager:
    """Context, working memory and archive for one owner, with the four moves and their policies.

    Args:
        encoder: a :class:`~memnets.nn.encoder.MemoryEncoder` (embeds texts; its tokenizer counts tokens).
        archive: an open :class:`~memnets.memory.archive.Archive` of the encoder's dim.
        owner: whose memories these are; every archive read and write is scoped to it.
        context_budget: tokens the context's messages may take.
        working_capacity: memories working memory may hold.
        k: memories recalled per archive search, and memories added to the context per query.
        importance, gate, scorer: the pluggable decisions (defaults: the heuristics).
        llm: writes reflections, summaries and plans (default: :class:`~memnets.llm.ExtractiveLLM`).
        keep_threshold: observations with importance below it are not kept (0 keeps all).
        write_through_threshold: observations at or above it are written to the archive at once.
        batch_size: the other kept observations are written when this many are waiting.
        reflection_threshold: accumulated importance that triggers a reflection (None: never reflect).
        mmr_lambda: relevance against diversity when picking memories (1 = plain top-k).
        fetch_factor: an archive search fetches ``fetch_factor * k`` candidates for re-scoring and MMR.
        context_policy, working_policy: overflow policies (see :mod:`memnets.memory.tiers`).
        events: an :class:`EventLog`, or a path for a JSONL event file, or None (in memory only).
        state_path: where :meth:`close` saves the tiers and :meth:`__init__` restores them from
            (default: ``manager-<owner>.json`` in the archive's directory; None with ``resume=False``).
        resume: restore the tiers saved at the last :meth:`close`, if any.
        owns_archive: close the archive in :meth:`close` (set by the constructors that open it).
    """

    def __init__(
        self,
        encoder,
        archive,
        *,
        owner: str = "agent",
        context_budget: int = 512,
        working_capacity: int = 50,
        k: int = 5,
        importance: Importance | None = None,
        gate: Gate | None = None,
        scorer=None,
        llm: LLM | None = None,
        keep_threshold: float = 0.0,
        write_through_threshold: float = 0.5,
        batch_size: int = 32,
        reflection_threshold: float | None = None,
        mmr_lambda: float = 0.7,
        fetch_factor: int = 3,
        context_policy: str = "least_recent",
        working_policy: str = "least_important",
        events: EventLog | str | Path | None = None,
        state_path: str | Path | None = None,
        resume: bool = True,
        owns_archive: bool = False,
    ):
        if getattr(archive, "dim", encoder.dim) != encoder.dim:
            raise ValueError(f"archive dim {archive.dim} does not match the encoder's dim {encoder.dim}")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if fetch_factor < 1:
            raise ValueError(f"fetch_factor must be at least 1, got {fetch_factor}")
        for name, value in (("keep_threshold", keep_threshold), ("write_through_threshold", write_through_threshold)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} is an importance and must lie in [0, 1], got {value}")
        self.encoder = encoder
        self.archive = archive
        self.owner = owner
        self.k = int(k)
        self.importance = importance if importance is not None else HeuristicImportance()
        self.gate = gate if gate is not None else HeuristicGate()
        self.scorer = scorer if scorer is not None else HeuristicScorer()
        self.llm = llm if llm is not None else ExtractiveLLM()
        self.keep_threshold = float(keep_threshold)
        self.write_through_threshold = float(write_through_threshold)
        self.batch_size = int(batch_size)
        self.mmr_lambda = float(mmr_lambda)
        self.fetch_factor = int(fetch_factor)
        self.context = ContextWindow(context_budget)
        self.context_policy = context_policy
        if context_policy != "least_recent":
            raise ValueError(f"the context spills in arrival order; context_policy must be 'least_recent', got {context_policy!r}")
        self.working = WorkingMemory(working_capacity, working_policy)
        self.events = events if isinstance(events, EventLog) else EventLog(events)
        self.reflector = Reflector(self.llm, threshold=reflection_threshold) if reflection_threshold else None
        self.planner = Planner(self.llm)
        self.pending: dict[str, Entry] = {}  # kept, not yet in the archive
        self.unkept: set[str] = set()  # in the context only; dropped when they leave it
        self.owns_archive = owns_archive
        if state_path is None and getattr(archive, "directory", None) is not None:
            safe_owner = re.sub(r"[^A-Za-z0-9_.-]", "_", owner)
            state_path = Path(archive.directory) / f"manager-{safe_owner}.json"
        self.state_path = Path(state_path) if state_path is not None else None
        if resume and self.state_path is not None and self.state_path.is_file():
            self._restore()

    # ------------------------------------------------------------------ constructors
    @classmethod
    def open(cls, archive_dir: str | Path, *, encoder=None, key=None, **kwargs) -> "MemoryManager":
        """The heuristic manager: an encoder (default: the untrained backbone) and an archive folder."""
        from memnets.memory.archive import Archive
        from memnets.nn.encoder import MemoryEncoder

        if encoder is None or isinstance(encoder, (str, Path)):
            encoder = MemoryEncoder.from_pretrained(*([encoder] if encoder is not None else []))
        archive = Archive(archive_dir, encoder.dim, key=key)
        return cls(encoder, archive, owns_archive=True, **kwargs)

    @classmethod
    def from_pretrained(cls, pack_dir: str | Path, archive_dir: str | Path, *, key=None, **kwargs) -> "MemoryManager":
        """The trained manager: encoder, importance head, recall gate and scorer weights of a pack.

        Parts the pack lacks fall back to the heuristics; keyword arguments override the rest
        (e.g. ``gate=FixedGate(True)``). See :func:`pack_components`.
        """
        from memnets.memory.archive import Archive
        from memnets.pack import load_pack

        components = pack_components(load_pack(pack_dir))
        components.update(kwargs)
        encoder = components.pop("encoder")
        archive = Archive(archive_dir, encoder.dim, key=key)
        return cls(encoder, archive, owns_archive=True, **components)

    # ------------------------------------------------------------------ helpers
    def _embed(self, texts: Sequence[str], kind: str = "memory") -> np.ndarray:
        return self.encoder.encode(list(texts), kind=kind).numpy().astype(np.float32)

    def _tokens(self, text: str) -> int:
        return len(self.encoder.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _entry(self, memory: Memory, vector: np.ndarray) -> Entry:
        return Entry(memory, np.asarray(vector, dtype=np.float32), self._tokens(memory.content))

    def _write(self, entries: list[Entry], mode: str, t: datetime | None) -> None:
        if not entries:
            return
        self.archive.add([e.memory for e in entries], np.stack([e.vector for e in entries]))
        for entry in entries:
            self.pending.pop(entry.id, None)
        self.events.log(Move.WRITE, [e.id for e in entries], t, mode=mode)

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
        order = mmr(np.stack([e.vector for e in entries]), relevance, k, lambda_=self.mmr_lambda)
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
        entries = [self.working.get(i) for i in ids]
        self.archive.add([e.memory for e in entries], np.stack([e.vector for e in entries]))
        for entry in entries:
            self.pending.pop(entry.id, None)
        self.events.log(Move.EMIT, ids, t)
        return [e.memory for e in entries]

    def recall(
        self,
        query: str,
        *,
        now: datetime,
        k: int | None = None,
        query_vector: np.ndarray | None = None,
        stamp: bool = True,
    ) -> list[Memory]:
        """RECALL: search the archive for the query and bring the best ``k`` new memories into working memory.

        Fetches ``fetch_factor * k`` nearest memories (skipping those already in context or working
        memory), re-scores them with the scorer, picks ``k`` with MMR and adds them to working
        memory; overflow then buries others, never the ones just recalled. With ``stamp`` they are
        marked accessed now (``context_for`` stamps later, after it has ranked them for the query,
        so that the access this very query causes does not change its own ranking).
        """
        k = self.k if k is None else int(k)
        self.flush(now)
        if query_vector is None:
            query_vector = self._embed([query], "query")[0]
        found = self.archive.search(query_vector, self.fetch_factor * k, self.owner)
        self.events.log(Move.SEARCH, [m.id for m, _ in found], now, query=query, fetched=len(found))
        fresh = [m for m, _ in found if m.id not in self.working and m.id not in self.context]
        if not fresh:
            return []
        vectors = self.archive.vectors([m.id for m in fresh], self.owner)
        entries = [self._entry(m, v) for m, v in zip(fresh, vectors)]
        chosen = self._pick(entries, query, query_vector, now, k)
        for entry in chosen:
            self.working.add(entry)
        ids = [e.id for e in chosen]
        if stamp:
            self._stamp(chosen, now)
        self.events.log(Move.RECALL, ids, now, query=query)
        self._settle_working(now, protected=ids)
        return [e.memory for e in chosen]

    def _stamp(self, entries: list[Entry], now: datetime) -> None:
        """Mark working-memory entries accessed now, here and (for those already written) in the archive."""
        if not entries:
            return
        for entry in entries:
            entry.memory = entry.memory.replace(last_access=now)
        self.archive.touch([e.id for e in entries if e.id not in self.pending], self.owner, now)

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
        t: datetime,
        id: str | None = None,
        kind: str = "observation",
        speaker: str | None = None,
        importance: float | None = None,
        metadata: dict | None = None,
    ) -> Memory:
        """A new message enters the context; the management loop runs.

        The message is embedded and scored for importance (unless given), kept (importance >=
        ``keep_threshold``) or not, written through or buffered, counted towards reflection; then
        context overflow RETAINs the least recent messages into working memory and working-memory
        overflow BURYs the least important.
        """
        if not isinstance(content, str) or not content.strip():
            raise ValueError(f"observe: content must be non-empty text, got {content!r}")
        vector = self._embed([content])[0]
        if importance is None:
            importance = float(self.importance([content], vector[None, :])[0])
        memory = Memory(
            id=id or f"{self.owner}/{uuid.uuid4().hex[:12]}",
            owner=self.owner,
            t=t,
            content=content,
            importance=importance,
            kind=kind,
            agent=speaker,
            metadata=dict(metadata or {}),
        )
        entry = self._entry(memory, vector)
        self.context.add(entry)
        kept = importance >= self.keep_threshold
        self.events.log(Move.OBSERVE, [memory.id], t, importance=importance, tokens=entry.tokens, kept=kept)
        if kept:
            if importance >= self.write_through_threshold:
                self._write([entry], "through", t)
            else:
                self.pending[memory.id] = entry
                if len(self.pending) >= self.batch_size:
                    self.flush(t)
            if self.reflector is not None and self.reflector.add(memory):
                self.reflect(now=t)
        else:
            self.unkept.add(memory.id)
        overflow = self.context.overflow()
        if overflow:
            self.retain([e.id for e in overflow], t)
        return memory

    def context_for(self, query: str, *, now: datetime, k: int | None = None) -> ContextView:
        """What the LLM should see for ``query``: gate, maybe RECALL, then the best of working memory."""
        k = self.k if k is None else int(k)
        query_vector = self._embed([query], "query")[0]
        context_vectors = np.stack([e.vector for e in self.context.entries]) if len(self.context) else np.empty((0, len(query_vector)))
        verdict = self.gate(query_vector, context_vectors)
        self.events.log(Move.GATE, [], now, query=query, recall=verdict.recall, score=verdict.score, gate=self.gate.name)
        recalled = self.recall(query, now=now, k=k, query_vector=query_vector, stamp=False) if verdict.recall else []
        chosen = self._pick(list(self.working.entries.values()), query, query_vector, now, k)
        stamped = {e.id for e in chosen} | {m.id for m in recalled}
        self._stamp([e for e in self.working.entries.values() if e.id in stamped], now)
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

    def reflect(self, *, now: datetime) -> Memory:
        """Write a reflection over the memories since the last one (it links to its evidence)."""
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
        now: datetime,
        start: datetime | None = None,
        end: datetime | None = None,
        min_importance: float = 0.0,
        bury_sources: bool = True,
    ) -> Memory:
        """Summarise working memory's memories of a time window above an importance floor into one.

        The summary links to its sources; with ``bury_sources`` they leave working memory for the
        archive (the summary stands in for them), freeing room.
        """
        candidates = [e.memory for e in self.working.entries.values() if e.memory.kind != "summary"]
        sources = compression.select(candidates, min_importance=min_importance, start=start, end=end)
        summary = compression.summarise(sources, self.llm, owner=self.owner, now=now)
        entry = self._store(summary, now)
        self.events.log(Move.COMPRESS, [summary.id], now, sources=list(summary.links))
        if bury_sources:
            self.bury(summary.links, now)
        self._settle_working(now, protected=[entry.id])
        return summary

    def plan(self, goal: Goal, *, now: datetime, previous: Plan | None = None) -> Plan:
        """A plan for ``goal`` from the memories relevant to it (remade when ``previous`` failed)."""
        view = self.context_for(goal.description, now=now)
        plan = self.planner.plan(goal, list(view.memories), owner=self.owner, now=now, previous=previous)
        self._store(plan.memory, now)
        move = Move.REPLAN if previous is not None else Move.PLAN
        self.events.log(move, [plan.memory.id], now, goal=goal.description, steps=plan.steps, failures=list(goal.failures))
        self._settle_working(now, protected=[plan.memory.id])
        return plan

    def replan(self, plan: Plan, failed_step: str, reason: str, *, now: datetime) -> Plan:
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
        state = json.loads(self.state_path.read_text())
        if state.get("version") != STATE_VERSION or state.get("owner") != self.owner:
            raise ValueError(
                f"manager state {self.state_path} has version {state.get('version')} and owner "
                f"{state.get('owner')!r}; expected version {STATE_VERSION} and owner {self.owner!r}"
            )
        for tier, ids in (("context", state["context"]), ("working", state["working"])):
            memories = self.archive.get(ids, self.owner) if ids else []
            if not memories:
                continue
            vectors = self.archive.vectors([m.id for m in memories], self.owner)
            for memory, vector in zip(memories, vectors):
                (self.context if tier == "context" else self.working).add(self._entry(memory, vector))
        if self.reflector is not None and state.get("reflection"):
            reflection = state["reflection"]
            self.reflector.accumulated = float(reflection["accumulated"])
            self.reflector.pending = self.archive.get(reflection["pending"], self.owner) if reflection["pending"] else []

    def close(self) -> None:
        """Flush the buffer, save the tiers' state next to the archive, and close what we opened."""
        self.flush()
        if self.state_path is not None:
            self.state_path.write_text(json.dumps(self.state(), indent=2) + "\n")
        if self.owns_archive:
            self.archive.close()

    def __enter__(self) -> "MemoryManager":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def pack_components(pack) -> dict:
    """The manager arguments a loaded :class:`~memnets.pack.Pack` supplies.

    ``encoder`` always; ``importance`` (:class:`HeadImportance`) and, from a pack threshold named
    ``"importance"``, ``write_through_threshold``, when the pack has the importance head;
    ``gate`` (:class:`HeadGate`, threshold ``"gate"`` of the pack or the head's own) when it has the
    recall gate; ``scorer`` (``LearnedScorer``) when it has fitted scorer weights.
    """
    from memnets.scoring import LearnedScorer

    thresholds = dict(getattr(pack, "thresholds", None) or {})
    components: dict = {"encoder": pack.encoder}
    if pack.importance is not None:
        components["importance"] = HeadImportance(pack.importance)
        if "importance" in thresholds:
            components["write_through_threshold"] = float(thresholds["importance"])
    if pack.gate is not None:
        components["gate"] = HeadGate(pack.gate, thresholds.get("gate"))
    if getattr(pack, "scorer_weights", None) is not None:
        components["scorer"] = LearnedScorer.from_pack(pack)
    return components
