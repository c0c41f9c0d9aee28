"""bench/fact_changes.py's day of fact changes through memnets.open on the tiny encoder: every
current fact is the latest statement, every earlier one is in its history (the benchmark runs the
same replay on all-MiniLM-L6-v2). The threshold belongs to the encoder: the tiny random one puts
unrelated texts up to ~0.96 apart and one-detail changes at ~0.995, so it runs at 0.98."""

from __future__ import annotations

import pytest

import memnets
from bench.fact_changes import CHANGES, DAY, FACTS, STEADY, replay

TINY_THRESHOLD = 0.98


def test_a_day_of_fact_changes_leaves_the_latest_current_and_the_rest_in_history(tiny_model_dir, tmp_path):
    from memnets.nn.encoder import MemoryEncoder

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    with memnets.open(tmp_path / "memory", encoder=encoder, duplicate_threshold=TINY_THRESHOLD) as memory:
        result = replay(memory)
        assert result["failures"] == []
        assert result["current"] == len(FACTS) + len(STEADY)  # one current memory per fact
        assert len(CHANGES) == len(DAY) - len(FACTS)
        flight = result["facts"]["flight"]
        assert flight["current"] == "My flight to Berlin leaves at 12:15 on Monday"
        assert flight["outcomes"] == ["added", "updated", "updated"]
    # the checks can fail: with the consistency check off, every change is a second current memory
    with memnets.open(tmp_path / "off", encoder=encoder, duplicate_threshold=None) as memory:
        failures = replay(memory)["failures"]
        assert {line.split(":")[0] for line in failures} == set(FACTS)


@pytest.mark.slow
def test_the_day_of_fact_changes_on_the_bundled_encoder_catches_the_changed_names(tmp_path):
    """The held-out day on all-MiniLM-L6-v2 at its measured threshold: the two name changes (cosines
    0.78 and 0.54, far below it) are updates like the times and numbers, by the sentence frame."""
    with memnets.open(tmp_path / "memory") as memory:
        result = replay(memory)
    assert result["failures"] == []
    assert result["facts"]["dog"]["outcomes"] == ["added", "updated"]
    assert result["facts"]["meeting"]["current"] == "The team meeting with Omar is at 4 pm on Tuesday"
