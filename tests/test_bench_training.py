"""bench/training.py and bench/gpu.py without a GPU: the timed training step runs on the config's
accelerator (the smoke config: CPU, a tiny encoder), and the GPU benchmark refuses a machine without
CUDA, writing nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lives in the source tree

from bench import gpu, training  # noqa: E402
from memnets.configs import resolve_config  # noqa: E402


def test_training_bench_times_steps_on_the_configs_accelerator():
    result = training.run(resolve_config("encoder/smoke"), steps=3)
    assert result["accelerator"] == "cpu" and len(result["step_seconds"]) == 3
    assert result["pairs_per_s"] > 0 and result["batch_size"] == 16


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine bench.gpu measures instead")
def test_gpu_bench_without_cuda_exits_1_and_writes_nothing(tmp_path, capsys):
    assert gpu.main(["--quick", "--out", str(tmp_path / "out")]) == 1
    assert "no CUDA device" in capsys.readouterr().err and not (tmp_path / "out").exists()
