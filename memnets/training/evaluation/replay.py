"""The replay experiment: stream a LoCoMo conversation through the memory manager, then ask its questions.

Every turn of the conversation enters the manager in order (observe: context overflow RETAINs into
working memory, working overflow BURYs into the archive). Then each question (categories 1-4 by
default; after the whole conversation, or with ``ask="after-evidence"`` ``delay`` turns after its
last evidence turn) is put to ``MemoryManager.context_for``: the recall gate decides whether to
search the archive, and the best memories of working memory join the context. Measured per
question: which share of its evidence turns is in what the LLM would see (context messages +
memories brought to it), and whether an archive search was made.

Rows: the heuristic manager (untrained backbone, heuristic importance, gate and scorer: relevance
alone), the same with Generative Agents' score (recency + relevance + importance, the named
baseline), and with a pack the trained one; ``reference`` adds, for each, the two fixed gates (always / never search) that
bound the searches-versus-recall trade-off. Beside them, "plain vector memory": what users run
today (mem0, a LangGraph store with an embedding function): the untrained backbone, every turn
added as it comes (``AgentMemory.add``), and per question the cosine top-k over everything said
(``AgentMemory.search``), with no tiers, no gate and no context window in view. The settings
(context budget in tokens, far below the conversation's length; working capacity; k) are returned
with the results. Every row runs through ``memnets.open``'s :class:`~memnets.api.AgentMemory` on a
temporary folder. ``memnets replay`` runs it.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np

from memnets.memory.events import Move
from memnets.memory.signals import DEFAULT_GATE_THRESHOLD, FixedGate, HeuristicGate, pack_components
from memnets.nn.embedding_cache import CachedEncoder
from memnets.progress import track
from memnets.training.data.locomo import Conversation, memory_id

logger = logging.getLogger(__name__)


PLAIN = "plain vector memory"
GENERATIVE_AGENTS = "generative agents"  # the heuristic manager with Park et al.'s score, a = (1, 1, 1)


@dataclass
class Setup:
    """One row: a name, the manager's components, and which gate it uses (``"none"``: the plain vector memory)."""

    name: str
    components: dict
    gate_name: str


def open_memory(folder: str | Path, components: dict, settings: dict):
    """An :class:`~memnets.api.AgentMemory` on a fresh folder with a row's components and the replay's settings.

    Turns come with their ids, so no near-duplicate merging happens (an explicit id is the identity).
    """
    from memnets.api import AgentMemory
    from memnets.memory.manager import ManagerConfig
    from memnets.store import open_store

    components = dict(components)
    encoder = components.pop("encoder")
    chosen = {name: components.pop(name) for name in list(components) if name in ManagerConfig.__dataclass_fields__}
    config = ManagerConfig(
        context_budget=settings["context_budget"],
        working_capacity=settings["working_capacity"],
        k=settings["k"],
        batch_size=settings["batch_size"],
        mmr_lambda=settings["mmr_lambda"],
        **({"search": "dense"} | chosen),  # every row ranks by the same cosine, so the rows differ by their gates only
    )  # e.g. the pack's write-through threshold
    return AgentMemory(open_store(folder, encoder.dim), encoder, config=config, owns_store=True, **components)


def replay_conversation(conversation: Conversation, setup: Setup, settings: dict, categories: set[int]) -> dict:
    """Stream the conversation through a fresh memory (temporary folder) and score its questions."""
    if setup.gate_name == "none":
        return replay_plain(conversation, setup, settings, categories)
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="memnets-replay-") as folder,
        open_memory(folder, setup.components, settings) as memory,
    ):
        user = conversation.sample_id
        manager = memory.manager(
            user, resume=False, state_path=Path(folder) / "state.json", events=events_path(settings, setup)
        )
        items = [q for q in conversation.qa if q.category in categories and q.evidence]
        schedule = question_schedule(conversation, items, settings["ask"], settings["delay"])
        questions = []
        for position, turn in enumerate(
            track(conversation.turns, desc=f"{setup.name}: turns", unit="turn", leave=False)
        ):
            manager.observe(turn.content, t=turn.t, id=memory_id(user, turn.dia_id), speaker=turn.speaker)
            for item in schedule.get(position, []):
                questions.append(ask(manager, conversation, item, turn.t + timedelta(minutes=1)))
        manager.flush()
        stream_seconds = time.perf_counter() - started
        now = conversation.turns[-1].t + timedelta(hours=1)
        for item in track(schedule.get(None, []), desc=f"{setup.name}: questions", unit="q", leave=False):
            questions.append(ask(manager, conversation, item, now))
        moves = {
            move.value: manager.events.count(move)
            for move in (Move.RETAIN, Move.BURY, Move.RECALL, Move.SEARCH, Move.WRITE)
        }
        archive_size = memory.store.count(user)
    return row(setup, questions, categories, moves, archive_size, stream_seconds, started)


def replay_plain(conversation: Conversation, setup: Setup, settings: dict, categories: set[int]) -> dict:
    """The plain vector memory: add every turn, answer each question with the cosine top-k of all turns so far."""
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="memnets-replay-") as folder,
        open_memory(folder, setup.components, settings) as memory,
    ):
        user = conversation.sample_id
        items = [q for q in conversation.qa if q.category in categories and q.evidence]
        schedule = question_schedule(conversation, items, settings["ask"], settings["delay"])
        questions = []
        for position, turn in enumerate(
            track(conversation.turns, desc=f"{setup.name}: turns", unit="turn", leave=False)
        ):
            memory.add(turn.content, user=user, t=turn.t, id=memory_id(user, turn.dia_id), agent=turn.speaker)
            questions.extend(
                ask_plain(memory, conversation, item, settings["k"]) for item in schedule.get(position, [])
            )
        stream_seconds = time.perf_counter() - started
        questions.extend(ask_plain(memory, conversation, item, settings["k"]) for item in schedule.get(None, []))
        archive_size = memory.store.count(user)
    moves = {"SEARCH": len(questions), "WRITE": len(conversation.turns)}
    return row(setup, questions, categories, moves, archive_size, stream_seconds, started)


def row(
    setup: Setup,
    questions: list[dict],
    categories: set[int],
    moves: dict,
    archive_size: int,
    stream_seconds: float,
    started: float,
) -> dict:
    """One result row: the summary overall and per category, moves, sizes, timings and every question."""
    return {
        "name": setup.name,
        "gate": setup.gate_name,
        **summarise(questions),
        "by_category": {str(c): summarise([q for q in questions if q["category"] == c]) for c in sorted(categories)},
        "moves": moves,
        "archive_size": archive_size,
        "seconds": {"stream": round(stream_seconds, 2), "total": round(time.perf_counter() - started, 2)},
        "per_question": questions,
    }


def events_path(settings: dict, setup: Setup) -> Path | None:
    """Where a row's event log goes (``--events DIR``), or None to keep it in memory only."""
    if not settings.get("events"):
        return None
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{setup.name}-{setup.gate_name}")
    path = Path(settings["events"]) / f"events-{settings['conversation']}-{name}.jsonl"
    path.unlink(missing_ok=True)
    return path


def question_schedule(conversation: Conversation, items, mode: str, delay: int) -> dict:
    """When each question is asked: key None = after the whole conversation ("end"), else the turn
    position after which it is asked ("after-evidence": ``delay`` turns after its last evidence turn,
    at the latest after the last turn)."""
    if mode == "end":
        return {None: list(items)}
    if mode != "after-evidence":
        raise ValueError(f"ask mode must be 'end' or 'after-evidence', got {mode!r}")
    if delay < 0:
        raise ValueError(f"delay must be a non-negative number of turns, got {delay}")
    schedule: dict = {}
    last = len(conversation.turns) - 1
    for item in items:
        position = min(max(conversation.turn_index[d] for d in item.evidence) + delay, last)
        schedule.setdefault(position, []).append(item)
    return schedule


def ask(manager, conversation: Conversation, item, now) -> dict:
    """Put one question to the manager and record where its evidence was and what came into view."""
    evidence = {memory_id(conversation.sample_id, d) for d in item.evidence}
    in_context_before = evidence & set(manager.context.ids())
    in_working_before = evidence & set(manager.working.ids())
    view = manager.context_for(item.question, now=now)
    seen = evidence & set(view.ids())
    return {
        "index": item.index,
        "category": item.category,
        "evidence": sorted(evidence),
        "searched": view.recalled,
        "gate_score": view.gate_score,
        "needed": len(in_context_before) < len(evidence),
        "archive_only": len(evidence - in_context_before - in_working_before),
        "in_context_before": len(in_context_before),
        "in_working_before": len(in_working_before),
        "in_view": sorted(seen),
        "recall": len(seen) / len(evidence),
    }


def ask_plain(memory, conversation: Conversation, item, k: int) -> dict:
    """Put one question to the plain vector memory: what is in view is its top-k, nothing else."""
    evidence = {memory_id(conversation.sample_id, d) for d in item.evidence}
    hits = memory.search(item.question, user=conversation.sample_id, k=k)
    seen = evidence & {hit.memory.id for hit in hits}
    return {
        "index": item.index,
        "category": item.category,
        "evidence": sorted(evidence),
        "searched": True,
        "gate_score": 1.0,
        "needed": True,
        "archive_only": len(evidence),
        "in_context_before": 0,
        "in_working_before": 0,
        "in_view": sorted(seen),
        "recall": len(seen) / len(evidence),
    }


def summarise(questions: list[dict]) -> dict:
    """Mean evidence recall in view, share with all evidence in view, searches made, and the gate's
    agreement with its label ("needed": some evidence is not in the context, as the gate was trained);
    ``evidence_archive_only``: the mean share of evidence that was in neither context nor working memory."""
    n = len(questions)
    if not n:
        return {"questions": 0}
    searched = [q["searched"] for q in questions]
    needed = [q["needed"] for q in questions]
    return {
        "questions": n,
        "evidence_recall": float(np.mean([q["recall"] for q in questions])),
        "all_evidence": float(np.mean([q["recall"] == 1.0 for q in questions])),
        "searches": int(sum(searched)),
        "search_rate": float(np.mean(searched)),
        "needed": int(sum(needed)),
        "evidence_archive_only": float(np.mean([q["archive_only"] / len(q["evidence"]) for q in questions])),
        "gate_agreement": float(np.mean([s == d for s, d in zip(searched, needed)])),
        "recall_without_search": float(np.mean([q["recall"] for q in questions if not q["searched"]]))
        if not all(searched)
        else None,
    }


def conversation_tokens(conversation: Conversation, tokenizer) -> int:
    return sum(len(tokenizer(turn.content, add_special_tokens=False)["input_ids"]) for turn in conversation.turns)


def build_setups(
    encoder: str | None = None,
    pack: str | Path | None = None,
    heuristic: bool = True,
    reference: bool = False,
    gate_threshold: float = DEFAULT_GATE_THRESHOLD,
) -> list[Setup]:
    """The heuristic manager, the same with Generative Agents' score (the named baseline) and the plain
    vector memory (all on ``encoder``, default the untrained backbone), the pack's manager (if any),
    and with ``reference`` the heuristic and pack managers' always/never-search variants."""
    from memnets.memory.signals import HeuristicImportance
    from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder
    from memnets.scoring import HeuristicScorer

    bases = []
    if heuristic:
        components = {
            "encoder": CachedEncoder(MemoryEncoder.from_pretrained(encoder or DEFAULT_BACKBONE)),
            "importance": HeuristicImportance(),
            "gate": HeuristicGate(gate_threshold),
            "scorer": HeuristicScorer(),
        }
        bases.append(("heuristic", components))
        bases.append((GENERATIVE_AGENTS, {**components, "scorer": HeuristicScorer.generative_agents()}))
        bases.append((PLAIN, {"encoder": components["encoder"]}))
    if pack:
        from memnets.pack import load_pack

        trained = {
            "importance": HeuristicImportance(),
            "gate": HeuristicGate(gate_threshold),
            "scorer": HeuristicScorer(),
        }
        trained.update(pack_components(load_pack(pack)))
        trained["encoder"] = CachedEncoder(trained["encoder"])
        bases.append((f"pack:{Path(pack).name}", trained))
    if not bases:
        raise ValueError("nothing to replay: heuristic=False needs a pack")
    setups = []
    for name, components in bases:
        if name == PLAIN:
            setups.append(Setup(name, components, "none"))
            continue
        setups.append(Setup(name, components, components["gate"].name))
        if reference and name != GENERATIVE_AGENTS:  # the baseline's own row is enough
            for recall in (True, False):
                gate = FixedGate(recall)
                setups.append(Setup(name, {**components, "gate": gate}, gate.name))
    return setups


def replay(
    conversation: Conversation,
    *,
    encoder: str | None = None,
    pack: str | Path | None = None,
    heuristic: bool = True,
    reference: bool = False,
    categories: Iterable[int] = (1, 2, 3, 4),
    context_budget: int = 512,
    working_capacity: int = 50,
    k: int = 5,
    batch_size: int = 32,
    mmr_lambda: float = 1.0,
    gate_threshold: float = DEFAULT_GATE_THRESHOLD,
    ask: str = "end",
    delay: int = 20,
    events: str | Path | None = None,
    data: str | Path | None = None,
) -> dict:
    """Replay ``conversation`` through every setup of :func:`build_setups`: ``{"settings": ..., "rows": [...]}``.

    ``data`` only records where the conversation came from; ``events`` is a folder for each row's
    event log (JSONL), or None to keep the events in memory.
    """
    categories = set(categories)
    setups = build_setups(encoder, pack, heuristic, reference, gate_threshold)
    settings = {
        "conversation": conversation.sample_id,
        "data": str(data) if data is not None else None,
        "turns": len(conversation.turns),
        "questions": sum(1 for q in conversation.qa if q.category in categories and q.evidence),
        "categories": sorted(categories),
        "conversation_tokens": conversation_tokens(conversation, setups[0].components["encoder"].tokenizer),
        "context_budget": context_budget,
        "working_capacity": working_capacity,
        "k": k,
        "ask": ask,
        "delay": delay,
        "batch_size": batch_size,
        "mmr_lambda": mmr_lambda,
        "heuristic_gate_threshold": gate_threshold,
        "pack": str(pack) if pack else None,
        "events": str(events) if events else None,
        "encoder": encoder or "untrained backbone (all-MiniLM-L6-v2)",
    }
    for cached in {id(s.components["encoder"]): s.components["encoder"] for s in setups}.values():
        cached.prefill([turn.content for turn in conversation.turns], "memory")
        cached.prefill([q.question for q in conversation.qa if q.category in categories], "query")
    rows = []
    for setup in setups:
        rows.append(replay_conversation(conversation, setup, settings, categories))
        logger.info(
            "replay %s/%s: evidence recall %.3f",
            setup.name,
            setup.gate_name,
            rows[-1].get("evidence_recall", float("nan")),
        )
    return {"settings": settings, "rows": rows}
