"""The expected time of a fit, said after a few timed steps: the arithmetic, and a real tiny fit's message."""

from __future__ import annotations

import logging

import pytest
import yaml
from fit_helpers import encoder_trainer_config, tiny_data_config

from memnets.training.commands.run import load_steps
from memnets.training.configs import load_config
from memnets.training.lit.cli import build_cli
from memnets.training.lit.time_estimate import FitTimeEstimate, estimate_fit


def test_the_median_step_times_the_fit_and_the_rest_of_the_job():
    estimate = estimate_fit([2.0, 9.0, 3.0], total_steps=100, rest_of_job_steps=40)
    assert estimate.seconds_per_step == 3.0  # the median: one slow step (a load spike) does not count
    assert estimate.fit_seconds == 300.0 and estimate.job_seconds == 420.0
    assert estimate.over(400) and not estimate.over(420) and not estimate.over(None)
    fit_only = estimate_fit([3.0], total_steps=100, rest_of_job_steps=None)
    assert fit_only.job_seconds is None and fit_only.over(299) and not fit_only.over(300)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="step_seconds is empty"):
        estimate_fit([], total_steps=10, rest_of_job_steps=None)
    with pytest.raises(ValueError, match="total_steps must be at least 1, got 0"):
        estimate_fit([1.0], total_steps=0, rest_of_job_steps=None)
    with pytest.raises(ValueError, match="timed_steps must be at least 1, got 0"):
        FitTimeEstimate(timed_steps=0)


def test_a_fit_over_its_budget_warns_after_its_first_timed_steps(tmp_path, tiny_model_dir, tiny_locomo_path, caplog):
    config = {
        "seed_everything": 0,
        "trainer": encoder_trainer_config(tmp_path, max_epochs=2),
        "model": {"backbone": str(tiny_model_dir), "max_length": 32},
        "data": {
            "data_config": str(tiny_data_config(tmp_path, tiny_locomo_path)),
            "batch_size": 4,
            "hard_negatives": 0,
        },
    }
    path = tmp_path / "fit.yaml"
    path.write_text(yaml.safe_dump(config))
    budget = ["--time_estimate.timed_steps", "2", "--time_estimate.rest_of_job_steps", "50"]
    budget += ["--time_estimate.budget_minutes", "1e-6", "--time_estimate.advice", "try --trainer.max_epochs 1"]
    cli = build_cli("encoder", ["-c", str(path), *budget], run=False)
    (callback,) = [c for c in cli.trainer.callbacks if isinstance(c, FitTimeEstimate)]
    with caplog.at_level(logging.INFO, logger="memnets.training.lit.time_estimate"):
        cli.trainer.fit(cli.model, cli.datamodule)

    total = int(cli.trainer.estimated_stepping_batches)
    assert total > 3 and len(callback.step_seconds) == 2  # steps 2 and 3 timed, then no more
    estimate = callback.estimate
    assert estimate.fit_seconds == pytest.approx(estimate.seconds_per_step * total)
    assert estimate.job_seconds == pytest.approx(estimate.seconds_per_step * (total + 50))
    (record,) = [r for r in caplog.records if r.name == "memnets.training.lit.time_estimate"]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert f"{total} steps" in message and "the whole job about" in message
    assert "over the 0.0 min budget" in message and message.endswith("try --trainer.max_epochs 1")


def test_the_cpu_config_has_a_15_minute_budget_and_a_one_epoch_pipeline_to_turn_to():
    settings = load_config("encoder/cpu")["time_estimate"]
    callback = FitTimeEstimate(**settings)  # the config's keys are the callback's arguments
    assert callback.budget_seconds == 15 * 60
    # a bf16 step is faster than a float32 one, so the job's other steps are more of them
    assert callback.rest_steps("bf16-mixed") > callback.rest_steps("32-true") > 0
    assert "pipeline/cpu_short" in callback.advice
    short, cpu = load_steps("pipeline/cpu_short"), load_steps("pipeline/cpu")
    assert [name for name, _ in short] == [name for name, _ in cpu]
    assert [(n, a) for (n, a), (_, b) in zip(short, cpu, strict=True) if a != b] == [
        ("encoder", ["fit", "encoder", "-c", "encoder/cpu", "--trainer.max_epochs", "1"])
    ]


def test_the_rest_of_the_job_is_taken_for_the_precision_the_fit_runs_in(caplog):
    per_precision = FitTimeEstimate(rest_of_job_steps={"bf16-mixed": 286, "32-true": 169})
    assert per_precision.rest_steps("bf16-mixed") == 286 and per_precision.rest_steps("32-true") == 169
    with caplog.at_level(logging.WARNING, logger="memnets.training.lit.time_estimate"):
        assert per_precision.rest_steps("16-mixed") is None  # the fit goes on, its own time estimated
    assert "no entry for precision '16-mixed' (it gives 32-true, bf16-mixed)" in caplog.text
    assert FitTimeEstimate(rest_of_job_steps=40).rest_steps("16-mixed") == 40
    assert FitTimeEstimate().rest_steps("32-true") is None
