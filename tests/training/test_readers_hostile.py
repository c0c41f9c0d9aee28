"""Readers and metrics that must not count wrong: a LoCoMo file with repeated or colliding ids is
refused with an error naming them, and no metric can leave [0, 1]."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memnets.training.data.jsonl import JsonlFormatError, load_jsonl
from memnets.training.data.locomo import LocomoFormatError, load_locomo
from memnets.training.retrieval.metrics import mrr_at_k, ndcg_at_k, question_metrics, recall_at_k


def _write(tmp_path, tiny_locomo_path, change):
    data = json.loads(tiny_locomo_path.read_text())
    change(data)
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data, indent=1))  # non-ASCII as \u escapes, as a lone surrogate must be
    return path


def test_a_repeated_dia_id_is_refused(tmp_path, tiny_locomo_path):
    """Before: accepted, and a ranker listing both turns scored nDCG@10 above 1."""

    def change(data):
        data[0]["conversation"]["session_2"][0]["dia_id"] = "D1:1"

    with pytest.raises(
        LocomoFormatError, match=r"sample tiny-1, field session_2\[0\]: field 'dia_id' 'D1:1' repeats session_1\[0\]"
    ):
        load_locomo(_write(tmp_path, tiny_locomo_path, change))


def test_a_repeated_sample_id_is_refused(tmp_path, tiny_locomo_path):
    def change(data):
        data[1]["sample_id"] = data[0]["sample_id"]

    with pytest.raises(
        LocomoFormatError, match=r"item 1 \(line \d+\).*field 'sample_id' 'tiny-1' repeats item 0 \(line 2\)"
    ):
        load_locomo(_write(tmp_path, tiny_locomo_path, change))


@pytest.mark.parametrize(
    ("key", "message"),
    [("session_01", "'session_1' and 'session_01' are both session 1"), ("session_١", "ASCII digits")],
)
def test_session_keys_that_collide_are_refused(tmp_path, tiny_locomo_path, key, message):
    def change(data):
        conversation = data[0]["conversation"]
        conversation[key] = [{"speaker": "Ann", "dia_id": "D9:1", "text": "hidden"}]
        conversation[f"{key}_date_time"] = "1:56 pm on 8 May, 2023"

    with pytest.raises(LocomoFormatError, match=message):
        load_locomo(_write(tmp_path, tiny_locomo_path, change))


def test_a_ranking_that_repeats_an_item_is_refused():
    with pytest.raises(ValueError, match=r"ranked repeats \['a'\] in its top 10"):
        ndcg_at_k(["a", "a", "b"], {"a", "b"}, 10)
    assert ndcg_at_k(["a", "b", "b"], {"a"}, 2) == 1.0  # a repeat beyond the top k is not counted
    with pytest.raises(ValueError, match="repeats"):
        recall_at_k(["a", "a"], {"a"}, 2)


ids = st.sampled_from("abcdefgh")  # few ids, so that rankings with and without repeats both come up


@given(
    ranked=st.lists(ids, max_size=12),
    relevant=st.sets(ids, min_size=1),
    k=st.integers(min_value=1, max_value=12),
)
@example(ranked=["a", "a"], relevant={"a"}, k=2)  # the reader's repeated dia_id: nDCG@10 came out 1.63
@settings(max_examples=300)
def test_metrics_stay_within_zero_and_one(ranked, relevant, k):
    """Any ranking, repeats included: each metric is in [0, 1], or the ranking is refused for its repeats."""
    for metric in (recall_at_k, mrr_at_k, ndcg_at_k):
        try:
            value = metric(ranked, relevant, k)
        except ValueError as error:
            assert "repeats" in str(error) and len(set(ranked[:k])) < len(ranked[:k])
            continue
        assert 0.0 <= value <= 1.0
    if len(set(ranked)) == len(ranked):
        assert all(0.0 <= v <= 1.0 for v in question_metrics(ranked, relevant).values())


JSONL = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_conversations.jsonl"
DEEP = "[" * 100_000 + "]" * 100_000


def _jsonl(tmp_path, change=None, raw=None):
    records = [json.loads(line) for line in JSONL.read_text().splitlines()]
    if change is not None:
        change(records[0])
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([raw] if raw is not None else [json.dumps(r) for r in records]) + "\n")
    return path


def test_jsonl_deep_nesting_and_out_of_range_times_name_the_line_and_field(tmp_path):
    """Before: RecursionError and OverflowError tracebacks."""
    with pytest.raises(JsonlFormatError, match=r"bad.jsonl, line 1.*nested too deeply"):
        load_jsonl(_jsonl(tmp_path, raw=DEEP))
    far = _jsonl(tmp_path, lambda r: r["sessions"][0].update(time="9999-12-31T23:59:59-23:59"))
    with pytest.raises(JsonlFormatError, match=r"line 1.*sessions\[0\]\.time.*out of range in UTC"):
        load_jsonl(far)


def _locomo(tmp_path, tiny_locomo_path, change):
    return _write(tmp_path, tiny_locomo_path, change)


def test_locomo_deep_nesting_is_a_format_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" + DEEP + "]")
    with pytest.raises(LocomoFormatError, match=r"deep.json: item 0 \(line 1\) is nested too deeply"):
        load_locomo(path)
    path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)  # not a list, and too deep to say what it is
    with pytest.raises(LocomoFormatError, match="nested too deeply"):
        load_locomo(path)


@pytest.mark.parametrize(
    ("observation", "message"),
    [
        (["not", "a", "dict"], "field 'observation' should be dict, got list"),
        ({"session_1_observation": {"Ann": 5}}, r"observation.session_1_observation.Ann: should be a list"),
        ({"session_1_observation": {"Ann": [[{"x": 1}, "D1:1"]]}}, r"Ann\[0\]: expected \[fact, dia_id\]"),
        ({"session_1_observation": {"Ann": [["a fact", {"D1": 1}]]}}, r"Ann\[0\]: the source should be a dia_id"),
    ],
)
def test_locomo_observations_of_the_wrong_type_name_the_field(tmp_path, tiny_locomo_path, observation, message):
    """Before: TypeError or AttributeError tracebacks."""
    path = _locomo(tmp_path, tiny_locomo_path, lambda data: data[0].update(observation=observation))
    with pytest.raises(LocomoFormatError, match=rf"sample tiny-1.*{message}"):
        load_locomo(path)


def test_a_lone_surrogate_is_refused_by_both_readers(tmp_path, tiny_locomo_path):
    """Before: read, then the tokenizer's TypeError far from the file."""
    lone = "I adopted a puppy \ud800 named Rex."
    locomo = _locomo(tmp_path, tiny_locomo_path, lambda d: d[0]["conversation"]["session_1"][0].update(text=lone))
    with pytest.raises(LocomoFormatError, match=r"session_1\[0\]: field 'text' holds a lone surrogate at position 18"):
        load_locomo(locomo)
    jsonl = _jsonl(tmp_path, lambda r: r["sessions"][0]["turns"][0].update(text=lone))
    with pytest.raises(JsonlFormatError, match=r"line 1.*text.*lone surrogate at position 18"):
        load_jsonl(jsonl)


def test_a_question_of_stopwords_only_scores_zero_with_bm25(tiny_locomo_path):
    """Before: IndexError inside bm25s (and ValueError for documents of stopwords only)."""
    from memnets.training.retrieval.bm25 import BM25Ranker

    ranker = BM25Ranker()
    scores = ranker.scores(["Ann adopted a puppy", "Bob plays the violin"], ["what is it?", "puppy"])
    assert scores[0].tolist() == [0.0, 0.0] and scores[1, 0] > 0 == scores[1, 1]
    assert ranker.scores(["the of", "a the"], ["puppy"]).tolist() == [[0.0, 0.0]]
    conversation = load_locomo(tiny_locomo_path)[0]
    assert len(ranker.rank(conversation, ["what is it?"])[0]) == len(conversation.turns)
