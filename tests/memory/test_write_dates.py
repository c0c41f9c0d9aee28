"""The write path resolves the relative dates a text names from the text's own time and keeps them in its metadata."""

from datetime import UTC, datetime

import memnets
from memnets.temporal.dates import DATES_KEY

SAID_AT = datetime(2024, 5, 8, 15, 0, tzinfo=UTC)  # a Wednesday


def test_dates_a_text_names_are_resolved_from_its_own_time(tiny_model_dir, tmp_path):
    with memnets.open(tmp_path / "m", encoder=tiny_model_dir, resolve_dates=True) as memory:
        went = memory.add("I went to the support group yesterday", user="ann", t=SAID_AT, metadata={"topic": 1})
        plain = memory.add("I like green tea", user="ann", t=SAID_AT)
        given = memory.add("We met last Friday", user="ann", t=SAID_AT, metadata={DATES_KEY: []})
        [message] = memory.add(
            messages=[{"role": "user", "content": "My sister visits next month", "time": SAID_AT}], user="ann"
        )
        stored = {m.id: m for m in memory.list_memories(user="ann")}
    assert stored[went.id].metadata == {
        "topic": 1,
        DATES_KEY: [{"text": "yesterday", "start": "2024-05-07", "end": "2024-05-07"}],
    }
    assert DATES_KEY not in stored[plain.id].metadata  # no time named: the metadata stays as given
    assert stored[given.id].metadata == {DATES_KEY: []}  # the caller's own value is kept
    assert stored[message.memory.id].metadata[DATES_KEY] == [
        {"text": "next month", "start": "2024-06-01", "end": "2024-06-30"}
    ]


def test_by_default_the_metadata_stays_as_given(tiny_model_dir, tmp_path):
    with memnets.open(tmp_path / "m", encoder=tiny_model_dir) as memory:
        went = memory.add("I went to the support group yesterday", user="ann", t=SAID_AT)
    assert went.metadata == {}
