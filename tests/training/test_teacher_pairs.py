"""Distilling a judge into the one that ships: data/supersession/teacher.py pairs two writers' statements on one
subject and writes a real judge's scores of them; `memnets fit supersession --data.scored` learns those scores as
its targets beside the labelled pairs; a scores file that is not one is refused, naming the file and line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import lightning as L
import pytest

from memnets.nn.change_judge import ChangeJudge, probabilities
from memnets.nn.judge_files import DEFAULT_JUDGE_DIR
from memnets.training.lit.supersession import ChangeJudgeDataModule, read_scored_pairs

ROOT = Path(__file__).resolve().parents[2]


def _row(id_, domain, older, newer, label):
    return {"id": id_, "speaker": "user", "older": older, "newer": newer, "label": label, "domain": domain}


ROWS = [
    _row("A-1", "home", "I live in Leeds.", "Unpacked the last box in the York flat.", 1),
    _row("A-2", "home", "We rent a flat in Bath.", "My sister just moved to York.", 0),
    _row("B-1", "home", "Home is a houseboat on the Thames.", "Got the keys to our new place in Cardiff!", 1),
    _row("B-2", "pets", "My cat is called Miso.", "Miso napped all day.", 0),
    _row("B-3", "pets", "I've got two rabbits.", "We adopted a greyhound last week.", 1),
]


@pytest.fixture(scope="module")
def teacher():
    spec = importlib.util.spec_from_file_location("teacher", ROOT / "data" / "supersession" / "teacher.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(folder: Path, name: str, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_cross_pairs_are_one_row_s_older_beside_another_row_s_newer_of_its_domain(teacher):
    pairs = teacher.cross_pairs(ROWS, per_row=2)
    by_id = {row["id"]: row for row in ROWS}
    written = {(row["older"], row["newer"]) for row in ROWS}
    assert len(pairs) == 2 * 3 + 1 * 2  # three home rows with two others each; two pets rows with one other
    for pair in pairs:
        older, newer = by_id[pair["older_from"]], by_id[pair["newer_from"]]
        assert pair["older_from"] != pair["newer_from"] and older["domain"] == newer["domain"] == pair["domain"]
        assert (pair["older"], pair["newer"]) == (older["older"], newer["newer"])
        assert (pair["older"], pair["newer"]) not in written
    assert teacher.cross_pairs(ROWS, per_row=2) == pairs  # seeded by each row's id
    assert len(teacher.cross_pairs(ROWS, per_row=1)) == len(ROWS)


def test_cross_pairs_across_domains_pair_each_row_with_rows_of_the_other_domains(teacher):
    pairs = teacher.cross_pairs(ROWS, per_row=2, across=True)
    by_id = {row["id"]: row for row in ROWS}
    assert len(pairs) == 2 * len(ROWS)  # every row has at least two rows of another domain
    for pair in pairs:
        older, newer = by_id[pair["older_from"]], by_id[pair["newer_from"]]
        assert older["domain"] == pair["domain"] != newer["domain"]
        assert (pair["older"], pair["newer"]) == (older["older"], newer["newer"])


def test_the_script_writes_the_teacher_judge_s_scores_of_the_training_rows_only(teacher, tmp_path):
    source = tmp_path / "written"
    _write(source, "train_x.jsonl", ROWS)
    _write(source, "test.jsonl", [_row("T-1", "home", "I live in Oslo.", "Moved to Bergen.", 1)])  # never read
    out = tmp_path / "scored.jsonl"
    teacher.main(["--judge", str(DEFAULT_JUDGE_DIR), "--source", str(source), "--per-row", "2", "--out", str(out)])
    rows = read_scored_pairs([out])
    assert [(r["older"], r["newer"]) for r in rows] == [
        (p["older"], p["newer"]) for p in teacher.cross_pairs(ROWS, per_row=2)
    ]
    assert all("Oslo" not in r["older"] and "Bergen" not in r["newer"] for r in rows)
    expected = probabilities(ChangeJudge.load(), [(r["older"], r["newer"]) for r in rows])
    assert [r["score"] for r in rows] == pytest.approx(expected, abs=0.02)  # bf16 where the CPU has it natively


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"older": "a", "newer": "b"}, "'score' must be a number in \\[0, 1\\], got None"),
        ({"older": "a", "newer": "b", "score": 1.5}, "got 1.5"),
        ({"older": "a", "newer": "b", "score": True}, "got True"),
        ({"older": "a", "score": 0.5}, "text fields 'older' and 'newer'"),
    ],
)
def test_a_scores_file_that_is_not_one_is_refused_naming_its_line(tmp_path, row, message):
    good = {"older": "I live in Leeds.", "newer": "Moved to York.", "score": 0.9}
    path = _write(tmp_path, "scored.jsonl", [good, row])
    with pytest.raises(ValueError, match=f"scored.jsonl:2: .*{message}"):
        read_scored_pairs([path])


def test_scored_pairs_train_toward_the_teacher_s_probability_beside_the_labels(tmp_path):
    labelled = _write(tmp_path, "train.jsonl", ROWS)
    scored_rows = [{"older": "I live in Leeds.", "newer": "Got the keys to our new place in Cardiff!", "score": 0.8}]
    scored = _write(tmp_path, "scored.jsonl", scored_rows)
    module = ChangeJudgeDataModule([labelled], [labelled], batch_size=8, mismatched=0, scored=[scored])
    module.setup()
    pairs, targets = next(iter(module.val_dataloader()))
    assert targets.tolist() == [float(row["label"]) for row in ROWS]  # validation: the labels alone
    batch = ChangeJudgeDataModule._batch(module.splits["train"])
    assert batch[1].tolist() == pytest.approx([1.0, 0.0, 1.0, 0.0, 1.0, 0.8])
    assert module.pos_weight == pytest.approx((6 - 3.8) / 3.8)  # counts the teacher's share of a change


def test_fit_supersession_with_scored_pairs_records_them_in_what_the_judge_learned(tmp_path):
    """A real Lightning fit with ``--data.scored``: the saved judge names the scores file among what it learned."""
    from memnets.training.lit.cli import build_cli

    labelled = _write(tmp_path, "train.jsonl", ROWS)
    scored = _write(tmp_path, "scored.jsonl", [{"older": ROWS[0]["older"], "newer": ROWS[2]["newer"], "score": 0.9}])
    L.seed_everything(0, verbose=False)
    build_cli(
        "supersession",
        [
            "--data.train", json.dumps([str(labelled)]), "--data.validation", json.dumps([str(labelled)]),
            "--data.scored", json.dumps([str(scored)]), "--data.mismatched", "0",
            "--model.layers", "1", "--model.output_dir", str(tmp_path / "judge"),
            "--trainer.max_epochs", "1", "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
            "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(tmp_path),
        ],
    )  # fmt: skip
    config = json.loads((tmp_path / "judge" / "config.json").read_text())
    assert config["trained_on"] == [str(labelled), str(scored)]
