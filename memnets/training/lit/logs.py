"""Lightning's log lines through memnets' one stderr handler, without Lightning's advertising tips.

Lightning adds a handler of its own to its ``lightning`` logger when it is imported (and, when the
root logger had none yet, to ``lightning.pytorch`` and ``lightning.fabric``), while its records
also reach the root logger, where a command's handler (:func:`memnets.console.setup_output`) writes
them again: every line came out twice, once as ``INFO: ...`` and once in memnets' format. And each
fit logged two "💡 Tip: ... try installing litlogger / litmodels" lines, advertising for a hosted
service, on every run.
"""

from __future__ import annotations

import logging

LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")
TIPS_LOGGER = "lightning.pytorch.utilities.rank_zero"  # where rank_zero_info writes the tips
TIP_PREFIX = "💡 Tip:"


def _not_a_tip(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(TIP_PREFIX)


def adopt_lightning_logging() -> None:
    """Once lightning is imported: drop its own stream handlers when a memnets command's handler is on
    the root logger (the records reach it there), and its INFO level, set at its import, for the command's level
    of other libraries (the root's: WARNING, ERROR with -q, INFO with -vv; its "Seed set to 0" and "GPU available"
    lines had come out at every level); and drop its tips. Idempotent."""
    root = logging.getLogger()
    if any(getattr(handler, "memnets_command", False) for handler in root.handlers):
        for name in LIGHTNING_LOGGERS:
            logger = logging.getLogger(name)
            for handler in [h for h in logger.handlers if type(h) is logging.StreamHandler]:
                logger.removeHandler(handler)
            logger.propagate = True
            logger.setLevel(root.level)
    tips = logging.getLogger(TIPS_LOGGER)
    if _not_a_tip not in tips.filters:
        tips.addFilter(_not_a_tip)
