"""The sentence-transformers MNRL baseline trains, saves a folder MemoryEncoder loads, and records its run."""

from __future__ import annotations

import json

import torch
import yaml

from memnets.cli import main as cli_main
from memnets.nn.encoder import MemoryEncoder


def test_baseline_fine_tunes_and_saves_a_loadable_folder(tmp_path, tiny_model_dir, tiny_locomo_path):
    config = tmp_path / "data.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "path": str(tiny_locomo_path),
                "cache_dir": str(tmp_path / "cache"),
                "splits": {"train": ["tiny-1"], "validation": [], "test": ["tiny-2"]},
            }
        )
    )
    out = tmp_path / "st"
    assert (
        cli_main(
            [
                "baseline",
                "st-mnrl",
                "--output",
                str(out),
                "--backbone",
                str(tiny_model_dir),
                "-c",
                str(config),
                "--epochs",
                "2",
                "--batch-size",
                "4",
                "--lr",
                "1e-3",
                "--max-steps",
                "3",
            ]
        )
        == 0
    )
    record = json.loads((out / "training.json").read_text())
    assert record["steps"] == 3 and record["pairs_per_second"] > 0
    trained = MemoryEncoder.from_pretrained(out)
    untrained = MemoryEncoder.from_pretrained(tiny_model_dir)
    texts = ["Alice: I adopted a cat.", "what pet did Alice get?"]
    assert trained.dim == 32 and not torch.allclose(trained.encode(texts), untrained.encode(texts))
