"""The manager on a pack: the trained importance head, recall gate and scorer weights replace the
heuristics (tiny encoder and small random heads; thresholds set so decisions are known)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memnets.memory.events import Move
from memnets.memory.manager import MemoryManager
from memnets.memory.signals import FixedGate, HeadGate, HeadImportance
from memnets.scoring import LearnedScorer, ScorerWeights

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir)


def make_pack(encoder, folder, gate_threshold: float):
    import torch

    from memnets.nn.heads import ImportanceHead, RecallGateHead
    from memnets.pack import export_pack

    torch.manual_seed(0)
    importance = ImportanceHead(encoder.dim, hidden_dims=(8,))
    gate = RecallGateHead(encoder.dim, hidden_dims=(8,), attention_dim=4, threshold=gate_threshold)
    weights = ScorerWeights(recency=0.1, relevance=2.0, importance=0.5)
    return export_pack(
        folder,
        encoder,
        importance=importance,
        gate=gate,
        scorer_weights=weights,
        thresholds={"importance": 0.3, "gate": gate_threshold},
    )


@pytest.mark.parametrize("gate_threshold", [0.0, 1.0])
def test_from_pretrained_uses_the_pack_heads(encoder, tmp_path, gate_threshold):
    pack = make_pack(encoder, tmp_path / "pack", gate_threshold)
    with MemoryManager.from_pretrained(pack, tmp_path / "archive", owner="ann", context_budget=3, k=1) as manager:
        assert isinstance(manager.importance, HeadImportance) and isinstance(manager.gate, HeadGate)
        assert isinstance(manager.scorer, LearnedScorer) and manager.scorer.weights.relevance == 2.0
        assert manager.config.write_through_threshold == pytest.approx(0.3)
        memory = manager.observe("red green blue", t=T0, id="m1")
        vector = encoder.encode(["red green blue"]).numpy()
        assert memory.importance == pytest.approx(float(manager.importance.head.predict_proba(vector)[0]), abs=1e-6)
        manager.observe("one two three", t=T0 + timedelta(minutes=1), id="m2")
        view = manager.context_for("red green blue", now=T0 + timedelta(hours=1))
        # a probability is always >= 0 and never >= 1 for a finite logit: the thresholds fix the decision
        assert view.recalled is (gate_threshold == 0.0)
        assert manager.events.count(Move.SEARCH) == (1 if gate_threshold == 0.0 else 0)
        assert 0.0 <= view.gate_score <= 1.0
    # keyword arguments override what the pack supplies
    with MemoryManager.from_pretrained(pack, tmp_path / "archive2", owner="ann", gate=FixedGate(True)) as manager:
        assert isinstance(manager.gate, FixedGate)


def test_replay_with_a_pack(encoder, tmp_path, tiny_locomo_path, tiny_model_dir):
    import json

    from memnets.cli import main

    pack = make_pack(encoder, tmp_path / "pack", 0.0)
    out = tmp_path / "replay.json"
    argv = [
        "replay",
        "--data",
        str(tiny_locomo_path),
        "--conversation",
        "tiny-1",
        "--encoder",
        str(tiny_model_dir),
        "--pack",
        str(pack),
        "--context-budget",
        "12",
        "-k",
        "1",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(row["name"], row["gate"]) for row in rows] == [
        ("heuristic", "heuristic"),
        ("generative agents", "heuristic"),
        ("plain vector memory", "none"),
        ("pack:pack", "learned"),
    ]
    assert rows[2]["searches"] == rows[2]["questions"] == 4  # gate threshold 0: always searches
    assert all(np.isfinite(row["evidence_recall"]) for row in rows)
    assert main(argv + ["--no-heuristic"]) == 0
    assert [row["name"] for row in json.loads(out.read_text())["rows"]] == ["pack:pack"]
