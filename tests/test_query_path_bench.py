"""bench/query_path.py on tiny sizes (the tiny encoder in a pack with a learned scorer): one store
filled through the store with the encoder's vectors and bound to it, searched end to end through
memnets.open and part by part."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lives in the source tree

from bench.query_path import PARTS, main, run_backend  # noqa: E402


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


def test_query_path_times_search_end_to_end_and_by_part(pack, tmp_path):
    import memnets

    questions = ["what did she paint?", "where did they travel?", "who adopted a dog?"]
    result = run_backend(pack, "torch", tmp_path / "store", memories=300, base=40, queries=questions, noise=0.5)
    assert result["fingerprint"].startswith("torch:")
    assert result["end_to_end"]["calls"] == 3 and 0 < result["end_to_end"]["p50_ms"] <= result["end_to_end"]["p99_ms"]
    assert set(result["parts"]) == set(PARTS) and all(part["calls"] == 3 for part in result["parts"].values())
    assert result["parts"]["encode"]["p50_ms"] > 0 and result["parts"]["score"]["p50_ms"] > 0
    with memnets.open(tmp_path / "store", pack=pack) as memory:  # the fill is the pack encoder's own store
        assert memory.store.count("user-00") == 300
        assert len(memory.search(questions[0], user="user-00", k=5)) == 5


def test_query_path_refuses_a_folder_that_is_not_a_pack(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--pack", str(tmp_path), "--quick", "--out", str(tmp_path / "out")])
    assert "is not a memory pack" in capsys.readouterr().err and not (tmp_path / "out").exists()
