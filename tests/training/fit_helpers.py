"""For `memnets fit encoder` tests: the tiny data config, and a trainer section (CPU, quiet, CSV metrics, best encoder exported)."""

from __future__ import annotations

from pathlib import Path

import yaml


def tiny_data_config(tmp_path: Path, locomo_path: Path) -> Path:
    """A data config over the tiny LoCoMo file (tiny-1 trains, tiny-2 validates), its cache in ``tmp_path``."""
    path = tmp_path / "data.yaml"
    splits = {"train": ["tiny-1"], "validation": ["tiny-2"], "test": []}
    path.write_text(yaml.safe_dump({"path": str(locomo_path), "cache_dir": str(tmp_path / "cache"), "splits": splits}))
    return path


def encoder_trainer_config(tmp_path: Path, max_epochs: int) -> dict:
    """Trainer settings that log metrics to ``tmp_path/runs/encoder`` and export the best encoder to ``tmp_path/best``."""
    return {
        "accelerator": "cpu",
        "devices": 1,
        "max_epochs": max_epochs,
        "log_every_n_steps": 1,
        "num_sanity_val_steps": 0,
        "enable_model_summary": False,
        "enable_progress_bar": False,
        "logger": {
            "class_path": "lightning.pytorch.loggers.CSVLogger",
            "init_args": {"save_dir": str(tmp_path / "runs"), "name": "encoder"},
        },
        "callbacks": [
            {
                "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                "init_args": {"monitor": "val/recall@10", "mode": "max", "save_top_k": 1},
            },
            {
                "class_path": "memnets.training.lit.encoder.ExportEncoder",
                "init_args": {"export_dir": str(tmp_path / "best")},
            },
        ],
    }
