"""Lightning's progress bar in `memnets fit`: a bar on a terminal only, plain lines in a log file."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.demos.boring_classes import BoringModel

from memnets.progress import set_progress
from memnets.training.configs import load_config
from memnets.training.lit.progress import TerminalProgressBar


def _fit(**trainer) -> None:
    L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_model_summary=False, **trainer).fit(
        BoringModel()
    )


def test_off_a_terminal_each_epoch_is_one_plain_line(capfd):
    _fit(callbacks=[TerminalProgressBar()], limit_train_batches=5, limit_val_batches=2)
    err = capfd.readouterr().err
    assert "\r" not in err  # no bar redraws in a log
    lines = [line for line in err.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in lines] == ["epoch 0", "epoch 1"]
    assert all("5/5 step" in line and "done in" in line for line in lines), lines


def test_quiet_means_no_progress_at_all(capfd):
    set_progress("off")
    try:
        _fit(callbacks=[TerminalProgressBar()], limit_train_batches=3, limit_val_batches=1)
    finally:
        set_progress(None)
    err = capfd.readouterr().err
    assert "epoch " not in err and "\r" not in err


def test_every_fit_config_uses_it():
    for name in ("encoder/cpu", "encoder/smoke", "importance/cpu", "gate/cpu", "importance/smoke", "gate/smoke"):
        callbacks = load_config(name)["trainer"].get("callbacks", [])
        assert "memnets.training.lit.progress.TerminalProgressBar" in [c["class_path"] for c in callbacks], name


def fit_under_a_command(tmp_path, verbose: int) -> None:
    """A real fit of BoringModel under a command's handler (setup_output at ``verbose``), the handler removed after."""
    import logging

    from memnets.console import setup_output
    from memnets.training.lit.logs import adopt_lightning_logging

    setup_output(verbose=verbose)
    try:
        adopt_lightning_logging()
        trainer = L.Trainer(  # with a checkpoint callback (in tmp_path), whose tip is dropped too
            max_epochs=1,
            limit_train_batches=2,
            limit_val_batches=1,
            enable_progress_bar=False,
            logger=False,
            default_root_dir=tmp_path,
        )
        trainer.fit(BoringModel())
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "memnets_command", False)]:
            root.removeHandler(handler)


def test_a_command_prints_each_lightning_line_once_and_no_tips(capfd, tmp_path):
    """Under a command's handler (setup_output) a real fit's Lightning lines come out once each, in
    memnets' format, at -vv (other libraries' INFO), none by default or at -v (its INFO level, set when it is
    imported, had let "Seed set" and "GPU available" through at every level), and Lightning's litlogger/litmodels
    tips not at all."""
    for verbose in (0, 1):
        fit_under_a_command(tmp_path, verbose)
        assert "INFO" not in capfd.readouterr().err
    fit_under_a_command(tmp_path, 2)
    err = capfd.readouterr().err
    assert err.count("`Trainer.fit` stopped: `max_epochs=1` reached.") == 1, err
    assert "INFO: " not in err  # Lightning's own handler's format
    assert "Tip" not in err and "litlogger" not in err and "litmodels" not in err
