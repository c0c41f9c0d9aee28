"""bf16 autocast in a CPU fit only where the CPU computes bf16 natively.

The CPU configs ask for ``trainer.precision: bf16-mixed`` (encoder/cpu, supersession/cpu): on a CPU with
AVX512-BF16 or AMX-BF16 a training step in bf16 autocast runs 2.5-3x faster than in float32 with the same
recall (docs/encoder.md, "The whole large backbone on a CPU, in bfloat16"). A CPU without those
instructions has no bf16 arithmetic to gain from, so there such a fit runs in float32 (``32-true``), with
one log line that names the flags looked for. Fits on a GPU, and precisions other than bf16 autocast,
are left as configured.
"""

from __future__ import annotations

import logging

from memnets.nn.backend_choice import HALF_PRECISION_FLAGS, cpu_half_precision

logger = logging.getLogger(__name__)

CPU_HALF_PRECISIONS = ("bf16-mixed", "bf16")  # Lightning's names of bf16 autocast


def cpu_fit_precision(precision: str, on_cpu: bool, flags: list[str] | None = None) -> tuple[str, str | None]:
    """(the precision to fit in, why it differs from ``precision`` or None): ``"32-true"`` for bf16
    autocast on a CPU (``on_cpu``) without native bf16 (its ``flags``, read from this machine when None),
    else ``precision``."""
    if not on_cpu or str(precision) not in CPU_HALF_PRECISIONS:
        return precision, None
    half = cpu_half_precision(flags)
    if half["bf16"]:
        return precision, None
    wanted = ", ".join(HALF_PRECISION_FLAGS["bf16"])
    return "32-true", (
        f"precision {precision} -> 32-true: this CPU has none of {wanted}, so bf16 autocast would be emulated "
        "(a fit in it is worth it only where the CPU computes bf16 natively)"
    )


def fit_on_cpu(accelerator) -> bool:
    """Whether a Trainer of ``accelerator`` (its config value) runs on the CPU: ``"cpu"``, or ``"auto"``
    (or unset) on a machine with neither CUDA nor Apple's MPS."""
    name = str(accelerator or "auto").lower()
    if name == "cpu":
        return True
    if name != "auto":
        return False
    import torch

    return not (torch.cuda.is_available() or torch.backends.mps.is_available())


def apply_cpu_fit_precision(trainer_config) -> None:
    """Sets ``trainer_config.precision`` (a parsed Trainer config) by :func:`cpu_fit_precision`, logging why when it changes."""
    precision, why = cpu_fit_precision(trainer_config.precision, fit_on_cpu(trainer_config.accelerator))
    if why is not None:
        trainer_config.precision = precision
        logger.warning(why)


__all__ = ["apply_cpu_fit_precision", "cpu_fit_precision", "fit_on_cpu"]
