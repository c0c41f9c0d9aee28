"""memnets.nn.bucketing: encode's batches padded only to their own longest text, the same tokens
as tokenising each batch alone, fewer token positions than batching by characters."""

from __future__ import annotations

import copy

import pytest
import torch

from memnets.nn.bucketing import token_batches
from memnets.training.data.locomo import load_locomo


@pytest.fixture(scope="module")
def turns() -> list[str]:
    return [turn.content for conv in load_locomo()[:2] for turn in conv.turns][:300]


@pytest.mark.parametrize("side", ["right", "left"])
def test_each_batch_is_its_texts_tokenised_alone_and_as_wide_as_its_longest(encoder, turns, side):
    encoder = copy.deepcopy(encoder)
    encoder._padding_tokenizer.padding_side = side
    seen = []
    for index, batch in token_batches(encoder.tokenize, turns, 16, side):
        alone = encoder.tokenize([turns[i] for i in index])
        assert batch["input_ids"].tolist() == alone["input_ids"].tolist()
        assert batch["attention_mask"].tolist() == alone["attention_mask"].tolist()
        seen += index
    assert sorted(seen) == list(range(len(turns)))  # every text in exactly one batch


def test_token_counts_pad_less_than_characters_on_real_turns(encoder, turns):
    def positions(batches) -> int:
        return sum(batch["input_ids"].numel() for _, batch in batches)

    by_characters = sorted(range(len(turns)), key=lambda i: -len(turns[i]))
    character_batches = [
        (None, encoder.tokenize([turns[i] for i in by_characters[s : s + 32]])) for s in range(0, 300, 32)
    ]
    tokens = sum(int(batch["attention_mask"].sum()) for _, batch in character_batches)
    bucketed = positions(token_batches(encoder.tokenize, turns, 32))
    assert tokens <= bucketed < positions(character_batches)


def test_encode_returns_input_order_whatever_the_batches(encoder, turns):
    one_by_one = torch.cat([encoder.encode([text]) for text in turns[:40]])
    torch.testing.assert_close(encoder.encode(turns[:40], batch_size=8), one_by_one, atol=1e-5, rtol=1e-4)


def test_a_bad_padding_side_is_named(encoder):
    with pytest.raises(ValueError, match="padding_side must be 'right' or 'left', got 'middle'"):
        next(token_batches(encoder.tokenize, ["a"], 1, "middle"))


def test_texts_that_fit_one_batch_are_tokenised_once_in_their_order(encoder, turns):
    calls = []

    def tokenize(texts):
        calls.append(texts)
        return encoder.tokenize(texts)

    texts = [turns[5], turns[0], turns[9]]  # not sorted by length
    [(index, batch)] = list(token_batches(tokenize, texts, 3))
    assert calls == [texts] and index == [0, 1, 2]
    assert batch["input_ids"].tolist() == encoder.tokenize(texts)["input_ids"].tolist()
