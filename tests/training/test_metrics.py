"""Retrieval metrics pinned on hand-computed examples."""

import math

import pytest

from memnets.training.data.locomo import load_locomo
from memnets.training.retrieval.metrics import evaluate_retriever, mrr_at_k, ndcg_at_k, recall_at_k

RANKED = ["a", "b", "c", "d", "e", "f"]
RELEVANT = {"b", "e", "z"}  # "z" is never retrieved


def test_recall_at_k_is_the_share_of_evidence_in_the_top_k():
    assert recall_at_k(RANKED, RELEVANT, 1) == 0.0
    assert recall_at_k(RANKED, RELEVANT, 2) == pytest.approx(1 / 3)
    assert recall_at_k(RANKED, RELEVANT, 5) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, RELEVANT, 50) == pytest.approx(2 / 3)


def test_mrr_is_the_inverse_rank_of_the_first_hit_within_k():
    assert mrr_at_k(RANKED, RELEVANT, 10) == 0.5
    assert mrr_at_k(RANKED, RELEVANT, 1) == 0.0
    assert mrr_at_k(RANKED, {"f"}, 5) == 0.0


def test_ndcg_by_hand():
    dcg = 1 / math.log2(3) + 1 / math.log2(6)  # hits at ranks 2 and 5
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # three relevant at ranks 1-3
    assert ndcg_at_k(RANKED, RELEVANT, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(["b", "e", "z"], RELEVANT, 10) == pytest.approx(1.0)


def test_metrics_reject_empty_evidence_and_bad_k():
    with pytest.raises(ValueError, match="relevant"):
        recall_at_k(RANKED, set(), 5)
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k(RANKED, RELEVANT, 0)


class ChronologicalRanker:
    """Ranks every query's turns in conversation order: a fixed ranking to compute by hand."""

    def rank(self, conversation, queries):
        return [[turn.dia_id for turn in conversation.turns] for _ in queries]


def test_evaluate_retriever_averages_per_question_and_per_category(tiny_locomo_path):
    report = evaluate_retriever(ChronologicalRanker(), load_locomo(tiny_locomo_path), name="chrono")
    # categories 1-4 with evidence: tiny-1 qa0 (D1:3 @3), qa1 (D1:1 @1, D2:1 @5), qa2 (D1:4 @4, D2:2 @6),
    # qa3 (D2:3 @7); tiny-2 qa0 (D1:1 @1). qa4 is category 5 and is not scored.
    assert report.counts["questions"] == 5
    assert report.overall["recall@1"] == pytest.approx((0 + 0.5 + 0 + 0 + 1) / 5)
    assert report.overall["recall@5"] == pytest.approx((1 + 1 + 0.5 + 0 + 1) / 5)
    assert report.overall["mrr@10"] == pytest.approx((1 / 3 + 1 + 1 / 4 + 1 / 7 + 1) / 5)
    assert report.by_category[4]["recall@1"] == pytest.approx(1 / 3)
    assert report.by_category[2]["recall@1"] == pytest.approx(0.5)
    assert set(report.by_category) == {1, 2, 4}


def test_evaluate_retriever_rejects_a_ranker_that_drops_queries(tiny_locomo_path):
    class Broken:
        def rank(self, conversation, queries):
            return []

    with pytest.raises(ValueError, match="0 rankings"):
        evaluate_retriever(Broken(), load_locomo(tiny_locomo_path), name="broken")
