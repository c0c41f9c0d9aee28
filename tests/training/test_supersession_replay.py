"""The candidate pairs of real conversations that train the pack's change-of-fact judge (memnets.training.lit.supersession_replay)."""

import json
from types import SimpleNamespace

import numpy as np

from memnets.memory.supersession import CANDIDATES
from memnets.training.data.locomo import load_locomo
from memnets.training.lit.supersession import ChangeJudgeDataModule
from memnets.training.lit.supersession_replay import candidate_pairs, replayed_pairs


def unit(*xs):
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_each_turn_meets_its_speaker_s_nearest_earlier_turns_however_far():
    speakers = ["ann", "bob", "ann", "ann", "bob"] + ["ann"] * (CANDIDATES + 2)
    turns = [SimpleNamespace(speaker=s) for s in speakers]
    rng = np.random.default_rng(0)
    vectors = np.stack([unit(*rng.normal(size=8)) for _ in turns])
    vectors[3] = unit(*(-vectors[0]))  # opposite of turn 0: judged all the same (the judge decides, not the cosine)
    pairs = candidate_pairs(turns, vectors)
    assert (0, 3) in pairs and (2, 3) in pairs
    for newer, speaker in enumerate(speakers):
        earlier = [i for i in range(newer) if speakers[i] == speaker]
        nearest = sorted(earlier, key=lambda i: -float(vectors[i] @ vectors[newer]))[:CANDIDATES]
        assert sorted(older for older, n in pairs if n == newer) == sorted(nearest)


def test_a_mined_change_is_a_change_its_newer_turn_s_other_pairs_are_left_out(tiny_locomo_path):
    conversation = load_locomo(tiny_locomo_path, ["tiny-1"])[0]
    said = {t.dia_id: t.said for t in conversation.turns}
    axes = np.eye(len(said), dtype=np.float32)  # every turn apart from every other (cosine 0): all judged all the same
    vectors = {turn.said: axes[i] for i, turn in enumerate(conversation.turns)}

    def encode(texts):
        return np.stack([vectors[t] for t in texts])

    mined = [{"conversation": "tiny-1", "older_dia_id": "D2:1", "newer_dia_id": "D2:3", "label": 1}]

    found = replayed_pairs([conversation], mined, encode, negatives=100)

    assert (found[0]["older"], found[0]["newer"], found[0]["label"], found[0]["kind"]) == (
        said["D2:1"],
        said["D2:3"],
        1,
        "change",
    )
    others = {(r["older"], r["newer"]) for r in found[1:] if (r["label"], r["kind"]) == (0, "replayed")}
    assert len(others) == len(found) - 1
    ann = [("D1:1", "D1:3"), ("D1:1", "D2:1"), ("D1:3", "D2:1")]  # D2:3's other pairs (D1:1, D1:3) left out
    bob = [("D1:2", "D1:4"), ("D1:2", "D2:2"), ("D1:4", "D2:2"), ("D1:2", "D2:4"), ("D1:4", "D2:4"), ("D2:2", "D2:4")]
    assert others == {(said[a], said[b]) for a, b in ann + bob}
    unlabelled = replayed_pairs([conversation], [], encode, negatives=1)
    assert len(unlabelled) == 1 and unlabelled[0]["label"] == 0  # at most `negatives` of the others


def test_the_data_module_adds_the_training_conversations_pairs_only(tiny_locomo_path, tmp_path):
    labels = tmp_path / "mined.jsonl"
    rows = [
        {"conversation": "tiny-1", "split": "train", "older_dia_id": "D1:1", "newer_dia_id": "D1:3", "label": 0},
        {"conversation": "tiny-2", "split": "validation", "older_dia_id": "D1:1", "newer_dia_id": "D1:3", "label": 0},
    ]
    labels.write_text("".join(json.dumps(r | {"older": "a", "newer": "b"}) + "\n" for r in rows), encoding="utf-8")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"older": "I live in Leeds", "newer": "I moved to Lyon", "label": 1}) + "\n")
    module = ChangeJudgeDataModule(
        [pairs], [pairs], mismatched=0, replayed=100, conversations=str(tiny_locomo_path), labels=str(labels)
    )
    module.setup()
    replayed = [r for r in module.splits["train"] if r.get("kind") == "replayed"]
    assert replayed and {r["conversation"] for r in replayed} == {"tiny-1"}  # tiny-2 is validation's


def test_the_pool_is_the_nearest_turns_of_either_speaker_as_the_write_path_searches():
    from memnets.memory.supersession import CANDIDATE_POOL

    # ann's older turn at cosine 0.6, then CANDIDATE_POOL of bob's turns nearer to ann's newer one: they fill the pool
    speakers = ["ann"] + ["bob"] * CANDIDATE_POOL + ["ann"]
    turns = [SimpleNamespace(speaker=s) for s in speakers]
    vectors = np.stack([unit(0.6, 0.8)] + [unit(1, 0.02 * (i + 1)) for i in range(CANDIDATE_POOL)] + [unit(1, 0)])
    assert all(vectors[0] @ vectors[-1] < vectors[i] @ vectors[-1] for i in range(1, CANDIDATE_POOL + 1))
    assert (0, len(turns) - 1) not in candidate_pairs(turns, vectors)
    assert candidate_pairs(turns[:1] + turns[-1:], vectors[[0, -1]]) == [(0, 1)]  # without bob, a candidate
