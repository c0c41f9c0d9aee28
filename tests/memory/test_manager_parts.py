"""The manager's parts on their own: MMR against a hand computation, the heuristic signals, the
tiers' overflow rules, the event log, compression's selection and plan parsing."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from memnets.memory.compression import select
from memnets.memory.events import EventLog, Move
from memnets.memory.mmr import mmr, mmr_current_first
from memnets.memory.planning import parse_steps
from memnets.memory.signals import FixedGate, HeuristicGate, HeuristicImportance
from memnets.memory.tiers import ContextWindow, Entry, WorkingMemory
from memnets.records import Memory

T0 = datetime(2023, 1, 1)


def memory(i: int, importance: float = 0.5, minutes: int | None = None) -> Memory:
    return Memory(
        id=f"m{i}",
        owner="o",
        t=T0 + timedelta(minutes=i if minutes is None else minutes),
        content=f"text {i}",
        importance=importance,
    )


def test_mmr_matches_a_hand_computation():
    # v1 is nearly a copy of v0 (cos 0.96), v2 is orthogonal to v0 and has cos 0.28 with v1
    vectors = np.array([[1.0, 0.0], [0.96, 0.28], [0.0, 1.0]])
    relevance = np.array([0.9, 0.85, 0.5])
    # lambda 0.5: step 1 picks 0 (0.45 > 0.425 > 0.25); step 2: v1 -> 0.425 - 0.48 = -0.055,
    # v2 -> 0.25 - 0 = 0.25, so v2; step 3 leaves v1
    assert mmr(vectors, relevance, 3, lambda_=0.5) == [0, 2, 1]
    # lambda 1 is plain ranking by relevance; k caps the length
    assert mmr(vectors, relevance, 2, lambda_=1.0) == [0, 1]
    # lambda 0.9: v1 -> 0.765 - 0.096 = 0.669 beats v2 -> 0.45
    assert mmr(vectors, relevance, 2, lambda_=0.9) == [0, 1]
    assert mmr(vectors, relevance, 10, lambda_=0.5) == [0, 2, 1]  # k beyond N returns all N


def test_mmr_current_first_takes_a_search_s_likely_replacements_as_it_takes_decided_ones():
    """m0 answers in m2's place for this search (``links``): m2 is no MMR candidate, though the most diverse (it
    would come second, before the near copy m1), and it comes right after m0 where places are left."""
    memories = [memory(0), memory(1), memory(2)]
    vectors = np.array([[1.0, 0.0], [0.96, 0.28], [0.0, 1.0]])
    scores = np.array([0.9, 0.85, 0.9])  # m0 shows m2's score: it answers in its place
    relevance = scores
    assert mmr_current_first(memories, vectors, relevance, scores, 2, lambda_=0.5) == [0, 2]
    assert mmr_current_first(memories, vectors, relevance, scores, 2, lambda_=0.5, links={"m2": "m0"}) == [0, 1]
    assert mmr_current_first(memories, vectors, relevance, scores, 3, lambda_=0.5, links={"m2": "m0"}) == [0, 2, 1]


def test_mmr_rejects_bad_input():
    with pytest.raises(ValueError, match="relevance"):
        mmr(np.ones((3, 2)), np.ones(2), 1)
    with pytest.raises(ValueError, match="lambda_"):
        mmr(np.ones((3, 2)), np.ones(3), 1, lambda_=1.5)


def test_heuristic_importance_by_hand():
    importance = HeuristicImportance(full_length=10)
    # 2 words (0.5 * 0.2), nothing specific or personal
    assert importance.score_text("Ann: Wow, nice!") == pytest.approx(0.1)
    # 10 words (0.5), a number (0.25), first person (0.25)
    assert importance.score_text("Bob: I moved to the city in 2019 with my family") == pytest.approx(1.0)
    # a capitalised word mid-sentence counts as a name; the speaker prefix is not counted
    assert importance.score_text("She visited Lisbon") == pytest.approx(0.5 * 0.3 + 0.25)
    assert importance(["Ann: Wow, nice!"]).shape == (1,)


def test_heuristic_gate_thresholds_the_best_context_match():
    gate = HeuristicGate(threshold=0.5)
    query = np.array([1.0, 0.0])
    verdict = gate(query, np.array([[0.6, 0.8], [0.0, 1.0]]))
    assert not verdict.recall and verdict.score == pytest.approx(0.4)
    verdict = gate(query, np.array([[0.28, 0.96]]))
    assert verdict.recall and verdict.score == pytest.approx(0.72)
    assert gate(query, np.empty((0, 2))).recall
    assert FixedGate(True)(query, np.empty((0, 2))).recall and not FixedGate(False)(query, np.empty((0, 2))).recall
    with pytest.raises(ValueError, match="cosine"):
        HeuristicGate(threshold=2.0)


def entry(i: int, tokens: int, importance: float = 0.5, minutes: int | None = None) -> Entry:
    return Entry(memory(i, importance, minutes), np.zeros(2, dtype=np.float32), tokens)


def test_context_window_spills_oldest_first():
    window = ContextWindow(budget=10)
    for i, tokens in enumerate([4, 3, 5, 2]):
        window.add(entry(i, tokens))
    # 14 tokens: dropping m0 (4) leaves 10, which fits
    assert [e.id for e in window.overflow()] == ["m0"]
    window.add(entry(4, 6))  # 20 tokens: m0, m1 (7) leaves 13; m2 (5) leaves 8
    assert [e.id for e in window.overflow()] == ["m0", "m1", "m2"]


def test_working_memory_policies_and_protection():
    working = WorkingMemory(capacity=2)
    working.add(entry(0, 1, importance=0.3, minutes=5))
    working.add(entry(1, 1, importance=0.3, minutes=1))
    working.add(entry(2, 1, importance=0.9, minutes=0))
    working.add(entry(3, 1, importance=0.1, minutes=9))
    # least important: m3 (0.1), then among the 0.3s the least recent, m1
    assert [e.id for e in working.overflow()] == ["m3", "m1"]
    assert [e.id for e in working.overflow(protected=["m3"])] == ["m1", "m0"]
    recent = WorkingMemory(capacity=3, overflow_policy="least_recent")
    for e in working.entries.values():
        recent.add(e)
    assert [e.id for e in recent.overflow()] == ["m2"]


def test_event_log_counts_and_reads_back(tmp_path):
    log = EventLog(tmp_path / "sub" / "events.jsonl")
    log.log(Move.RETAIN, ["a"], T0)
    log.log(Move.BURY, ["a", "b"], None, importance=[0.1, 0.2])
    assert log.count(Move.BURY) == 1 and len(log) == 2
    back = EventLog.read(tmp_path / "sub" / "events.jsonl")
    assert back == log.events


def test_compression_selects_a_window_above_an_importance_floor():
    memories = [memory(3, 0.9), memory(1, 0.2), memory(2, 0.6), memory(5, 0.9)]
    chosen = select(memories, min_importance=0.5, start=T0 + timedelta(minutes=1), end=T0 + timedelta(minutes=5))
    assert [m.id for m in chosen] == ["m2", "m3"]
    with pytest.raises(ValueError, match="window is empty"):
        select(memories, start=T0, end=T0)


def test_plan_steps_are_parsed_from_numbered_lines_or_sentences():
    assert parse_steps("1. call the shop\n2) buy strings\n- tune it", 5) == ["call the shop", "buy strings", "tune it"]
    assert parse_steps("[extractive] Find a teacher. Practise daily.", 5) == ["Find a teacher.", "Practise daily."]
    assert parse_steps("a\nb\nc", 2) == ["a", "b"]
