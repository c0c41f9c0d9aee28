"""bench/experiments/query_path.py on tiny sizes (the tiny encoder in a pack with a learned scorer), run
as its own process: each store (the embedded archive, the test's PostgreSQL) filled through the store
with the encoder's vectors and bound to it, searched end to end through memnets.open and part by part,
its ratio to the encoder's time, and the profile of the part around the encoder."""

from __future__ import annotations

import pytest
from bench_helpers import result, run_bench

PARTS = {"tokenise", "encode", "index", "store_read", "score"}  # the parts the module docstring names
SAVED = {"vectors_apart", "search_apart"}  # what the search no longer pays, timed for reference


@pytest.fixture(scope="module")
def pack(tiny_model_dir, tmp_path_factory):
    import torch

    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.heads import ImportanceHead
    from memnets.pack import export_pack
    from memnets.scoring import ScorerWeights

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    return export_pack(
        tmp_path_factory.mktemp("pack") / "pack",
        encoder,
        importance=ImportanceHead(encoder.dim, hidden_dims=(8,)),
        scorer_weights=ScorerWeights(recency=1.0, relevance=3.0, importance=0.5),
    )


def test_query_path_times_search_end_to_end_and_by_part_on_both_stores(pack, tmp_path, pg_url):
    args = [
        "--pack",
        pack,
        "--backends",
        "torch",
        "--memories",
        "300",
        "--base",
        "40",
        "--queries",
        "3",
        "--profile",
        "5",
    ]
    run_bench("bench.experiments.query_path", *args, "--pg-url", pg_url, "--out", tmp_path)
    results = result(tmp_path, "query_path")["results"]
    assert set(results) == {"archive/torch", "postgres/torch"}
    for found in results.values():
        assert found["fingerprint"].startswith("torch:")
        e2e = found["end_to_end"]
        assert e2e["calls"] == 3 and 0 < e2e["p50_ms"] <= e2e["p99_ms"]
        assert set(found["parts"]) == PARTS | SAVED and all(part["calls"] == 3 for part in found["parts"].values())
        assert found["parts"]["encode"]["p50_ms"] > 0 and found["parts"]["score"]["p50_ms"] > 0
        assert found["ratio_to_encoder"] == pytest.approx(e2e["p50_ms"] / found["parts"]["encode"]["p50_ms"])
        assert found["backend"] == "torch" and found["around_timed"]["calls"] == found["around_cold"]["calls"] == 3
        assert found["around_cold_to_encoder"] == pytest.approx(
            found["around_cold"]["p50_ms"] / found["parts"]["encode"]["p50_ms"]
        )
        assert found["around_timed_to_encoder"] > 0 and any(
            "_search_encoded" in line for line in found["profile"]["cumulative"]
        )
    # an unfiltered search is one round trip to PostgreSQL (memnets.store.pg_search)
    assert results["postgres/torch"]["profile"]["round_trips_per_search"] == 1
    assert "round_trips_per_search" not in results["archive/torch"]["profile"]
    assert results["postgres/torch"]["parts"]["index"]["p50_ms"] == 0  # PostgreSQL ranks inside its SQL
    assert (tmp_path / "query_path.md").read_text().count("| torch |") == 2


def test_query_path_refuses_a_folder_that_is_not_a_pack(tmp_path):
    refused = run_bench(
        "bench.experiments.query_path", "--pack", tmp_path, "--quick", "--out", tmp_path / "out", expect=2
    )
    assert "is not a memory pack" in refused.stderr and not (tmp_path / "out").exists()
