"""As-of reads: the version rule (memnets.store.as_of.visible) on hand-built lines, its one pass against
the rule read version by version on random histories and its comparisons linear in a memory's versions,
the filter keys, and both stores answering k results whenever k versions are valid, among many that are not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memnets
from memnets.records import Memory
from memnets.store.as_of import lines, visible
from memnets.store.filters import MemoryFilter
from memnets.timeutil import as_utc

DAY = [datetime(2024, 1, day, tzinfo=UTC) for day in range(1, 29)]


def version(memory_id: str, content: str, written: datetime, *, of: str | None = None, **validity) -> Memory:
    return Memory(memory_id, "ann", DAY[0], content, updated_at=written, superseded_by=of, **validity)


def contents(memories) -> list[str]:
    return sorted(m.content for m in memories)


def test_a_line_is_its_older_versions_then_the_current_row_replaced_lines_included():
    rows = [
        version("a", "a now", DAY[5], of="b"),  # a was replaced by b (add(..., replaces="a"))
        version("b", "b now", DAY[6]),
        version("a~1", "a first", DAY[1], of="a"),
        version("b~1", "b before", DAY[4], of="b"),
        version("c", "c", DAY[2]),
    ]
    assert [[m.id for m in line] for line in lines(rows)] == [["a~1", "a", "b~1", "b"], ["c"]]
    looped = [version("x~1", "x", DAY[1], of="y~1"), version("y~1", "y", DAY[1], of="x~1")]
    assert lines(looped) == []  # a cycle forms no line (tampered rows are never read as a memory)


def test_as_of_picks_the_version_valid_then_and_later_knowledge_wins_from_its_start():
    rows = [
        version("m~1", "Paris", DAY[1], of="m", valid_from=DAY[1], valid_to=DAY[10]),
        version("m~2", "Berlin", DAY[10], of="m", valid_from=DAY[10], valid_to=DAY[20]),
        version("m", "Rome", DAY[20], valid_from=DAY[20]),
    ]
    assert [contents(visible(rows, day, None)) for day in (DAY[0], DAY[5], DAY[15], DAY[25])] == [
        [],
        ["Paris"],
        ["Berlin"],
        ["Rome"],
    ]
    # rows without a stored end (written before validity existed) end where the next version starts
    legacy = [version("m~1", "Paris", DAY[1], of="m"), version("m", "Rome", DAY[20])]
    assert contents(visible(legacy, DAY[15], None)) == ["Paris"]
    assert contents(visible(legacy, DAY[21], None)) == ["Rome"]
    # a correction from the same start leaves the corrected version valid never
    corrected = [
        version("m~1", "Pariss", DAY[1], of="m", valid_to=DAY[1]),
        version("m", "Paris", DAY[2], valid_from=DAY[1]),
    ]
    assert contents(visible(corrected, DAY[5], None)) == ["Paris"]


def test_known_at_reads_each_line_as_written_by_then_with_ends_written_later_open():
    rows = [
        version("m~1", "Paris", DAY[1], of="m", valid_from=DAY[1], valid_to=DAY[10]),
        version("m", "Berlin", DAY[12], valid_from=DAY[10]),
        version("n", "later memory", DAY[14]),
    ]
    [known] = visible(rows, None, DAY[11])
    assert (known.content, known.valid_to) == ("Paris", None)  # the update that closed it came on day 13
    assert contents(visible(rows, DAY[11], DAY[11])) == ["Paris"]
    assert contents(visible(rows, DAY[11], DAY[27])) == ["Berlin"]  # known now: Berlin from day 11 (DAY[10]) on
    assert visible(rows, None, DAY[0]) == []


def plain_visible(rows, as_of, known_at) -> list[Memory]:
    """The version rule as the module docstring words it, version by version (quadratic): the oracle of
    ``visible``'s one pass."""
    out = []
    for line in lines(rows):
        known = [v for v in line if known_at is None or v.updated_at <= known_at]
        if not known:
            continue
        after = line[line.index(known[-1]) + 1 :]
        if after and known[-1].valid_to == max(known[-1].valid_from, after[0].valid_from):
            known[-1] = known[-1].replace(valid_to=None)  # closed by a version written after known_at
        if as_of is None:
            out.append(known[-1])
            continue
        for n, v in enumerate(known):
            ends = [later.valid_from for later in known[n + 1 :]] + ([v.valid_to] if v.valid_to else [])
            if v.valid_from <= as_of and (not ends or as_of < min(ends)):
                out.append(v)
    return out


@st.composite
def histories(draw) -> list[Memory]:
    """A user's rows in a random write order: memories of 1-6 versions, each with random write times and
    validity (open or closed, corrections valid never), some continuing a replaced memory's line."""
    rows = []
    for m in range(draw(st.integers(1, 4))):
        current = f"m{m}"
        replaces = f"m{m - 1}" if m and draw(st.booleans()) else None
        if replaces is not None:  # m{m-1} was replaced by this one: its current row continues this line
            rows = [r.replace(superseded_by=current) if r.id == replaces else r for r in rows]
        count = draw(st.integers(1, 6))
        for n in range(count):
            start = draw(st.integers(0, 20))
            end = draw(st.one_of(st.none(), st.integers(start, 24)))
            memory_id = current if n == count - 1 else f"{current}~{n + 1}"
            rows.append(
                version(
                    memory_id,
                    f"{memory_id} said",
                    DAY[draw(st.integers(0, 25))],
                    of=None if memory_id == current else current,
                    valid_from=DAY[start],
                    valid_to=None if end is None else DAY[end],
                )
            )
    return draw(st.permutations(rows))


@settings(max_examples=300, deadline=None)
@given(
    histories(),
    st.one_of(st.none(), st.sampled_from(DAY)),
    st.one_of(st.none(), st.sampled_from(DAY)),
)
def test_the_one_pass_reads_what_the_rule_version_by_version_reads(rows, as_of, known_at):
    assert visible(rows, as_of, known_at) == plain_visible(rows, as_of, known_at)


class CountedTime(datetime):
    """A datetime that counts the comparisons made with it, on either side: the steps of an as-of read."""

    comparisons = 0

    def __lt__(self, other):
        CountedTime.comparisons += 1
        return super().__lt__(other)

    def __le__(self, other):
        CountedTime.comparisons += 1
        return super().__le__(other)

    def __gt__(self, other):
        CountedTime.comparisons += 1
        return super().__gt__(other)

    def __ge__(self, other):
        CountedTime.comparisons += 1
        return super().__ge__(other)


def test_an_as_of_read_compares_each_version_a_bounded_number_of_times():
    """Before: every version's end was the minimum over the starts of all versions after it, rebuilt
    for each: n^2/2 comparisons, 2.5 s for one memory of 8,000 versions. Now a few per version."""
    n = 3000
    start = CountedTime(2024, 1, 1, tzinfo=UTC)
    at = [start + timedelta(minutes=i) for i in range(n + 1)]
    assert type(at[-1]) is CountedTime and type(as_utc(at[-1])) is CountedTime  # kept by Memory, so counted
    rows = [version(f"m~{i}", f"v{i}", at[i], of="m", valid_from=at[i], valid_to=at[i + 1]) for i in range(1, n)]
    rows.append(version("m", "now", at[n], valid_from=at[n]))
    middle = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=n // 2, seconds=30)
    CountedTime.comparisons = 0
    assert [m.content for m in visible(rows, middle, None)] == [f"v{n // 2}"]
    assert CountedTime.comparisons <= 8 * n, CountedTime.comparisons
    CountedTime.comparisons = 0
    assert [m.content for m in visible(rows, middle, middle)] == [f"v{n // 2}"]
    assert CountedTime.comparisons <= 8 * n, CountedTime.comparisons


def test_as_of_and_known_at_are_top_level_filter_keys():
    parsed = MemoryFilter.parse({"as_of": DAY[3], "kind": "observation"})
    assert parsed.time_travel and parsed.as_of == DAY[3] and parsed.needs_payload
    with pytest.raises(ValueError, match="top level"):
        MemoryFilter.parse({"$and": [{"as_of": DAY[3]}]})
    with pytest.raises(ValueError, match="as_of given twice"):
        MemoryFilter.combine({"as_of": DAY[3]}, {"as_of": DAY[4]})
    combined = MemoryFilter.combine({"agent": "bob"}, {"as_of": DAY[3], "known_at": None})
    assert combined.as_of == DAY[3] and combined.all_of == () and combined.agent is not None
    with pytest.raises(ValueError, match="as_of 'yesterday' is not an ISO 8601 time"):
        MemoryFilter.parse({"as_of": "yesterday"})
    with pytest.raises(TypeError, match="as_of must be a datetime, a date or an ISO 8601 string"):
        MemoryFilter.parse({"as_of": 1709294400})


@pytest.fixture
def memory(location, encoder):
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=None, **options) as opened:
        yield opened


def test_as_of_search_returns_k_when_k_are_valid_among_many_that_are_not(memory, encoder):
    """The under-fill mem0's users hit (#7416): a filtered index search that returns fewer than k."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    old = [f"note {n} about the old garden" for n in range(5)]
    new = [f"memo {n} about the harbour and the boats" for n in range(120)]
    memory.add_many(old, user="ann", t=now - timedelta(days=400))
    memory.add_many(new, user="ann", t=now)  # valid only from now on
    query = "memo about the harbour and the boats"
    for k in (3, 5):
        hits = memory.search(query, user="ann", k=k, as_of=now - timedelta(days=10))
        assert len(hits) == k and all(hit.memory.content in old for hit in hits)
    assert len(memory.search(query, user="ann", k=50, as_of=now - timedelta(days=10))) == len(old)
    found = memory.search(query, user="ann", k=10, as_of=now)
    assert len(found) == 10
    scores = [hit.score for hit in found]
    assert scores == sorted(scores, reverse=True)
    scores = encoder.encode(new, kind="memory") @ encoder.encode([query], kind="query")[0]
    assert found[0].memory.content == new[int(np.argmax(scores))]  # exact: the nearest valid version first
    assert np.isclose(found[0].score, float(scores.max()), atol=1e-5)
