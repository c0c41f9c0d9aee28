"""bench.experiments.judge_validation, run as a person runs it (--quick: 24 validation pairs spread over the domains) with the
judge memnets ships: every figure it writes is a count over those pairs, and the replay saw all of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_helpers import result, run_bench

WRITTEN = Path(__file__).resolve().parents[2] / "data" / "supersession" / "written"
QUICK = 24  # the script's --quick pairs
FILLERS = 6  # other facts beside each pair, as the replay writes them


@pytest.mark.slow  # about 30 s: a replay of the validation pairs through the shipped judge (.ci/run runs it)
def test_quick_validation_of_the_shipped_judge(tmp_path):
    run_bench("bench.experiments.judge_validation", "shipped", "--quick", "--out", tmp_path)
    found = result(tmp_path, "judge_validation")["results"]["shipped"]
    files = ("validation.jsonl", "validation_j.jsonl")
    rows = [json.loads(line) for name in files for line in (WRITTEN / name).read_text().splitlines()]
    rows = rows[:: len(rows) // QUICK][:QUICK]  # --quick: 24 pairs spread over the domains
    changes = sum(r["label"] for r in rows)
    assert found["pairs"]["pairs"] == QUICK and found["pairs"]["other_subjects"] == QUICK * FILLERS
    assert 0 <= found["pairs"]["look_alikes_ended"] <= found["pairs"]["no_change_ended"] <= QUICK - changes
    for path in ("plain", "messages"):
        assert found[path]["changes"] == changes and found[path]["no_change_pairs"] == QUICK - changes
        assert found[path]["fillers"] == QUICK * FILLERS
        assert 0 <= found[path]["current_first_k1"] <= found[path]["current_above_k10"] <= 100


@pytest.mark.slow  # about 25 s: an epoch of a judge's fit (.ci/run runs it)
def test_quick_question_judge_reports_each_epoch_on_the_validation_pairs(tmp_path):
    """bench.experiments.question_judge --quick: 64 training and 64 validation pairs, one epoch; the figures are
    counts over those pairs and an AP in [0, 1], for the shipped judge and after the epoch."""
    run_bench("bench.experiments.question_judge", "--quick", "--epochs", "1", "--out", tmp_path)
    found = result(tmp_path, "question_judge")
    assert found["settings"]["with_question"] is True and len(found["results"]["epochs"]) == 2
    for epoch in found["results"]["epochs"]:
        assert 0.0 <= epoch["ap"] <= 1.0 and 0.0 <= epoch["changes_ended_pct"] <= 100.0
        assert 0 <= epoch["look_alikes_ended"] <= epoch["false_endings"] <= 64
        assert 0 <= epoch["mismatched_ended_of_500"] <= 500
