"""Where the conversations are found: --data FILE, then $MEMNETS_DATA, then data/locomo of a checkout."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memnets.cli import main as cli_main
from memnets.extras import install_command, missing_extra_message
from memnets.training.data.config import load_data_config
from memnets.training.data.location import DATA_ENV, DataNotFoundError, find_data, find_input

CHECKOUT_DATA = Path(__file__).resolve().parents[2] / "data" / "locomo" / "locomo8.json"


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working folder with no data, no variable, and no checkout above the imported package."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setattr("memnets.training.data.location._source_checkout", lambda: tmp_path / "no-checkout")
    return tmp_path


def test_the_order_is_explicit_then_variable_then_checkout(tmp_path, monkeypatch, tiny_locomo_path):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert find_data() == CHECKOUT_DATA  # the checkout that memnets runs from
    local = tmp_path / "data" / "locomo"
    local.mkdir(parents=True)
    shutil.copy(tiny_locomo_path, local / "locomo8.json")
    assert find_data() == local / "locomo8.json"  # the working folder's checkout comes first
    monkeypatch.setenv(DATA_ENV, str(tiny_locomo_path))
    assert find_data() == tiny_locomo_path
    monkeypatch.setenv(DATA_ENV, str(local))  # a folder holding locomo8.json
    assert find_data() == local / "locomo8.json"
    assert find_data(CHECKOUT_DATA) == CHECKOUT_DATA  # --data wins over everything


def test_nothing_found_names_all_three_places(elsewhere):
    with pytest.raises(DataNotFoundError) as error:
        find_data()
    message = str(error.value)
    assert "--data FILE" in message and f"${DATA_ENV}" in message and "data/locomo" in message


def test_an_input_a_config_names_is_found_from_any_folder(tmp_path, monkeypatch):
    """A relative path of a config (the judge's pairs) under the working folder, else in the checkout memnets runs
    from; neither: one line naming it and where it looked (the supersession step had stopped on a traceback when run
    outside the checkout)."""
    monkeypatch.chdir(tmp_path)
    written = "data/supersession/written/train_a.jsonl"
    assert find_input(written, "pairs") == CHECKOUT_DATA.parents[2] / written
    (tmp_path / "mine.jsonl").write_text("{}\n")
    assert find_input("mine.jsonl", "pairs") == tmp_path / "mine.jsonl"
    with pytest.raises(DataNotFoundError, match=r"pairs: data/nope.jsonl does not exist \(looked at .*nope.jsonl"):
        find_input("data/nope.jsonl", "pairs")


def test_a_named_file_that_is_missing_is_an_error_not_a_fallback(tmp_path, monkeypatch):
    with pytest.raises(DataNotFoundError, match="nope.json does not exist"):
        find_data(tmp_path / "nope.json")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "gone"))
    with pytest.raises(DataNotFoundError, match=rf"\${DATA_ENV}: .*gone"):
        find_data()


def test_data_overrides_the_config_path(tmp_path, tiny_locomo_path):
    config = tmp_path / "data.yaml"
    config.write_text(f"path: {CHECKOUT_DATA}\nsplits: {{train: [tiny-1], validation: [], test: [tiny-2]}}\n")
    assert load_data_config(config).path == CHECKOUT_DATA
    assert load_data_config(config, data=tiny_locomo_path).path == tiny_locomo_path


def test_every_command_that_reads_conversations_takes_data(elsewhere, capsys):
    """Without data anywhere, each command fails with the one message; with --data it gets past it."""
    for argv in (["data", "prepare"], ["replay"], ["eval", "retrieval", "bm25"]):
        try:
            code = cli_main(argv)
        except SystemExit as exit:  # argparse's usage error
            code = exit.code
        assert code == 2, argv
        assert "--data FILE" in capsys.readouterr().err, argv
    for argv in (["data", "prepare"], ["eval", "retrieval"], ["eval", "heads"], ["export"], ["replay"], ["run"]):
        assert cli_main([*argv, "--help"]) == 0
        assert "--data FILE" in capsys.readouterr().out, argv


def test_a_missing_extra_names_the_extra():
    message = missing_extra_message(ModuleNotFoundError("No module named 'lightning'", name="lightning"), "memnets fit")
    assert message.startswith("memnets fit needs") and message.endswith(install_command("train"))
    assert missing_extra_message(ModuleNotFoundError("x", name="not_an_extra_module")) is None
