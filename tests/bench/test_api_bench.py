"""bench/api.py on tiny sizes (random unit vectors, the tiny encoder), run as `python -m bench.api`:
the API benchmark runs through memnets.open's AgentMemory, adds what it times, and its report
section renders."""

from __future__ import annotations

from bench_helpers import result, run_bench


def test_api_benchmark_on_tiny_sizes(tiny_model_dir, tmp_path):
    sizes = "users=2,per_user=250,adds=4,searches=6,encodes=2"  # >= k plans (1 in 50) per user
    # at d=32 the default noise leaves copies above the near-duplicate threshold; 0.5 keeps them distinct
    args = ["--random", "--encoder", tiny_model_dir, "--sizes", sizes, "--noise", "0.5", "--out", tmp_path]
    run_bench("bench.api", *args)
    found = result(tmp_path, "api")["results"]
    assert found["memories"] == 500 and found["counts_after"] == {"user-00": 252, "user-01": 252}
    assert found["add"]["calls"] == 4 and found["search_metadata"]["calls"] == 6 and found["encode_query"]["calls"] == 2
    assert 0 < found["search"]["p50_ms"] <= found["search"]["p99_ms"]
    run_bench("bench", "--only", "api", "--out", tmp_path, "--report-only")
    text = (tmp_path / "report.md").read_text()
    assert "memnets.open: add and search with many users" in text and "| search, metadata filter |" in text


def test_api_benchmark_refuses_an_unknown_size(tmp_path):
    refused = run_bench("bench.api", "--sizes", "people=3", "--out", tmp_path, expect=2)
    assert "'people=3': expected KEY=N" in refused.stderr and not (tmp_path / "api.json").exists()
