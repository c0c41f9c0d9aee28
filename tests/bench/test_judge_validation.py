"""bench.experiments.judge_validation, run as a person runs it (--quick: the first 40 validation pairs) with the
judge memnets ships: every figure it writes is a count over those pairs, and the replay saw all of them."""

from __future__ import annotations

import json
from pathlib import Path

from bench_helpers import result, run_bench

ROOT = Path(__file__).resolve().parents[2]
FILLERS = 6  # other facts beside each pair, as the replay writes them


def test_quick_validation_of_the_shipped_judge(tmp_path):
    run_bench("bench.experiments.judge_validation", "shipped", "--quick", "--out", tmp_path)
    found = result(tmp_path, "judge_validation")["results"]["shipped"]
    rows = [json.loads(line) for line in (ROOT / "data/supersession/written/validation.jsonl").read_text().splitlines()]
    rows = rows[:40]
    changes = sum(r["label"] for r in rows)
    assert found["pairs"]["pairs"] == 40 and found["pairs"]["other_subjects"] == 40 * FILLERS
    assert 0 <= found["pairs"]["look_alikes_ended"] <= found["pairs"]["no_change_ended"] <= 40 - changes
    for path in ("plain", "messages"):
        assert found[path]["changes"] == changes and found[path]["no_change_pairs"] == 40 - changes
        assert found[path]["fillers"] == 40 * FILLERS
        assert 0 <= found[path]["current_first_k1"] <= found[path]["current_above_k10"] <= 100
