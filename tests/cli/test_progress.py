"""Quiet by default: progress as a bar on a terminal only (plain lines elsewhere, nothing with -q),
no "Loading weights" bar on model loads, memnets' logs at WARNING unless -v."""

from __future__ import annotations

import io
import logging

import pytest

from memnets import progress as progress_module
from memnets.console import setup_output
from memnets.progress import set_progress, track


@pytest.fixture(autouse=True)
def auto_mode(monkeypatch):
    monkeypatch.delenv("MEMNETS_PROGRESS", raising=False)
    set_progress(None)
    yield
    set_progress(None)


def test_off_a_terminal_a_plain_line_every_few_seconds_and_one_at_the_end(monkeypatch):
    stream = io.StringIO()  # no terminal
    monkeypatch.setattr(progress_module, "PLAIN_EVERY_S", 3600.0)
    assert list(track(range(500), desc="turns", unit="turn", stream=stream)) == list(range(500))
    assert stream.getvalue().splitlines() == [stream.getvalue().strip()]  # one line, at the end
    assert stream.getvalue().startswith("turns: 500/500 turn (100%)") and "done in" in stream.getvalue()
    assert "\r" not in stream.getvalue()

    monkeypatch.setattr(progress_module, "PLAIN_EVERY_S", 0.0)  # every update is due
    stream = io.StringIO()
    with track(total=3, desc="rows", unit="row", stream=stream) as bar:
        for _ in range(3):
            bar.update(1)
            bar.set_postfix(loss="0.5")
    lines = stream.getvalue().splitlines()
    counts = ["rows: 1/3 row (33%)", "rows: 2/3 row (67%)", "rows: 3/3 row (100%)", "rows: 3/3 row (100%)"]
    assert [line.split(",")[0] for line in lines] == counts
    assert "after" in lines[0] and "done in" in lines[-1] and "loss=0.5" in lines[-1] and bar.n == 3


def test_a_bar_redraws_with_carriage_returns_which_is_why_files_get_lines():
    stream = io.StringIO()
    set_progress("bar")
    list(track(range(50), desc="turns", stream=stream))
    assert "\r" in stream.getvalue()


def test_off_writes_nothing(monkeypatch):
    stream = io.StringIO()
    set_progress("off")
    assert sum(track(range(10), stream=stream)) == 45
    assert stream.getvalue() == ""
    set_progress(None)
    monkeypatch.setenv("MEMNETS_PROGRESS", "off")
    list(track(range(10), stream=stream))
    assert stream.getvalue() == ""
    monkeypatch.setenv("MEMNETS_PROGRESS", "sometimes")
    with pytest.raises(ValueError, match="MEMNETS_PROGRESS must be one of"):
        track(range(3), stream=stream)
    with pytest.raises(ValueError, match="mode must be one of"):
        set_progress("loud")


def test_quiet_flag_turns_progress_off_and_verbose_shows_memnets_info(capsys):
    log = logging.getLogger("memnets.test")
    setup_output(0, False)
    log.info("hidden")
    log.warning("shown")
    setup_output(1, False)
    log.info("now shown")
    setup_output(0, True)
    log.warning("quiet hides warnings")
    assert progress_module.progress_mode() == "off"
    setup_output(0, False)
    err = capsys.readouterr().err
    assert "shown" in err and "now shown" in err
    assert "hidden" not in err and "quiet hides warnings" not in err
    assert sum(getattr(h, "memnets_command", False) for h in logging.getLogger().handlers) == 1


def test_opening_a_memory_draws_no_loading_bar(tiny_model_dir, tmp_path, capfd):
    from transformers import AutoModel

    import memnets

    AutoModel.from_pretrained(tiny_model_dir)
    assert "Loading weights" in capfd.readouterr().err  # what transformers does on its own
    memnets.open(tmp_path / "memory", encoder=tiny_model_dir).close()
    assert capfd.readouterr().err == ""
    AutoModel.from_pretrained(tiny_model_dir)
    assert "Loading weights" in capfd.readouterr().err  # its setting is back as it was
