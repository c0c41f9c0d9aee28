"""Label builders: LoCoMo conversations -> `datasets.Dataset`s for the three supervised tasks.

The labels are exactly those of DESIGN.md:

- retrieval pairs: (question -> each of its evidence turns) and (observation fact -> its source turn);
- importance: a turn is positive when some QA item of its conversation cites it as evidence;
- recall gate: a question placed after its evidence, the context being the last W turns before
  that point; positive when some evidence turn is not in the context (the agent must recall).

`prepare_datasets` builds all three for every split and caches them on disk, keyed by the data
file's checksum and the config, so that a second run loads instead of rebuilding.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import datasets
from datasets import Dataset, DatasetDict, load_from_disk

from memnets.progress import track
from memnets.training.data.config import SPLIT_NAMES, DataConfig
from memnets.training.data.formats import load_conversations
from memnets.training.data.locomo import Conversation, QAItem

TASKS = ("retrieval", "importance", "gate")
BUILDER_VERSION = 1  # bump when a label definition changes, to invalidate caches
GATE_PLACEMENTS = ("after", "near", "anywhere")


def build_retrieval_pairs(conversations: Iterable[Conversation], include_observations: bool = True) -> Dataset:
    """One row per (query, evidence turn): questions with each evidence turn, facts with their source.

    Category is the QA category (1-5), 0 for observation facts; qa_index is -1 for facts.
    """
    rows = []
    for conv in conversations:
        for item in conv.qa:
            for dia_id in item.evidence:
                rows.append(_pair(conv, item.question, "question", dia_id, item.category, item.index))
        if include_observations:
            for fact in conv.observations:
                rows.append(_pair(conv, fact.text, "observation", fact.dia_id, 0, -1))
    return (
        Dataset.from_list(rows, features=None)
        if rows
        else _empty(["conv_id", "query", "query_kind", "positive_id", "positive", "category", "qa_index"])
    )


def _pair(conv: Conversation, query: str, kind: str, dia_id: str, category: int, qa_index: int) -> dict:
    return {
        "conv_id": conv.sample_id,
        "query": query,
        "query_kind": kind,
        "positive_id": dia_id,
        "positive": conv.turn(dia_id).content,
        "category": category,
        "qa_index": qa_index,
    }


def evidence_ids(conv: Conversation) -> set[str]:
    """Every turn that some QA item of the conversation cites: the positives of importance."""
    return {dia_id for item in conv.qa for dia_id in item.evidence}


def build_importance_examples(conversations: Iterable[Conversation]) -> Dataset:
    """One row per turn, label 1 when some QA item of its conversation cites it as evidence."""
    rows = []
    for conv in conversations:
        cited = evidence_ids(conv)
        for position, turn in enumerate(conv.turns):
            rows.append(
                {
                    "conv_id": conv.sample_id,
                    "dia_id": turn.dia_id,
                    "text": turn.content,
                    "speaker": turn.speaker,
                    "session": turn.session,
                    "position": position,
                    "label": int(turn.dia_id in cited),
                }
            )
    return (
        Dataset.from_list(rows)
        if rows
        else _empty(["conv_id", "dia_id", "text", "speaker", "session", "position", "label"])
    )


def gate_positions(last_evidence: int, n_turns: int, window: int, rng: random.Random) -> dict[str, int]:
    """Where a question is asked (it comes after turn `position - 1`), for each placement.

    - after: right after its last evidence turn (the evidence is fresh: mostly negatives);
    - near: a few turns later, up to one window (the evidence is falling out of the context);
    - anywhere: uniformly between right after the evidence and the end of the conversation.
    """
    first = last_evidence + 1
    return {
        "after": first,
        "near": min(n_turns, first + rng.randint(1, window)),
        "anywhere": rng.randint(first, n_turns),
    }


def gate_examples_for_item(conv: Conversation, item: QAItem, windows: Sequence[int], rng: random.Random) -> list[dict]:
    """The recall-gate examples of one question: one per distinct (position, window)."""
    turns = conv.turns
    last_evidence = max(conv.turn_index[dia_id] for dia_id in item.evidence)
    rows, seen = [], set()
    for window in windows:
        for placement, position in gate_positions(last_evidence, len(turns), window, rng).items():
            if (position, window) in seen:
                continue
            seen.add((position, window))
            context = turns[max(0, position - window) : position]
            context_ids = [turn.dia_id for turn in context]
            rows.append(
                {
                    "conv_id": conv.sample_id,
                    "qa_index": item.index,
                    "query": item.question,
                    "position": position,
                    "window": window,
                    "placement": placement,
                    "context_ids": context_ids,
                    "context": [turn.content for turn in context],
                    "evidence_ids": list(item.evidence),
                    "category": item.category,
                    "label": int(not set(item.evidence) <= set(context_ids)),
                }
            )
    return rows


def build_gate_examples(
    conversations: Iterable[Conversation], windows: Sequence[int] = (10, 20, 40), seed: int = 0
) -> Dataset:
    """Recall-gate examples for every QA item with evidence, several windows and placements each."""
    rows = []
    for conv in conversations:
        rng = random.Random(f"{seed}/{conv.sample_id}")  # stable per conversation, whatever else is built
        for item in conv.qa:
            if item.evidence:
                rows.extend(gate_examples_for_item(conv, item, windows, rng))
    columns = [
        "conv_id",
        "qa_index",
        "query",
        "position",
        "window",
        "placement",
        "context_ids",
        "context",
        "evidence_ids",
        "category",
        "label",
    ]
    return Dataset.from_list(rows) if rows else _empty(columns)


def _empty(columns: list[str]) -> Dataset:
    return Dataset.from_dict({column: [] for column in columns})


def build_task(task: str, conversations: list[Conversation], config: DataConfig) -> Dataset:
    if task == "retrieval":
        return build_retrieval_pairs(conversations, include_observations=config.include_observations)
    if task == "importance":
        return build_importance_examples(conversations)
    if task == "gate":
        return build_gate_examples(conversations, windows=config.gate_windows, seed=config.seed)
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def cache_key(config: DataConfig) -> str:
    """A digest of everything the datasets depend on: the data bytes, the config and the builder version."""
    digest = hashlib.sha256(Path(config.path).read_bytes())
    settings = {
        "splits": {name: list(config.splits[name]) for name in SPLIT_NAMES},
        "include_observations": config.include_observations,
        "gate_windows": list(config.gate_windows),
        "seed": config.seed,
        "builder_version": BUILDER_VERSION,
    }
    digest.update(json.dumps(settings, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def prepare_datasets(config: DataConfig, force: bool = False, progress: bool = True) -> dict[str, DatasetDict]:
    """Build (or load from the cache) every task for every split: {task: DatasetDict(split -> Dataset)}."""
    cache = Path(config.cache_dir) / f"locomo-{cache_key(config)}"
    if not force and all((cache / task / "dataset_dict.json").exists() for task in TASKS):
        return {task: load_from_disk(str(cache / task)) for task in TASKS}
    conversations = {conv.sample_id: conv for conv in load_conversations(config.path)}
    missing = [s for name in SPLIT_NAMES for s in config.splits[name] if s not in conversations]
    if missing:
        raise ValueError(
            f"{config.source or 'data config'}: split names conversation(s) {missing} not in {config.path}"
        )
    result = {}
    steps = [(task, split) for task in TASKS for split in SPLIT_NAMES]
    built: dict[str, dict[str, Dataset]] = {task: {} for task in TASKS}
    for task, split in track(steps, desc="building datasets", disable=not progress):
        built[task][split] = build_task(task, [conversations[s] for s in config.splits[split]], config)
    datasets.disable_progress_bars()  # one bar above is enough; saving takes milliseconds
    try:
        for task in TASKS:
            result[task] = DatasetDict(built[task])
            # One shard per split: an empty split saved with zero shards cannot be loaded back.
            result[task].save_to_disk(str(cache / task), num_shards={split: 1 for split in SPLIT_NAMES})
    finally:
        datasets.enable_progress_bars()
    return result
