"""bench/api.py on tiny sizes (random unit vectors, the tiny encoder): the API benchmark runs through
memnets.open's AgentMemory, adds what it times, and its report section renders."""

from __future__ import annotations

import json

import numpy as np


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_api_benchmark_on_tiny_sizes(tiny_model_dir, tmp_path):
    from bench.api import run, user_name
    from bench.common import write_result
    from bench.report import write_report
    from memnets.nn.encoder import MemoryEncoder

    backbone = MemoryEncoder.from_pretrained(tiny_model_dir)
    sizes = {"users": 2, "per_user": 250, "adds": 4, "searches": 6, "encodes": 2}  # >= k plans (1 in 50) per user
    texts = [f"memory text number {i}" for i in range(30)]
    queries = [f"question {i}?" for i in range(5)]
    result = run(
        sizes,
        tmp_path / "store",
        base=unit(30, backbone.dim, 0),
        query_base=unit(5, backbone.dim, 1),
        memory_texts=texts,
        query_texts=queries,
        backbone=backbone,
        noise=0.5,
    )  # d=32: copies stay distinct
    assert result["memories"] == 500 and result["counts_after"] == {user_name(0): 252, user_name(1): 252}
    assert (
        result["add"]["calls"] == 4 and result["search_metadata"]["calls"] == 6 and result["encode_query"]["calls"] == 2
    )
    assert 0 < result["search"]["p50_ms"] <= result["search"]["p99_ms"]
    payload = json.loads(write_result(tmp_path / "out", "api", sizes, result).read_text())
    report = write_report({"api": payload}, tmp_path / "out")
    text = report.read_text()
    assert "memnets.open: add and search with many users" in text and "| search, metadata filter |" in text
