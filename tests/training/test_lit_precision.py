"""bf16 autocast in CPU fits only where the CPU has native bf16 (memnets.training.lit.precision)."""

import pytest
import torch

from memnets.nn.backend_choice import cpu_half_precision
from memnets.training.lit import precision as precision_rule
from memnets.training.lit.precision import cpu_fit_precision, fit_on_cpu

AVX2 = ["avx", "avx2", "fma", "f16c"]
AVX512_BF16 = ["avx2", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"]
AMX = ["avx2", "avx512f", "amx_tile", "amx_bf16"]


def test_bf16_autocast_falls_back_to_float32_on_a_cpu_without_native_bf16():
    precision, why = cpu_fit_precision("bf16-mixed", on_cpu=True, flags=AVX2)
    assert precision == "32-true"
    assert "bf16-mixed -> 32-true" in why and "avx512_bf16" in why and "amx_bf16" in why


def test_bf16_autocast_stays_on_a_cpu_with_avx512_bf16_or_amx():
    assert cpu_fit_precision("bf16-mixed", on_cpu=True, flags=AVX512_BF16) == ("bf16-mixed", None)
    assert cpu_fit_precision("bf16-mixed", on_cpu=True, flags=AMX) == ("bf16-mixed", None)


def test_gpu_fits_and_other_precisions_are_left_as_configured():
    assert cpu_fit_precision("bf16-mixed", on_cpu=False, flags=AVX2) == ("bf16-mixed", None)
    assert cpu_fit_precision("32-true", on_cpu=True, flags=AVX2) == ("32-true", None)
    assert cpu_fit_precision("16-mixed", on_cpu=True, flags=AVX2) == ("16-mixed", None)


def test_memnets_fit_applies_the_rule_to_the_trainer_it_builds(tmp_path, monkeypatch):
    """A real LightningCLI build of a CPU fit that asks for bf16 autocast: the Trainer's precision is what
    this machine's flags allow."""
    from memnets.training.lit.cli import build_cli

    monkeypatch.chdir(tmp_path)
    cli = build_cli("encoder", ["-c", "encoder/smoke", "--trainer.precision", "bf16-mixed"], run=False)
    expected = "bf16-mixed" if cpu_half_precision()["bf16"] else "32-true"
    assert cli.trainer.precision == expected


@pytest.mark.parametrize("native_bf16", [True, False])
def test_memnets_fit_falls_back_to_float32_where_the_cpu_has_no_bf16(tmp_path, monkeypatch, native_bf16):
    """The CLI's rule on a CPU with and without bf16: this machine's flags replaced by either answer."""
    from memnets.training.lit.cli import build_cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(precision_rule, "cpu_half_precision", lambda flags=None: {"bf16": native_bf16})
    cli = build_cli("encoder", ["-c", "encoder/smoke", "--trainer.precision", "bf16-mixed"], run=False)
    assert cli.trainer.precision == ("bf16-mixed" if native_bf16 else "32-true")


def test_a_fit_runs_on_the_cpu_when_asked_or_when_auto_finds_no_accelerator():
    assert fit_on_cpu("cpu") and fit_on_cpu("CPU")
    assert not fit_on_cpu("gpu") and not fit_on_cpu("cuda")
    no_accelerator = not (torch.cuda.is_available() or torch.backends.mps.is_available())
    assert fit_on_cpu("auto") == no_accelerator and fit_on_cpu(None) == no_accelerator
