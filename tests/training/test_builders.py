"""Label builders on the hand-written fixture: labels checked by hand, caching, config errors."""

import random

import pytest
import yaml

from memnets.training.data.builders import (
    build_gate_examples,
    build_importance_examples,
    build_retrieval_pairs,
    gate_examples_for_item,
    gate_positions,
    prepare_datasets,
)
from memnets.training.data.config import load_data_config
from memnets.training.data.locomo import load_locomo


@pytest.fixture(scope="module")
def conversations(tiny_locomo_path):
    return load_locomo(tiny_locomo_path)


def test_retrieval_pairs_pair_each_question_with_each_evidence_turn(conversations):
    pairs = build_retrieval_pairs(conversations)
    questions = [(r["conv_id"], r["qa_index"], r["positive_id"]) for r in pairs if r["query_kind"] == "question"]
    assert questions == [
        ("tiny-1", 0, "D1:3"),
        ("tiny-1", 1, "D1:1"),
        ("tiny-1", 1, "D2:1"),
        ("tiny-1", 2, "D1:4"),
        ("tiny-1", 2, "D2:2"),
        ("tiny-1", 3, "D2:3"),
        ("tiny-2", 0, "D1:1"),
    ]
    facts = [(r["query"], r["positive"], r["category"]) for r in pairs if r["query_kind"] == "observation"]
    assert ("Bob started learning the violin.", "Bob: I started learning the violin.", 0) in facts
    assert len(facts) == 4
    assert len(build_retrieval_pairs(conversations, include_observations=False)) == 7


def test_importance_labels_are_turns_cited_as_evidence(conversations):
    examples = build_importance_examples(conversations)
    positives = {(r["conv_id"], r["dia_id"]) for r in examples if r["label"] == 1}
    assert positives == {("tiny-1", d) for d in ["D1:1", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3"]} | {("tiny-2", "D1:1")}
    assert len(examples) == 11
    assert examples[2]["text"].endswith("[shares a photo of a small dog on a couch]")


def test_gate_label_is_one_when_some_evidence_left_the_context(conversations):
    tiny1 = conversations[0]
    rows = gate_examples_for_item(tiny1, tiny1.qa[1], windows=[2, 10], rng=random.Random(0))  # evidence D1:1 and D2:1
    after = {r["window"]: r for r in rows if r["placement"] == "after"}
    assert after[2]["position"] == 5 and after[2]["context_ids"] == ["D1:4", "D2:1"] and after[2]["label"] == 1
    assert after[10]["context_ids"] == ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1"] and after[10]["label"] == 0
    rows = gate_examples_for_item(tiny1, tiny1.qa[0], windows=[2], rng=random.Random(0))  # evidence D1:3 (index 2)
    after = next(r for r in rows if r["placement"] == "after")
    assert after["context_ids"] == ["D1:2", "D1:3"] and after["label"] == 0
    for r in rows:  # every label agrees with its context
        assert r["label"] == int(not set(r["evidence_ids"]) <= set(r["context_ids"]))


def test_gate_positions_lie_after_the_evidence():
    rng = random.Random(1)
    for _ in range(200):
        positions = gate_positions(last_evidence=10, n_turns=40, window=5, rng=rng)
        assert positions["after"] == 11
        assert 12 <= positions["near"] <= 16
        assert 11 <= positions["anywhere"] <= 40


def test_gate_examples_skip_questions_without_evidence_and_are_reproducible(conversations):
    first = build_gate_examples(conversations, windows=(2, 4), seed=3)
    again = build_gate_examples(conversations, windows=(2, 4), seed=3)
    assert first.to_list() == again.to_list()
    assert ("tiny-1", 4) not in {(r["conv_id"], r["qa_index"]) for r in first}  # category 5, no evidence
    assert set(first["label"]) == {0, 1}


def _config(tmp_path, tiny_locomo_path, **overrides):
    raw = {
        "path": str(tiny_locomo_path),
        "cache_dir": str(tmp_path / "cache"),
        "splits": {"train": ["tiny-1"], "validation": [], "test": ["tiny-2"]},
        "gate": {"windows": [2, 4], "seed": 0},
    }
    raw.update(overrides)
    path = tmp_path / "data.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_prepare_datasets_builds_every_split_and_loads_from_cache(tmp_path, tiny_locomo_path):
    config = load_data_config(_config(tmp_path, tiny_locomo_path))
    built = prepare_datasets(config, progress=False)
    assert len(built["importance"]["train"]) == 8 and len(built["importance"]["test"]) == 3
    assert len(built["retrieval"]["validation"]) == 0
    cached = prepare_datasets(config, progress=False)
    assert cached["gate"]["train"].to_list() == built["gate"]["train"].to_list()
    assert len(list((tmp_path / "cache").iterdir())) == 1


def test_config_errors_name_the_file_and_the_problem(tmp_path, tiny_locomo_path):
    overlapping = _config(
        tmp_path, tiny_locomo_path, splits={"train": ["tiny-1"], "validation": ["tiny-1"], "test": []}
    )
    with pytest.raises(ValueError, match=r"data\.yaml.*tiny-1.*both the train and the validation"):
        load_data_config(overlapping)
    missing = _config(tmp_path, tiny_locomo_path, splits={"train": ["tiny-1"], "test": []})
    with pytest.raises(ValueError, match=r"data\.yaml.*missing field 'validation'"):
        load_data_config(missing)
    unknown = _config(tmp_path, tiny_locomo_path, splits={"train": ["conv-99"], "validation": [], "test": []})
    with pytest.raises(ValueError, match="conv-99"):
        prepare_datasets(load_data_config(unknown), progress=False)
