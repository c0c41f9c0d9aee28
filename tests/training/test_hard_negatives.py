"""Hard-negative mining: never a positive of the query, margin against false negatives, caching."""

from __future__ import annotations

import pytest

from memnets.nn.encoder import MemoryEncoder
from memnets.training.data.builders import build_retrieval_pairs
from memnets.training.data.locomo import load_locomo
from memnets.training.retrieval.hard_negatives import (
    cached_hard_negatives,
    mine_hard_negatives,
    query_positives,
)


@pytest.fixture(scope="module")
def data(tiny_locomo_path):
    conversations = {c.sample_id: c for c in load_locomo(tiny_locomo_path)}
    return conversations, build_retrieval_pairs(conversations.values()).to_list()


@pytest.mark.parametrize("miner", ["bm25", "encoder"])
def test_negatives_are_same_conversation_non_positives(data, miner, tiny_model_dir):
    conversations, pairs = data
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir) if miner == "encoder" else None
    mined = mine_hard_negatives(pairs, conversations, miner=miner, encoder=encoder, top_k=2, progress=False)
    positives = query_positives(pairs)
    assert len(mined) == len(pairs)
    for row, negatives in zip(pairs, mined):
        turns = {t.dia_id for t in conversations[row["conv_id"]].turns}
        own = positives[(row["conv_id"], row["query"])]
        assert negatives and set(negatives) <= turns - own and len(set(negatives)) == len(negatives)
        assert len(negatives) == min(2, len(turns - own))


def test_margin_drops_turns_scoring_like_the_positive(data, tiny_model_dir):
    conversations, pairs = data
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    row = next(r for r in pairs if r["query_kind"] == "question")
    conv = conversations[row["conv_id"]]
    scores = (encoder.encode([row["query"]], kind="query") @ encoder.encode([t.content for t in conv.turns]).T)[0]
    positive = scores[conv.turn_index[row["positive_id"]]].item()
    own = query_positives(pairs)[(row["conv_id"], row["query"])]
    margin = 0.5
    mined = mine_hard_negatives([row], conversations, encoder=encoder, top_k=1, relative_margin=margin, progress=False)[
        0
    ]
    allowed = [
        t.dia_id for t, s in zip(conv.turns, scores.tolist()) if t.dia_id not in own and s < (1 - margin) * positive
    ]
    if allowed:  # the best allowed turn, never one scoring above the margin
        best = max(allowed, key=lambda d: scores[conv.turn_index[d]].item())
        assert mined == [best]


def test_cache_returns_the_same_and_bad_settings_are_named(data, tmp_path):
    conversations, pairs = data
    first = cached_hard_negatives(tmp_path, pairs, conversations, miner="bm25", top_k=2, progress=False)
    assert list((tmp_path / "hard_negatives").glob("*.json"))
    assert cached_hard_negatives(tmp_path, pairs, conversations, miner="bm25", top_k=2, progress=False) == first
    with pytest.raises(ValueError, match="miner"):
        mine_hard_negatives(pairs, conversations, miner="random")
    with pytest.raises(ValueError, match="needs an encoder"):
        mine_hard_negatives(pairs, conversations, miner="encoder")
    with pytest.raises(ValueError, match="conversations"):
        mine_hard_negatives(pairs, {}, miner="bm25")
