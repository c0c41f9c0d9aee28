"""The time feature of the scorers: weighed by fitted weights, absent (and 0) from weights saved before it.

Memory vectors are given and tie on the cosine where the test is about time, so the order is the
time feature's alone.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np

from memnets.records import Memory
from memnets.scoring import FEATURES, ScorerWeights, WeightedScorer, fit_scorer_weights, time_column
from memnets.temporal.dates import DATES_KEY, date_metadata
from memnets.temporal.questions import _resolved, asks_about_time

NOW = datetime(2023, 5, 20, 12, 0)
WHEN = "When did Caroline go to the support group?"
TIME = FEATURES.index("time")
QUERY = np.array([1.0, 0.0], dtype=np.float32)


def _memories() -> list[Memory]:
    texts = ["Caroline: I love the support group", "Caroline: I went to the support group yesterday"]
    return [
        Memory(id=f"m{i}", owner="o", t=NOW - timedelta(days=12 - i), content=text, importance=0.5)
        for i, text in enumerate(texts)
    ]


TIED = np.array([[1.0, 0.0], [1.0, 0.0]], dtype=np.float32)


def test_weights_saved_before_the_time_feature_load_with_it_at_zero_and_score_as_before(tmp_path):
    saved = {"recency": 0.5, "relevance": 2.0, "importance": 1.0, "bias": -1.0, "decay": 0.995, "normalize": True}
    (tmp_path / "scorer_weights.json").write_text(json.dumps(saved | {"info": {}}))
    weights = ScorerWeights.load(tmp_path / "scorer_weights.json")
    assert weights.time == 0.0

    memories = _memories()
    vectors = np.array([[0.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    scores = WeightedScorer(weights=weights).score(memories, WHEN, NOW, query_vector=QUERY, memory_vectors=vectors)
    # the three features by hand, min-max normalised over the two memories: the older is 0, the newer 1
    by_hand = 0.5 * np.array([0.0, 1.0]) + 2.0 * np.array([0.0, 1.0]) + 1.0 * np.array([0.5, 0.5]) - 1.0
    np.testing.assert_allclose(scores, by_hand, atol=1e-9)


def test_the_time_feature_is_computed_only_when_weighed_or_fitted():
    memories = _memories()
    unweighted = WeightedScorer(weights=ScorerWeights())
    assert unweighted.features(memories, WHEN, NOW, query_vector=QUERY, memory_vectors=TIED)[:, TIME].tolist() == [0, 0]
    fitting = unweighted.features(memories, WHEN, NOW, query_vector=QUERY, memory_vectors=TIED, with_time=True)
    assert fitting[:, TIME].tolist() == [0.0, 1.0]  # the memory that dates its event ("yesterday")


def test_a_time_weight_lifts_the_memory_that_dates_its_event_for_a_when_question_only():
    memories = _memories()
    scorer = WeightedScorer(weights=ScorerWeights(recency=0.0, relevance=1.0, importance=0.0, time=0.5))
    when = scorer.score(memories, WHEN, NOW, query_vector=QUERY, memory_vectors=TIED)
    assert when[1] - when[0] == 0.5
    other = scorer.score(memories, "What does Caroline love?", NOW, query_vector=QUERY, memory_vectors=TIED)
    assert other[0] == other[1]


def test_a_question_without_a_time_signal_reads_no_memory_dates():
    """Most questions neither ask when nor name a time: their time column is zeros without a memory's text
    resolved (the costliest step of scoring a memory the search meets for the first time)."""
    text = "Caroline: the support group met on 2023-05-07, a text no other test resolves"
    memories, other = [Memory(id="m", owner="o", t=NOW, content=text)], "What does Caroline love?"
    for question in (other, WHEN):
        asks_about_time(question, NOW)  # the questions' own dates, read once and kept
    resolved = _resolved.cache_info().misses  # texts resolved so far (the memory's is new)
    assert time_column(memories, other, NOW).tolist() == [0.0]
    assert _resolved.cache_info().misses == resolved  # the memory's dates were not read
    assert time_column(memories, WHEN, NOW).tolist() == [1.0]  # a when-question still reads them
    assert _resolved.cache_info().misses == resolved + 1


def test_the_dates_the_write_path_stored_count_over_the_text():
    """A memory whose metadata holds resolved dates (the manager's resolve_dates option) is dated by
    them: "see you then", written in March, names no time; its stored dates say April."""
    written = datetime(2023, 3, 21, 9, 0)
    stored = date_metadata("next month", written)
    assert stored[DATES_KEY][0]["start"] == "2023-04-01"
    memory = Memory(id="m", owner="o", t=written, content="Ann: see you then", metadata=stored)
    scorer = WeightedScorer(weights=ScorerWeights(time=1.0))
    question = "What did Ann do in April?"
    dated = scorer.features([memory], question, NOW, query_vector=QUERY, memory_vectors=TIED[:1])
    bare = scorer.features([memory.replace(metadata={})], question, NOW, query_vector=QUERY, memory_vectors=TIED[:1])
    assert (dated[0, TIME], bare[0, TIME]) == (1.0, 0.0)


def test_fitting_gives_the_time_feature_its_weight_when_dated_memories_are_the_evidence():
    rng = np.random.default_rng(0)
    examples = []
    for q in range(40):
        n = 12
        dated = rng.choice(n, size=3, replace=False)
        memories = [
            Memory(
                id=f"{q}-{i}",
                owner="o",
                t=NOW - timedelta(days=int(rng.integers(1, 60))),
                content=f"Ann: we met {'yesterday' if i in dated else 'at the cafe'} ({i})",
                importance=0.5,
            )
            for i in range(n)
        ]
        vectors = rng.standard_normal((n, 8))
        evidence = np.isin(np.arange(n), dated[:1])  # one of the dated memories is the answer
        examples.append((memories, f"When did Ann meet Bob ({q})?", NOW, evidence, rng.standard_normal(8), vectors))
    weights = fit_scorer_weights(examples, WeightedScorer(), info={"split": "synthetic"})
    assert weights.time > 1.0 and weights.time > 3 * max(abs(weights.recency), abs(weights.relevance))
    assert "time" not in weights.info["constant_features"]
