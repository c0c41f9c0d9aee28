"""bench.experiments.large_serving's measurements on a tiny encoder: the exact backend agrees with itself, the
ONNX graph keeps its ranking, and the recall it reports is the pipeline's evaluation of that ranking."""

from __future__ import annotations

import numpy as np
import pytest

from bench.experiments.large_serving import recall, speed
from memnets.nn.encoder import MemoryEncoder
from memnets.training.data.formats import load_conversations
from memnets.training.retrieval.dense import DenseRanker
from memnets.training.retrieval.metrics import evaluate_retriever

TEXTS = [f"turn {n}: we talked about the garden, the bus to work and a cat called {n}" for n in range(12)]


def test_speed_reports_rate_latency_and_agreement(tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    exact = np.asarray(encoder.encode(TEXTS))
    row = speed(encoder, TEXTS, exact, repeats=1)
    assert row["texts_per_s"] > 0
    assert row["single"]["calls"] == len(TEXTS)
    assert row["cosine_to_exact"]["min"] == pytest.approx(1.0, abs=1e-5)


def test_onnx_keeps_the_exact_ranking(tiny_model_dir, tiny_locomo_path):
    pytest.importorskip("onnxruntime")
    conversations = {"all": load_conversations(tiny_locomo_path)}
    exact = recall(MemoryEncoder.from_pretrained(tiny_model_dir), conversations)
    onnx = recall(MemoryEncoder.from_pretrained(tiny_model_dir, backend="onnx"), conversations)
    assert onnx["all"] == pytest.approx(exact["all"], abs=1e-6)
    report = evaluate_retriever(DenseRanker(MemoryEncoder.from_pretrained(tiny_model_dir)), conversations["all"])
    assert exact["all"] == {"R@5": 100 * report.overall["recall@5"], "R@10": 100 * report.overall["recall@10"]}
