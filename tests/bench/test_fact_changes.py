"""bench/experiments/fact_changes.py's day of fact changes through memnets.open, run as its own process
on the tiny encoder: every current fact is the latest statement, every earlier one is in its history
(the experiment runs the same replay on all-MiniLM-L6-v2). The threshold belongs to the encoder: the
tiny random one puts unrelated texts up to ~0.96 apart and one-detail changes at ~0.995, so it runs
at 0.98."""

from __future__ import annotations

import pytest
from bench_helpers import result, run_bench

TINY_THRESHOLD = "0.98"
STEADY_FACTS = 3  # facts said once in the day, never changed


def replay(tmp_path, *args: str) -> dict:
    run_bench("bench.experiments.fact_changes", *args, "--out", tmp_path)
    return result(tmp_path, "fact_changes")


def test_a_day_of_fact_changes_leaves_the_latest_current_and_the_rest_in_history(tiny_model_dir, tmp_path):
    found = replay(tmp_path / "on", "--encoder", tiny_model_dir, "--duplicate-threshold", TINY_THRESHOLD)
    assert found["settings"]["duplicate_threshold"] == float(TINY_THRESHOLD)
    facts = found["results"]["facts"]
    assert found["results"]["failures"] == []
    assert found["results"]["current"] == len(facts) + STEADY_FACTS  # one current memory per fact
    for fact in facts.values():
        assert fact["history"] == fact["said"] and fact["current"] == fact["said"][-1]
    flight = facts["flight"]
    assert flight["current"] == "My flight to Berlin leaves at 12:15 on Monday"
    assert flight["outcomes"] == ["added", "updated", "updated"]
    # the checks can fail: with the consistency check off, every change is a second current memory
    off = replay(tmp_path / "off", "--encoder", tiny_model_dir, "--duplicate-threshold", "none")
    assert {line.split(":")[0] for line in off["results"]["failures"]} == set(facts)


@pytest.mark.slow
def test_the_day_of_fact_changes_on_the_bundled_encoder_catches_the_changed_names(tmp_path):
    """The held-out day on all-MiniLM-L6-v2 at its measured threshold: the two name changes (cosines
    0.78 and 0.54, far below it) are updates like the times and numbers, by the sentence frame."""
    found = replay(tmp_path)["results"]
    assert found["failures"] == []
    assert found["facts"]["dog"]["outcomes"] == ["added", "updated"]
    assert found["facts"]["meeting"]["current"] == "The team meeting with Omar is at 4 pm on Tuesday"
