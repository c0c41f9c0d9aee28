"""Torch's intra-op threads for training: torch's own count shared among the local processes.

Every training process on a machine runs its own pool of intra-op threads, and torch gives each
process one thread per core. N DDP processes on a CPU would so run N x cores threads on the cores
and slow each other down. :class:`TorchThreads` (a callback that ``memnets fit`` adds to every fit;
``torch_threads: {per_process: N}`` in a config, ``--torch_threads.per_process N`` on the command
line) sets every process to :func:`choose_threads`' count when the Trainer sets up, after
Lightning's launcher (which applies a like rule to DDP only, and only when ``OMP_NUM_THREADS`` is
unset), and logs what it chose and why; ``training.json`` records the count (``torch_threads``).
One process keeps torch's count; two DDP processes on 2 cores get 1 thread each.

Mining hard negatives (the DataModule's ``prepare_data``, once, then cached) runs before setup,
with the count Lightning's launcher or torch left.
"""

from __future__ import annotations

import logging
import os

import lightning as L
import torch

logger = logging.getLogger(__name__)

ENVIRONMENT = "OMP_NUM_THREADS"


def choose_threads(
    machine_threads: int, local_processes: int, configured: int | None, environment: int | None
) -> tuple[int, str]:
    """(torch threads per process, why): ``configured`` if given, else ``OMP_NUM_THREADS`` as the user
    set it (``environment``), else ``machine_threads`` (torch's count for one process on this machine,
    one per core) // ``local_processes``, at least 1."""
    if local_processes < 1:
        raise ValueError(f"local_processes must be at least 1, got {local_processes}")
    if configured is not None:
        return configured, "torch_threads.per_process"
    if environment is not None:
        return environment, f"{ENVIRONMENT}={environment}"
    threads = max(1, machine_threads // local_processes)
    return threads, f"torch's {machine_threads} threads // {local_processes} processes on this machine"


def positive_threads(value, name: str) -> int | None:
    """``value`` (an int or its text) as a positive int, None as None, else a ValueError naming ``name``."""
    if value is None:
        return None
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{name} must be a positive integer (torch threads per process), got {value!r}")
    return int(text)


class TorchThreads(L.Callback):
    """Sets torch's intra-op threads of every training process (see the module docstring).

    Args:
        per_process: threads per process; ``None`` (the default) takes ``OMP_NUM_THREADS`` when the
            user set it, else torch's count for this machine divided by the processes on it.
    """

    def __init__(self, per_process: int | None = None):
        self.per_process = positive_threads(per_process, "torch_threads.per_process")
        # read as the command started: Lightning's DDP launcher sets both itself later
        self.environment = positive_threads(os.environ.get(ENVIRONMENT), ENVIRONMENT)
        self.machine_threads = torch.get_num_threads()
        self.threads: int | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        local_processes = getattr(trainer.strategy, "num_processes", 1)
        self.threads, reason = choose_threads(self.machine_threads, local_processes, self.per_process, self.environment)
        torch.set_num_threads(self.threads)
        logger.info("training with %d torch threads per process (%s)", self.threads, reason)
