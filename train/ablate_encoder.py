"""Encoder ablations on the validation conversation: one short `memnets fit encoder` run per variant.

Every variant starts from the packaged encoder/cpu config, applies its overrides, trains with the same
budget (``--epochs``, ``--limit-train-batches``) and reports the validation metrics of its last
epoch. Runs land in checkpoints/ablation/<variant>/ (under the working folder) and never touch
checkpoints/encoder/best.
Choices are made on validation (conv-49) only. Usage::

    python train/ablate_encoder.py --epochs 1 --limit-train-batches 30 --out docs/results/encoder_ablation.md
    python train/ablate_encoder.py --variants full,in_batch_only   # a subset
"""

from __future__ import annotations

import argparse
import copy
import csv
import subprocess
import sys
import time
from pathlib import Path

import yaml

from memnets.training.configs import load_config

BASE = "encoder/cpu"
RUNS = Path("checkpoints") / "ablation"

# name -> (what changes, {"model"|"data": overrides})
VARIANTS: dict[str, tuple[str, dict]] = {
    "full": (
        "cpu.yaml as is: 1 mined hard negative, batches by conversation, learnable tau from 0.05, observations",
        {},
    ),
    "in_batch_only": ("no mined hard negatives (in-batch, same-conversation batches)", {"data": {"hard_negatives": 0}}),
    "in_batch_mixed": (
        "no mined hard negatives, batches mixing conversations (plain MNRL-like)",
        {"data": {"hard_negatives": 0, "group_by_conversation": False}},
    ),
    "no_observations": ("question pairs only", {"data": {"include_observations": False}}),
    "tau_0.05_fixed": ("temperature fixed at 0.05", {"model": {"learnable_temperature": False, "temperature": 0.05}}),
    "tau_0.02_fixed": ("temperature fixed at 0.02", {"model": {"learnable_temperature": False, "temperature": 0.02}}),
    "tau_0.1_fixed": ("temperature fixed at 0.1", {"model": {"learnable_temperature": False, "temperature": 0.1}}),
}


def variant_config(name: str, epochs: int, limit: float | None) -> dict:
    config = copy.deepcopy(load_config(BASE))
    for section, overrides in VARIANTS[name][1].items():
        config[section].update(overrides)
    trainer = config["trainer"]
    trainer["max_epochs"] = epochs
    if limit:
        trainer["limit_train_batches"] = limit
    trainer["logger"]["init_args"] = {"save_dir": str(RUNS), "name": name}
    for callback in trainer["callbacks"]:
        if callback["class_path"].endswith("ExportEncoder"):
            callback["init_args"] = {"export_dir": None}
        if callback["class_path"].endswith("EarlyStopping"):
            callback["init_args"]["patience"] = epochs  # same budget for every variant
    return config


def last_validation(run_dir: Path) -> dict[str, float]:
    rows = [row for row in csv.DictReader((run_dir / "metrics.csv").open()) if row.get("val/recall@10")]
    return {key: float(value) for key, value in rows[-1].items() if key.startswith("val/") and value}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {list(VARIANTS)}")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--limit-train-batches", type=float, default=None, help="batches (int) or share (<1) per epoch")
    parser.add_argument("--out", default="docs/results/encoder_ablation_runs.md", help="markdown table to (re)write")
    args = parser.parse_args(argv)
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; expected some of {list(VARIANTS)}")
    limit = (
        int(args.limit_train_batches)
        if args.limit_train_batches and args.limit_train_batches >= 1
        else args.limit_train_batches
    )
    lines = [
        f"budget: {args.epochs} epoch(s), limit_train_batches={limit}, validation conv-49 (categories 1-4)",
        "",
        "| variant | change | val R@5 | val R@10 | val MRR@10 | wall s |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        config_path = RUNS / f"{name}.yaml"
        config_path.parent.mkdir(parents=True, exist_ok=True)
        config_path.write_text(yaml.safe_dump(variant_config(name, args.epochs, limit)))
        started = time.perf_counter()
        command = [sys.executable, "-m", "memnets", "fit", "encoder", "-c", str(config_path)]
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True)
        seconds = time.perf_counter() - started
        versions = sorted((RUNS / name).glob("version_*"), key=lambda p: int(p.name.split("_")[1]))
        metrics = last_validation(versions[-1])
        lines.append(
            f"| {name} | {VARIANTS[name][0]} | {100 * metrics['val/recall@5']:.1f} | {100 * metrics['val/recall@10']:.1f}"
            f" | {100 * metrics['val/mrr@10']:.1f} | {seconds:.0f} |"
        )
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")
        print(lines[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
