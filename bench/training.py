"""Encoder training speed: (query, positive) pairs per second on CPU at configs/encoder/cpu.yaml.

A short timed run of the real training step: the config's EncoderModule and RetrievalDataModule
(same model and data settings, hard negatives from the miner's cache) in a Lightning Trainer for a
few steps, without validation, logging or checkpoints. Step times are taken by a callback from
batch start to batch end (forward, loss, backward, optimiser); the first step is warm-up and not
counted.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from bench.common import REPO_ROOT, parser, write_result
from memnets.training.configs import load_config, resolve_config

CONFIG = resolve_config("encoder/cpu")
TRAINING_LOG = REPO_ROOT / "checkpoints" / "encoder" / "best" / "training.json"  # written by ExportEncoder


def logged_throughput(path: Path = TRAINING_LOG) -> dict | None:
    """What the last real fit logged (pairs/s over all its training steps), or None without a log."""
    import json

    if not Path(path).is_file():
        return None
    info = json.loads(Path(path).read_text())
    keys = ("pairs_per_second", "pairs_seen", "train_step_seconds", "fit_seconds", "epochs_trained", "run_dir")
    return {key: info.get(key) for key in keys} | {
        "path": str(Path(path).relative_to(REPO_ROOT)) if Path(path).is_relative_to(REPO_ROOT) else str(path)
    }


def step_timer():
    """A Lightning callback that records the wall time of every training step."""
    import lightning as L

    class StepTimer(L.Callback):
        def __init__(self):
            self.seconds: list[float] = []
            self._start = 0.0

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self._start = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.seconds.append(time.perf_counter() - self._start)

    return StepTimer()


def run(config_path: Path = CONFIG, steps: int = 10) -> dict:
    """Time ``steps`` training steps (the first is warm-up) at the config's settings, on one device
    of the config's accelerator."""
    import lightning as L

    from memnets.training.lit.data import RetrievalDataModule
    from memnets.training.lit.encoder import EncoderModule

    if steps < 2:
        raise ValueError(f"steps must be at least 2 (the first is warm-up), got {steps}")
    config = load_config(config_path)  # with its base: chain, as `memnets fit` reads it
    model_args, data_args = config.get("model", {}), config.get("data", {})
    L.seed_everything(config.get("seed_everything", 0), verbose=False)
    start = time.perf_counter()
    data = RetrievalDataModule(**data_args)
    data.setup("fit")
    module = EncoderModule(**model_args)
    setup_s = time.perf_counter() - start
    timer = step_timer()
    accelerator = config["trainer"].get("accelerator", "cpu")  # bench.experiments.gpu times encoder/gpu on its GPU
    trainer = L.Trainer(
        accelerator=accelerator,
        devices=1,
        precision=config["trainer"].get("precision", "32-true"),
        max_steps=steps,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[timer],
    )
    trainer.fit(module, datamodule=data)
    counted = timer.seconds[1:]
    step_s = statistics.median(counted)
    batch_size = data_args.get("batch_size", 32)
    hard_negatives = data_args.get("hard_negatives", 0)
    return {
        "config": str(Path(config_path).relative_to(REPO_ROOT))
        if Path(config_path).is_relative_to(REPO_ROOT)
        else str(config_path),
        "steps": steps,
        "accelerator": accelerator,
        "step_seconds": timer.seconds,
        "median_step_s": step_s,
        "batch_size": batch_size,
        "hard_negatives": hard_negatives,
        "max_length": model_args.get("max_length"),
        "texts_per_step": batch_size * (2 + hard_negatives),
        "pairs_per_s": batch_size / step_s,
        "texts_per_s": batch_size * (2 + hard_negatives) / step_s,
        "train_pairs": len(data.train_pairs),
        "epoch_minutes_estimate": len(data.train_pairs) / (batch_size / step_s) / 60,
        "setup_s": setup_s,
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("training", __doc__)
    p.add_argument("--config", type=Path, default=CONFIG)
    p.add_argument(
        "--steps", type=int, default=None, help="training steps to time, the first is warm-up (default 5; --quick 2)"
    )
    args = p.parse_args(argv)
    steps = args.steps or (2 if args.quick else 5)
    results = run(args.config, steps)
    results["from_training_log"] = logged_throughput()
    write_result(
        args.out,
        "training",
        {
            "config": results["config"],
            "steps": steps,
            "device": "cpu",
            "source": "timed run of the real training step; the last fit's own log "
            "(checkpoints/encoder/best/training.json) alongside when it exists",
        },
        results,
        [
            "pairs/s = batch size / median step time (first step excluded as warm-up); "
            "each step encodes the queries, the positives and the hard negatives"
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
