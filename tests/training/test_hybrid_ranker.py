"""Hybrid ranking in the evaluation (memnets.training.retrieval.hybrid_ranker): a dense ranking fused with BM25's."""

from __future__ import annotations

import numpy as np
import pytest

from memnets.training.data.locomo import load_locomo
from memnets.training.retrieval.bm25 import BM25Ranker
from memnets.training.retrieval.dense import DenseRanker
from memnets.training.retrieval.hybrid_ranker import HybridRanker
from memnets.training.retrieval.rankers import build_ranker, parse_spec


class Reversed:
    """Scores the turns in reverse conversation order, whatever the query: the last turn best."""

    def scores(self, conversation, queries):
        return np.tile(np.arange(len(conversation.turns), dtype=np.float64), (len(queries), 1))


@pytest.fixture(scope="module")
def conversation(tiny_locomo_path):
    return load_locomo(tiny_locomo_path)[0]


def test_the_weight_moves_the_ranking_from_the_words_to_the_dense_order(conversation):
    query = ["Who plays the violin?"]  # the words name D1:4 and D2:2; the dense order puts D2:4 first
    ids = [turn.dia_id for turn in conversation.turns]
    assert HybridRanker(Reversed(), weight=1.0).rank(conversation, query) == [ids[::-1]]
    lexical_best = BM25Ranker().rank(conversation, query)[0][0]
    assert lexical_best in {"D1:4", "D2:2"}
    assert HybridRanker(Reversed(), weight=0.0).rank(conversation, query)[0][0] == lexical_best
    assert HybridRanker(Reversed(), weight=0.5).rank(conversation, query)[0][0] == lexical_best
    # reciprocal ranks: D2:2, third by dense and found by its words, above D2:4 (dense first, no word)
    assert HybridRanker(Reversed(), rule="rrf").rank(conversation, query)[0][0] == "D2:2"


def test_only_the_candidates_of_depth_are_fused(conversation):
    query = ["Who plays the violin?"]
    # depth 1: the dense best (D2:4) and the lexical best; D1:4, the other turn with the word, is not a
    # candidate and keeps its dense place
    ranked = HybridRanker(Reversed(), weight=0.0, depth=1).rank(conversation, query)[0]
    lexical = BM25Ranker().rank(conversation, query)[0][0]
    assert ranked[0] == lexical and ranked[1] == "D2:4"
    assert ranked[2:] == [i for i in [t.dia_id for t in conversation.turns][::-1] if i not in {lexical, "D2:4"}]


def test_the_spec_builds_a_hybrid_of_an_encoder_and_names_bad_settings(tiny_model_dir, conversation):
    assert parse_spec(f"h=hybrid:{tiny_model_dir}") == ("h", "hybrid", str(tiny_model_dir))
    ranker = build_ranker("hybrid", str(tiny_model_dir))
    assert isinstance(ranker, HybridRanker) and isinstance(ranker.dense, DenseRanker)
    ranked = ranker.rank(conversation, ["Where is Ann moving?", "What breed is Ann's dog?"])
    assert [sorted(r) for r in ranked] == [sorted(t.dia_id for t in conversation.turns)] * 2
    with pytest.raises(ValueError, match="hybrid_learned needs a pack folder"):
        build_ranker("hybrid_learned")
    with pytest.raises(ValueError, match="rule must be one of"):
        HybridRanker(Reversed(), rule="max")
    with pytest.raises(ValueError, match="weight must be a number in"):
        HybridRanker(Reversed(), weight=1.5)
    with pytest.raises(ValueError, match="depth must be a positive int or None"):
        HybridRanker(Reversed(), depth=0)
