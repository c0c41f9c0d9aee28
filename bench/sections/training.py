"""The report's section on the encoder's training step (bench/training.py)."""

from __future__ import annotations

from pathlib import Path

from bench.figures import fmt, table

TITLE = "Encoder training speed"


def write(payload: dict, out: Path, targets: list) -> list[str]:
    r = payload["results"]
    log = r.get("from_training_log")
    logged = (
        [
            "",
            f"The last real fit's own log (`{log['path']}`): {fmt(log['pairs_per_second'])} pairs/s over "
            f"{log['pairs_seen']} pairs in {fmt(log['train_step_seconds'])} s of training steps "
            f"({log['epochs_trained']} epochs, fit {fmt(log['fit_seconds'])} s).",
        ]
        if log
        else ["", "No training log at checkpoints/encoder/best/training.json: only the timed run above."]
    )
    return [
        "Timed run of the real training step (EncoderModule + RetrievalDataModule from the config, "
        "Lightning Trainer, no validation or checkpoints); the first step is warm-up and not counted.",
        "",
        table(
            [
                "config",
                "batch",
                "hard negatives",
                "max length",
                "steps timed",
                "median step s",
                "pairs/s",
                "texts/s",
                "train pairs",
                "epoch min (est.)",
            ],
            [
                [
                    r["config"],
                    r["batch_size"],
                    r["hard_negatives"],
                    r["max_length"],
                    r["steps"] - 1,
                    fmt(r["median_step_s"], 2),
                    fmt(r["pairs_per_s"]),
                    fmt(r["texts_per_s"]),
                    r["train_pairs"],
                    fmt(r["epoch_minutes_estimate"]),
                ]
            ],
        ),
    ] + logged
