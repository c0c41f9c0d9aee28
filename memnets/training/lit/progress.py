"""Lightning's progress bar on a terminal only; elsewhere one plain line every so often.

Lightning's TQDMProgressBar redraws itself with carriage returns, which a log file or a CI log keeps
as hundreds of copies of one line. :class:`TerminalProgressBar` is that bar when
:func:`memnets.progress.track` would draw one (a terminal, or ``MEMNETS_PROGRESS=bar``); otherwise it
stays silent and reports each training epoch as :func:`~memnets.progress.track`'s plain lines (one
every ``PLAIN_EVERY_S`` seconds and one at the epoch's end), nothing with ``-q``/``MEMNETS_PROGRESS=off``.
"""

from __future__ import annotations

import sys

from lightning.pytorch.callbacks import TQDMProgressBar

from memnets.progress import progress_mode, track


class TerminalProgressBar(TQDMProgressBar):
    """TQDMProgressBar on a terminal, plain progress lines elsewhere (see the module docstring)."""

    def __init__(self, refresh_rate: int = 1, process_position: int = 0):
        super().__init__(refresh_rate=refresh_rate, process_position=process_position)
        mode = progress_mode()
        self._plain_lines = mode == "plain" or (mode == "auto" and not sys.stderr.isatty())
        if mode == "off" or self._plain_lines:
            self.disable()
        self._epoch = None

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        super().on_train_epoch_start(trainer, pl_module)
        if self._plain_lines and trainer.is_global_zero:
            total = trainer.num_training_batches if trainer.num_training_batches != float("inf") else None
            self._epoch = track(total=total, desc=f"epoch {trainer.current_epoch}", unit="step")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self._epoch is not None:
            loss = trainer.callback_metrics.get("train/loss")
            if loss is not None:
                self._epoch.set_postfix(loss=f"{float(loss):.4f}")
            self._epoch.update(1)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if self._epoch is not None:
            self._epoch.close()
            self._epoch = None
