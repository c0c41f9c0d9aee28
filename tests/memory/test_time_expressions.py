"""The time-expression resolver (memnets.temporal.dates) on a table of expressions and their dates.

Every expression is read from the turn's own day: Tuesday 7 May 2024 (a leap year, so February has
29 days) unless the row names another.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import memnets
from memnets.temporal.dates import DATES_KEY, ResolvedDate, date_metadata, resolve_dates, with_dates

TURN = date(2024, 5, 7)  # a Tuesday

# (text, expected ranges as "start" or "start..end", turn day)
TABLE = [
    ("I went there yesterday", ["2024-05-06"], TURN),
    ("the day before yesterday", ["2024-05-05"], TURN),
    ("we fly tomorrow", ["2024-05-08"], TURN),
    ("the day after tomorrow", ["2024-05-09"], TURN),
    ("today is hard", ["2024-05-07"], TURN),
    ("two weeks ago", ["2024-04-23"], TURN),
    ("3 days ago", ["2024-05-04"], TURN),
    ("a couple of weeks ago", ["2024-04-23"], TURN),
    ("a month ago", ["2024-04-07"], TURN),
    ("two years ago", ["2022-05-07"], TURN),
    ("in 3 days", ["2024-05-10"], TURN),
    ("3 months from now", ["2024-08-07"], TURN),
    ("last week", ["2024-04-29..2024-05-05"], TURN),
    ("next week", ["2024-05-13..2024-05-19"], TURN),
    ("last weekend", ["2024-05-04..2024-05-05"], TURN),
    ("this weekend", ["2024-05-11..2024-05-12"], TURN),
    ("last month", ["2024-04-01..2024-04-30"], TURN),
    ("next month", ["2024-06-01..2024-06-30"], TURN),
    ("last month", ["2023-12-01..2023-12-31"], date(2024, 1, 15)),  # across a year
    ("next month", ["2025-01-01..2025-01-31"], date(2024, 12, 3)),
    ("a month ago", ["2024-02-29"], date(2024, 3, 31)),  # clipped to the shorter month
    ("last year", ["2023-01-01..2023-12-31"], TURN),
    ("this year", ["2024-01-01..2024-12-31"], TURN),
    ("last Friday we met", ["2024-05-03"], TURN),
    ("on Monday", ["2024-05-06"], TURN),
    ("Tuesday", ["2024-04-30"], TURN),  # a bare weekday is the latest one before the turn's day
    ("this Friday", ["2024-05-10"], TURN),
    ("next Friday", ["2024-05-10"], TURN),
    ("next Tuesday", ["2024-05-14"], TURN),
    ("in May", ["2024-05-01..2024-05-31"], TURN),
    ("last May", ["2023-05-01..2023-05-31"], TURN),
    ("last March", ["2024-03-01..2024-03-31"], TURN),
    ("next June", ["2024-06-01..2024-06-30"], TURN),
    ("next April", ["2025-04-01..2025-04-30"], TURN),
    ("in 2022", ["2022-01-01..2022-12-31"], TURN),
    ("May 2023", ["2023-05-01..2023-05-31"], TURN),
    ("2024-05-07", ["2024-05-07"], TURN),
    ("7 May 2024", ["2024-05-07"], TURN),
    ("the 7th of May", ["2024-05-07"], TURN),
    ("May 7th", ["2024-05-07"], TURN),
    ("March 3, 2021", ["2021-03-03"], TURN),
    ("Sept. 12", ["2024-09-12"], TURN),
    ("05/07/2024", ["2024-05-07"], TURN),  # month first by default
    ("5/7/24", ["2024-05-07"], TURN),
    ("I moved to Berlin last month and saw Ann yesterday", ["2024-04-01..2024-04-30", "2024-05-06"], TURN),
    # no time named: everyday words that are also month names, impossible days, ranges of weekdays
    ("I may go", [], TURN),
    ("we march on", [], TURN),
    ("31/02/2024", [], TURN),
    ("April 31", [], TURN),
    ("open Monday-Friday", [], TURN),
    ("one day I will", [], TURN),
]


def labels(resolved: list[ResolvedDate]) -> list[str]:
    return [item.label() for item in resolved]


@pytest.mark.parametrize(("text", "expected", "turn"), TABLE, ids=[f"{row[0]}@{row[2]}" for row in TABLE])
def test_each_expression_resolves_to_its_dates(text, expected, turn):
    assert labels(resolve_dates(text, turn)) == expected


def test_day_first_numeric_dates_are_a_stated_convention():
    assert labels(resolve_dates("05/07/2024", TURN, numeric="dmy")) == ["2024-07-05"]
    assert labels(resolve_dates("25/12/2023", TURN, numeric="dmy")) == ["2023-12-25"]
    assert labels(resolve_dates("25/12/2023", TURN)) == []  # month 25 does not exist
    with pytest.raises(ValueError, match="numeric must be one of .* got 'ymd'"):
        resolve_dates("05/07/2024", TURN, numeric="ymd")


def test_a_datetime_turn_resolves_from_its_day_and_a_wrong_time_is_named():
    assert labels(resolve_dates("yesterday", datetime(2023, 5, 8, 13, 56, tzinfo=UTC))) == ["2023-05-07"]
    with pytest.raises(TypeError, match="at must be a datetime or date, got str"):
        resolve_dates("yesterday", "2023-05-08")


@pytest.mark.parametrize(
    ("text", "turn"),
    [
        ("we fly tomorrow", date(9999, 12, 31)),
        ("I saw her yesterday", date(1, 1, 1)),
        ("next week", date(9999, 12, 30)),
        ("this weekend", date(9999, 12, 31)),
        ("next Friday", date(9999, 12, 31)),
        ("next year", date(9999, 5, 5)),
        ("next month", date(9999, 12, 5)),
        ("last year", date(1, 5, 5)),
        ("three weeks ago", date(1, 1, 2)),
    ],
)
def test_an_expression_naming_days_outside_the_calendar_is_left_out(text, turn):
    """Before: OverflowError ("date value out of range") or ValueError ("year 10000 is out of range")."""
    assert resolve_dates(text, turn) == []
    assert resolve_dates(f"today, and {text}", turn) == [ResolvedDate("today", turn, turn)]


def test_a_memory_at_the_end_of_the_calendar_is_written_with_the_dates_that_exist(encoder, tmp_path):
    """Before: add with resolve_dates on and t = 9999-12-31 raised a bare OverflowError for "tomorrow"."""
    t = datetime(9999, 12, 31, 12, tzinfo=UTC)
    with memnets.open(tmp_path / "memory", encoder=encoder, resolve_dates=True) as memory:
        added = memory.add("I pack today and fly home tomorrow", user="ann", t=t)
    assert added.metadata[DATES_KEY] == [{"text": "today", "start": "9999-12-31", "end": "9999-12-31"}]


def test_the_longest_expression_wins_where_rules_overlap():
    resolved = resolve_dates("on May 7th, 2023 we met", TURN)
    assert [(item.text, item.label()) for item in resolved] == [("May 7th, 2023", "2023-05-07")]


def test_date_metadata_is_what_the_write_path_stores():
    assert date_metadata("I moved to Berlin last month", TURN) == {
        DATES_KEY: [{"text": "last month", "start": "2024-04-01", "end": "2024-04-30"}]
    }
    assert date_metadata("I live in Berlin", TURN) == {}


def test_with_dates_adds_each_date_after_its_words_for_the_embedding_text():
    text = "Saw Ann yesterday, and again yesterday evening; moving next month"
    assert with_dates(text, resolve_dates(text, TURN)) == (
        "Saw Ann yesterday (2024-05-06), and again yesterday (2024-05-06) evening; "
        "moving next month (2024-06-01..2024-06-30)"
    )
    assert with_dates("nothing dated", []) == "nothing dated"


def test_the_quick_check_for_time_words_changes_no_answer(monkeypatch):
    """resolve_dates skips its rules when a text holds no month, weekday, unit or named day at a word's
    start, no four digits and no digits around a slash (most memories): on every LoCoMo turn and this
    table, the answers are those of the rules run on every text."""
    import re

    from memnets.temporal import dates
    from memnets.training.data.locomo import load_locomo

    texts = [text for text, _, _ in TABLE] + [turn.text for c in load_locomo() for turn in c.turns]
    texts += ["Sundays-off since MARCH", "the week-end", "Today!", "room 12 (new 3)", "5/7/24", "in 1999", "2024-5-7"]
    quick = [resolve_dates(text, TURN) for text in texts]
    monkeypatch.setattr(dates, "_MAY_NAME_A_TIME", re.compile(""))  # the rules on every text
    assert quick == [resolve_dates(text, TURN) for text in texts]
    assert sum(map(bool, quick)) > 100  # the corpus names times: the check was put to the test


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 12)), max_size=40))
def test_the_kept_date_spans_are_those_a_scan_of_every_kept_one_keeps(spans):
    """``disjoint`` (one bisect per span) keeps what comparing each span with every kept one kept."""
    from memnets.temporal.dates import disjoint

    found = [(start, start + length, n) for n, (start, length) in enumerate(spans)]
    kept: list = []
    for start, end, n in sorted(found, key=lambda item: (item[0] - item[1], item[0])):
        if all(end <= s or start >= e for s, e, _ in kept):
            kept.append((start, end, n))
    assert disjoint(found) == sorted(kept, key=lambda item: item[0])
