"""bench.experiments.judge_validation: the other subjects each newer statement meets, and a judge's figures at its
threshold on the validation pairs, read from the real files with a tiny real judge."""

from __future__ import annotations

from pathlib import Path

from bench.experiments.fact_currency import FILLERS, read_rows
from bench.experiments.judge_validation import VALIDATION, other_subjects, pair_figures
from memnets.nn.change_judge import ChangeJudge, ChangeJudgeNet

ROOT = Path(__file__).resolve().parents[2]


def rows() -> list[dict]:
    return [row for path in VALIDATION for row in read_rows(ROOT / path)][:60]


def test_other_subjects_pair_each_newer_statement_with_six_facts_of_other_domains():
    found = other_subjects(rows())
    assert len(found) == FILLERS * 60
    domain = {row["older"]: row["domain"] for row in rows()}
    newer_domain = {row["newer"]: row["domain"] for row in rows()}
    assert all(domain[older] != newer_domain[newer] for older, newer in found)
    assert found == other_subjects(rows())  # seeded


def test_a_judge_that_ends_everything_or_nothing_is_counted_so(tiny_model_dir):
    judge = ChangeJudge(ChangeJudgeNet(1, str(tiny_model_dir)), 0.0)  # every score >= 0: ends every pair
    every = pair_figures(judge, rows())
    changes = sum(r["label"] for r in rows())
    assert every["changes_ended"] == 100.0 and every["no_change_ended"] == 60 - changes
    assert every["other_subjects_ended"] == every["other_subjects"] == FILLERS * 60
    judge.threshold = 1.01  # above every probability: ends nothing
    none = pair_figures(judge, rows())
    assert none["changes_ended"] == 0.0 and none["no_change_ended"] == none["other_subjects_ended"] == 0
