"""bench/training.py and bench/experiments/gpu.py without a GPU, each run as its own process: the
timed training step runs on the config's accelerator (the smoke config: CPU, a tiny encoder), and the
GPU benchmark refuses a machine without CUDA, writing nothing."""

from __future__ import annotations

import pytest
import torch
from bench_helpers import result, run_bench

from memnets.training.configs import resolve_config


def test_training_bench_times_steps_on_the_configs_accelerator(tmp_path):
    """Run in a folder of its own: the fit's hard negatives are cached under the working folder's data/cache/,
    which must not be the checkout's (a main job run after the tests would start from that cache)."""
    args = ("--config", resolve_config("encoder/smoke"), "--steps", "3", "--out", tmp_path / "out")
    run_bench("bench.training", *args, cwd=tmp_path)
    assert list((tmp_path / "data" / "cache" / "hard_negatives").glob("*.json"))
    found = result(tmp_path / "out", "training")["results"]
    assert found["accelerator"] == "cpu" and len(found["step_seconds"]) == 3
    assert found["pairs_per_s"] > 0 and found["batch_size"] == 16


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine bench.experiments.gpu measures instead")
def test_gpu_bench_without_cuda_exits_1_and_writes_nothing(tmp_path):
    refused = run_bench("bench.experiments.gpu", "--quick", "--out", tmp_path / "out", expect=1)
    assert "no CUDA device" in refused.stderr and not (tmp_path / "out").exists()
