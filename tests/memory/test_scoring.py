"""Scorers: Generative Agents' formula by hand, interchangeability, fitted weights, the LoCoMo ranker."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from memnets.records import Memory
from memnets.scoring import (
    FEATURES,
    HeuristicScorer,
    LearnedScorer,
    ScorerWeights,
    WeightedScorer,
    fit_scorer_weights,
    min_max,
    recency,
)
from memnets.timeutil import as_utc

NOW = datetime(2024, 1, 10, 12, 0)


def memories(hours_ago=(0, 10, 100), importance=(0.2, 0.9, 0.5)) -> list[Memory]:
    return [
        Memory(id=f"m{i}", owner="o", t=NOW - timedelta(hours=h), content=f"memory {i}", importance=imp)
        for i, (h, imp) in enumerate(zip(hours_ago, importance))
    ]


QUERY = np.array([1.0, 0.0, 0.0], dtype=np.float32)
VECTORS = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [2.0, 0.0, 0.0]], dtype=np.float32)  # cosines 0, .707, 1


def test_heuristic_matches_generative_agents_formula_by_hand():
    mems = memories()
    scores = HeuristicScorer.generative_agents().score(mems, "q", NOW, query_vector=QUERY, memory_vectors=VECTORS)
    rec = 0.995 ** np.array([0, 10, 100])
    rel = np.array([0.0, 1 / np.sqrt(2), 1.0])
    imp = np.array([0.2, 0.9, 0.5])

    def norm(v):
        return (v - v.min()) / (v.max() - v.min())

    np.testing.assert_allclose(scores, norm(rec) + norm(rel) + norm(imp), atol=1e-6)
    weighted = HeuristicScorer(a=(0.0, 2.0, 0.0)).score(mems, "q", NOW, query_vector=QUERY, memory_vectors=VECTORS)
    np.testing.assert_allclose(weighted, 2 * norm(rel), atol=1e-6)


def test_recency_uses_last_access_and_never_exceeds_one():
    mems = memories(hours_ago=(5, 5, 5))
    mems[1] = mems[1].replace(last_access=NOW)
    mems[2] = mems[2].replace(last_access=NOW + timedelta(hours=3))  # accessed "after" now counts as now
    np.testing.assert_allclose(recency(mems, NOW, 0.5), [0.5**5, 1.0, 1.0])
    np.testing.assert_allclose(min_max(np.array([3.0, 3.0])), [0.5, 0.5])
    np.testing.assert_allclose(min_max(np.array([3.0, 3.0]), fill=1.0), [1.0, 1.0])
    np.testing.assert_allclose(min_max(np.array([1.0, 3.0, 2.0])), [0.0, 1.0, 0.5])


def test_scorer_weights_round_trip_and_validation(tmp_path):
    weights = ScorerWeights(recency=0.1, relevance=3.0, importance=-0.2, bias=-1.5, info={"split": "validation"})
    assert ScorerWeights.load(weights.save(tmp_path / "w.json")) == weights
    with pytest.raises(ValueError, match="decay"):
        ScorerWeights(decay=1.5)
    with pytest.raises(ValueError, match="relevance must be a finite number"):
        ScorerWeights(relevance=float("nan"))
    (tmp_path / "bad.json").write_text('{"recency": 1, "relevance": 1}')
    with pytest.raises(ValueError, match=r"bad.json: .*missing keys \['importance'\]"):
        ScorerWeights.load(tmp_path / "bad.json")


def test_scorer_without_encoder_needs_vectors_and_checks_shapes():
    scorer = HeuristicScorer()
    with pytest.raises(ValueError, match="no encoder"):
        scorer.score(memories(), "q", NOW)
    with pytest.raises(ValueError, match=r"memory_vectors must have shape \[3, dim\]"):
        scorer.score(memories(), "q", NOW, query_vector=QUERY, memory_vectors=VECTORS[:2])
    with pytest.raises(ValueError, match="dim 3 but memory_vectors have dim 2"):
        scorer.score(memories(), "q", NOW, query_vector=QUERY, memory_vectors=VECTORS[:, :2])
    assert scorer.score([], "q", NOW).shape == (0,)


class HalfHead:
    """A stand-in importance head with the real head's predict_proba signature: p = sigmoid(x[:, 0])."""

    def predict_proba(self, embeddings: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-embeddings[:, 0]))


def test_scorers_are_interchangeable_with_a_real_encoder(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    mems = memories()
    learned = LearnedScorer(
        encoder, ScorerWeights(recency=0.5, relevance=2.0, importance=1.0), importance_head=HalfHead()
    )
    for scorer in (HeuristicScorer(encoder), learned):
        encoded = scorer.score(mems, "what happened?", NOW)
        given = scorer.score(
            mems,
            "what happened?",
            NOW,
            query_vector=encoder.encode(["what happened?"], kind="query"),
            memory_vectors=encoder.encode([m.content for m in mems]),
        )
        assert encoded.shape == (3,) and np.isfinite(encoded).all()
        np.testing.assert_allclose(encoded, given, atol=1e-5)
    # the head's probability, not the stored importance, drives the learned scorer's importance feature
    features = learned.features(mems, "q", NOW, query_vector=QUERY, memory_vectors=VECTORS)
    np.testing.assert_allclose(features[:, FEATURES.index("importance")], min_max(HalfHead().predict_proba(VECTORS)))


def test_fit_scorer_weights_learns_which_feature_predicts_evidence():
    rng = np.random.default_rng(0)
    scorer = WeightedScorer()
    examples = []
    for q in range(30):
        n = 20
        hours = rng.uniform(0, 500, n)
        mems = [
            Memory(
                id=f"{q}-{i}",
                owner="o",
                t=NOW - timedelta(hours=float(h)),
                content="x",
                importance=float(rng.uniform()),
            )
            for i, h in enumerate(hours)
        ]
        vectors = rng.standard_normal((n, 8))
        query = rng.standard_normal(8)
        labels = np.argsort(-(vectors @ query) / np.linalg.norm(vectors, axis=1))[:2]  # the 2 most similar
        examples.append((mems, f"q{q}", NOW, np.isin(np.arange(n), labels), query, vectors))
    weights = fit_scorer_weights(examples, scorer, info={"split": "synthetic"})
    assert weights.relevance > 3 * max(abs(weights.recency), abs(weights.importance))
    assert weights.info["queries"] == 30 and weights.info["positives"] == 60 and weights.info["split"] == "synthetic"
    with pytest.raises(ValueError, match="both classes"):
        fit_scorer_weights([(e[0], e[1], e[2], [False] * 20, e[4], e[5]) for e in examples], scorer)


def test_scorer_ranker_on_tiny_locomo(tiny_locomo_path, tiny_model_dir):
    from memnets.memory.signals import HeuristicImportance
    from memnets.nn.encoder import MemoryEncoder
    from memnets.training.data.locomo import load_locomo
    from memnets.training.retrieval.metrics import evaluate_retriever
    from memnets.training.retrieval.scored import ScorerRanker, conversation_now, turn_memories

    conversations = load_locomo(tiny_locomo_path)
    conv = conversations[0]
    mems = turn_memories(conv, HeuristicImportance())
    assert [m.t for m in mems] == [as_utc(turn.t) for turn in conv.turns] and all(0 <= m.importance <= 1 for m in mems)
    assert [m.importance for m in mems] == [HeuristicImportance().score_text(turn.content) for turn in conv.turns]
    assert {m.importance for m in turn_memories(conv)} == {0.5}
    assert conversation_now(conv) == max(turn.t for turn in conv.turns)
    ranker = ScorerRanker(HeuristicScorer(MemoryEncoder.from_pretrained(tiny_model_dir)), name="heuristic")
    rankings = ranker.rank(conv, ["a question", "another"])
    assert len(rankings) == 2 and all(sorted(r) == sorted(t.dia_id for t in conv.turns) for r in rankings)
    report = evaluate_retriever(ranker, conversations, name="heuristic")
    assert 0.0 <= report.overall["recall@5"] <= 1.0 and report.counts["questions"] == 5
    weights = fit_scorer_weights(ranker.fit_examples(conversations), ranker.scorer)
    assert weights.info["queries"] == 5 and weights.info["positives"] == 7
    # constant importance (no head) cannot be weighed: weight 0, not a share of the bias
    assert weights.importance == 0.0 and weights.info["constant_features"] == ["importance"]
