"""Encoder training throughput on CPU by thread setting: one process and DDP on gloo, through `memnets fit`.

Each variant is one short `memnets fit encoder` run as a user runs it (`python -m memnets fit encoder
-c CONFIG --trainer.max_epochs 1 --trainer.limit_train_batches STEPS --trainer.limit_val_batches 1 -q`),
in a scratch working folder so that no run replaces `checkpoints/`; hard negatives come from the
checkout's `data/cache/` (mined by the first run when missing). The figures are the run's own
`training.json`: pairs of all ranks per second of training-step time (the first step's warm-up
included), the processes and each one's torch threads. Variants:

- `cpu`: `encoder/cpu` as shipped (one process; memnets.training.lit.threads: torch's count, one thread per core);
- `cpu-1`: `encoder/cpu` with `OMP_NUM_THREADS=1`;
- `ddp-oversubscribed`: `encoder/ddp_cpu` (2 processes, 16 pairs each: the same global batch of 32)
  with `OMP_NUM_THREADS` = torch's count, i.e. every process one thread per core (what a plain torch
  process does);
- `ddp`: `encoder/ddp_cpu` as shipped (torch's count // 2 per process).

Not part of `memnets bench` (minutes of the real MiniLM per variant): `python -m bench.experiments.training_threads`.
``--quick`` runs the same variants on a tiny random encoder (seconds, for the plumbing only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.common import REPO_ROOT, parser, write_result

VARIANTS = {  # name -> (config, OMP_NUM_THREADS: None = unset, "machine" = torch's count); cpu first: it mines
    "cpu": ("encoder/cpu", None),
    "cpu-1": ("encoder/cpu", "1"),
    "ddp-oversubscribed": ("encoder/ddp_cpu", "machine"),
    "ddp": ("encoder/ddp_cpu", None),
}
QUICK_MODEL = [
    "--model.backbone_config",
    "{hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64}",
]
QUICK_DATA = ["--data.miner", "bm25"]


def fit(variant: str, steps: int, scratch: Path, quick: bool, timeout_s: int) -> dict:
    """One `memnets fit encoder` run of ``variant`` in its own folder under ``scratch``; its training.json."""
    import torch

    config, threads = VARIANTS[variant]
    folder = scratch / variant
    folder.mkdir(parents=True)
    data_config = folder / "data.yaml"  # the packaged LoCoMo config with the checkout's cache of hard negatives
    data_config.write_text(yaml.safe_dump({"base": "data/locomo", "cache_dir": str(REPO_ROOT / "data" / "cache")}))
    args = ["-c", config, "--data.data_config", str(data_config), "--trainer.max_epochs", "1"]
    args += ["--trainer.limit_train_batches", str(steps), "--trainer.limit_val_batches", "1", "-q"]
    args += (QUICK_MODEL + QUICK_DATA) if quick else []
    env = {k: v for k, v in os.environ.items() if k not in {"OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT"}}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(torch.get_num_threads()) if threads == "machine" else threads
    started = time.perf_counter()
    with (folder / "fit.log").open("w") as log:
        done = subprocess.run(
            [sys.executable, "-m", "memnets", "fit", "encoder", *args],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
        )
    if done.returncode != 0:
        tail = (folder / "fit.log").read_text()[-3000:]
        raise RuntimeError(f"variant {variant!r} failed (exit {done.returncode}):\n{tail}")
    info = json.loads((folder / "checkpoints" / "encoder" / "best" / "training.json").read_text())
    return {
        "variant": variant,
        "config": config,
        "omp_num_threads": env.get("OMP_NUM_THREADS"),
        "processes": info["world_size"],
        "torch_threads_per_process": info["torch_threads"],
        "steps": steps,
        "pairs_seen": info["pairs_seen"],
        "train_step_seconds": info["train_step_seconds"],
        "pairs_per_second": info["pairs_per_second"],
        "fit_seconds": info["fit_seconds"],
        "command_seconds": round(time.perf_counter() - started, 1),
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.training_threads", __doc__)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--steps", type=int, default=8, help="training steps per run (default 8; --quick 2)")
    p.add_argument("--timeout", type=int, default=600, help="seconds one run may take (default 600)")
    args = p.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or not variants:
        p.error(f"--variants: unknown {unknown or 'none given'}; expected some of {', '.join(VARIANTS)}")
    if args.steps < 1:
        p.error(f"--steps must be at least 1, got {args.steps}")
    steps = 2 if args.quick else args.steps
    loadavg_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="memnets-bench-threads-") as scratch:
        rows = [fit(variant, steps, Path(scratch), args.quick, args.timeout) for variant in variants]
    print("| variant | processes | torch threads each | OMP_NUM_THREADS | train step s | pairs/s (all ranks) |")
    print("| --- | ---: | ---: | --- | ---: | ---: |")
    for row in rows:
        print(
            f"| {row['variant']} | {row['processes']} | {row['torch_threads_per_process']} | "
            f"{row['omp_num_threads'] or 'unset'} | {row['train_step_seconds']} | {row['pairs_per_second']} |"
        )
    path = write_result(
        args.out,
        "training_threads",
        {"steps": steps, "quick": args.quick, "variants": variants, "loadavg_before": loadavg_before},
        {"rows": rows},
        ["pairs/s = pairs of all ranks / the slowest rank's training-step seconds, from each run's training.json"],
    )
    print(f"load average before {loadavg_before}, after {rows[-1]['loadavg_after']}; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
