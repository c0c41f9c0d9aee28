"""The expected time of a fit on this machine, said up front after a few timed training steps.

A training step's time differs several-fold between CPUs of the same core count (memnets.machine),
so a fixed figure in the README is wrong somewhere. :class:`FitTimeEstimate` (a callback in the
encoder configs) times the first steps of the fit, skipping the first (warm-up), and logs once what
all the fit's steps will take at that pace, and optionally what the whole pipeline job will take:
its other steps (heads, evaluation, export) slow down with the CPU much as a training step does, so
they are given as a number of training steps (``rest_of_job_steps``, measured). With a budget it
says whether the job fits, and what to do when it does not.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import lightning as L

from memnets.machine import cpu_model

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitEstimate:
    """Seconds per training step (median of the timed ones), of all the fit's steps, of the whole job
    (None without ``rest_of_job_steps``)."""

    seconds_per_step: float
    fit_seconds: float
    job_seconds: float | None

    def over(self, budget_seconds: float | None) -> bool:
        """Whether the job (else the fit, without a job estimate) takes longer than ``budget_seconds``."""
        expected = self.job_seconds if self.job_seconds is not None else self.fit_seconds
        return budget_seconds is not None and expected > budget_seconds


def estimate_fit(step_seconds: Sequence[float], total_steps: int, rest_of_job_steps: float | None) -> FitEstimate:
    """The :class:`FitEstimate` of a fit of ``total_steps`` steps from the timed ``step_seconds``."""
    if not step_seconds:
        raise ValueError("step_seconds is empty: time at least one training step")
    if total_steps < 1:
        raise ValueError(f"total_steps must be at least 1, got {total_steps}")
    per_step = statistics.median(step_seconds)
    fit = per_step * total_steps
    job = fit + per_step * rest_of_job_steps if rest_of_job_steps is not None else None
    return FitEstimate(per_step, fit, job)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


class FitTimeEstimate(L.Callback):
    """Logs the expected time of the fit (and of the job) after ``timed_steps`` steps past the first.

    Args:
        timed_steps: steps timed after the first one (which is warm-up and not counted).
        rest_of_job_steps: the pipeline's other steps, in training steps of this fit (None: no job
            estimate), one number or one per precision the fit may run in (``{"bf16-mixed": 286,
            "32-true": 169}``): a bf16 step is 2.5x faster where the CPU has bf16, and the job's other
            steps gain less (memnets.training.lit.precision); e.g. pipeline/cpu's other steps took as long as
            169 float32 steps of encoder/cpu on the 2-core AMD EPYC, or 286 bf16 ones.
        budget_minutes: the time the job (else the fit) should take; when the estimate is over it,
            the message is a warning with ``advice``.
        advice: what to do when over budget (e.g. the config's shorter variant).
    """

    def __init__(
        self,
        timed_steps: int = 5,
        rest_of_job_steps: float | dict[str, float] | None = None,
        budget_minutes: float | None = None,
        advice: str = "",
    ):
        if timed_steps < 1:
            raise ValueError(f"timed_steps must be at least 1, got {timed_steps}")
        self.timed_steps = timed_steps
        self.rest_of_job_steps = rest_of_job_steps
        self.budget_seconds = budget_minutes * 60 if budget_minutes is not None else None
        self.advice = advice
        self.step_seconds: list[float] = []
        self.estimate: FitEstimate | None = None
        self._started = 0.0
        self._steps_seen = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._steps_seen += 1
        if self.estimate is not None or self._steps_seen == 1:  # done, or the warm-up step
            return
        self.step_seconds.append(time.perf_counter() - self._started)
        if len(self.step_seconds) == self.timed_steps:
            self.estimate = estimate_fit(
                self.step_seconds, int(trainer.estimated_stepping_batches), self.rest_steps(str(trainer.precision))
            )
            if trainer.is_global_zero:
                self._report(int(trainer.estimated_stepping_batches))

    def rest_steps(self, precision: str) -> float | None:
        """``rest_of_job_steps`` for a fit in ``precision``: the number, or its entry for that precision; None
        (the fit's time alone is estimated, said in a warning) when the mapping has none."""
        if not isinstance(self.rest_of_job_steps, dict):
            return self.rest_of_job_steps
        if precision not in self.rest_of_job_steps:
            logger.warning(
                "time_estimate.rest_of_job_steps has no entry for precision %r (it gives %s): "
                "the fit's time is estimated, not the job's",
                precision,
                ", ".join(sorted(self.rest_of_job_steps)),
            )
            return None
        return self.rest_of_job_steps[precision]

    def _report(self, total_steps: int) -> None:
        estimate = self.estimate
        message = (
            f"expected time on this machine ({cpu_model()}): {estimate.seconds_per_step:.2f} s per step "
            f"(median of steps 2-{self.timed_steps + 1}), {total_steps} steps = {_minutes(estimate.fit_seconds)}"
        )
        if estimate.job_seconds is not None:
            message += f", the whole job about {_minutes(estimate.job_seconds)}"
        if estimate.over(self.budget_seconds):
            logger.warning("%s: over the %s budget. %s", message, _minutes(self.budget_seconds), self.advice or "")
        else:
            logger.info("%s", message)
