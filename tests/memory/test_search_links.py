"""A search's own likely replacements (memnets.memory.supersession.Supersession.search_links): among a search's
first hits, a newer statement of the same speaker and scope that answers the question about as well as an older
one, and that the judge reads as its likely replacement from its query_threshold, answers first; nothing is
written, and a judge without a query_threshold reads none."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from successor_helpers import FILLERS, KS, QUESTION, STALE, SUCCESSOR, UnsureJudge, check_current_first, facts

import memnets
from memnets.memory.supersession import SEARCH_DEPTH, SEARCH_MARGIN, SEARCH_PAIRS, Supersession

JAN, MAR = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC)


@pytest.fixture
def judge():
    return UnsureJudge()


@pytest.fixture
def memory(tmp_path, tiny_model_dir, judge):
    with memnets.open(tmp_path / "m", encoder=tiny_model_dir, supersession=judge) as opened:
        yield opened


def written(memory, *said):
    """``said``: (text, when) pairs written for "leo" in order; their memories as stored."""
    ids = [memory.add(text, user="leo", t=when).id for text, when in said]
    return [memory.get(i, user="leo") for i in ids]


def test_a_search_answers_the_likely_replacement_first_at_every_k_and_writes_nothing(memory):
    stored = {m.content: m for m in written(memory, *facts())}
    assert stored[STALE].likely_replaced_by is None  # 0.6: below the write path's order_threshold
    check_current_first(
        {k: [(hit.memory.content, hit.score) for hit in memory.search(QUESTION, user="leo", k=k)] for k in KS}
    )
    assert memory.get(stored[STALE].id, user="leo").likely_replaced_by is None  # a reading, not a decision
    as_of = memory.search(QUESTION, user="leo", k=1, as_of=datetime(2025, 1, 1, tzinfo=UTC))
    assert as_of[0].memory.content == STALE  # an as-of read ranks the versions of its time as found


def test_without_a_query_threshold_a_search_reads_nothing(tmp_path, tiny_model_dir, judge):
    judge.query_threshold = None
    with memnets.open(tmp_path / "m", encoder=tiny_model_dir, supersession=judge) as memory:
        written(memory, *facts())
        judge.read.clear()
        assert memory.search(QUESTION, user="leo", k=1)[0].memory.content == STALE
        assert judge.read == []


def test_the_newer_hit_must_answer_within_the_margin(memory, judge):
    older, newer = written(memory, (STALE, JAN), (SUCCESSOR, MAR))
    step = Supersession(memory.store, judge)
    assert step.search_links([older, newer], [0.8, 0.8 - SEARCH_MARGIN + 0.01]) == {older.id: newer.id}
    assert step.search_links([older, newer], [0.8, 0.8 - SEARCH_MARGIN - 0.01]) == {}
    judge.query_threshold = 0.7  # the judge's 0.6 is below it
    assert Supersession(memory.store, judge).search_links([older, newer], [0.8, 0.8]) == {}


def test_only_a_newer_statement_of_the_same_speaker_replaces_an_older_one(memory, judge):
    older, newer = written(memory, (STALE, JAN), (SUCCESSOR, MAR))
    step = Supersession(memory.store, judge)
    assert step.search_links([newer, older], [0.8, 0.8]) == {}  # the older one ranked under: nothing to move
    backdated = newer.replace(valid_from=datetime(2023, 1, 1, tzinfo=UTC))
    assert step.search_links([older, backdated], [0.8, 0.8]) == {}  # held from before the older one
    bob = newer.replace(metadata={"speaker": "Bob"})
    assert step.search_links([older, bob], [0.8, 0.8]) == {}
    reply = newer.replace(metadata={"role": "assistant"})
    assert step.search_links([older, reply], [0.8, 0.8]) == {}
    ended = older.replace(invalidated_by="another")
    assert step.search_links([ended, newer], [0.8, 0.8]) == {}  # a decision stands; a search adds none beside it


def test_a_search_reads_its_first_hits_only_and_judges_a_pair_once(memory, judge):
    older, newer = written(memory, (STALE, JAN), (SUCCESSOR, MAR))
    fillers = written(memory, *((text, MAR) for text in (*FILLERS, "I swim on Sundays", "I grow tomatoes")))
    step = Supersession(memory.store, judge)
    hits = [older, *fillers[: SEARCH_DEPTH - 1], newer]  # the successor one place past the depth
    assert len(hits) == SEARCH_DEPTH + 1
    judge.read.clear()  # what the write path read
    assert step.search_links(hits, [0.8] * len(hits)) == {}
    assert (STALE, SUCCESSOR) not in judge.read
    assert step.search_links([older, newer], [0.8, 0.8]) == {older.id: newer.id}
    judge.read.clear()
    assert step.search_links([older, newer], [0.8, 0.8]) == {older.id: newer.id}
    assert judge.read == []  # kept from the search before


def test_a_search_judges_at_most_search_pairs_those_of_its_best_hits_first(memory, judge):
    """The bound on a search's cost: its first hit's pairs are read first (all of them as shipped); a pair past the
    bound is not read."""
    assert SEARCH_PAIRS >= SEARCH_DEPTH - 1
    said = [(STALE, JAN), *((text, MAR.replace(day=n + 2)) for n, text in enumerate(FILLERS[:3])), (SUCCESSOR, MAR)]
    hits = written(memory, *said)
    hits = [hits[0], *sorted(hits[1:], key=lambda m: m.valid_from)]  # STALE, then the newer ones, SUCCESSOR first
    step = Supersession(memory.store, judge)
    step.search_pairs = 4  # (STALE, each of the four newer ones)
    judge.read.clear()
    assert step.search_links(hits, [0.8] * len(hits)) == {hits[0].id: hits[1].id}
    assert judge.read == [(STALE, m.content) for m in hits[1:]]
    step.search_pairs = 3
    later = [hits[0], *hits[2:], hits[1]]  # the successor ranked last: its pair is the fourth
    assert step.search_links(later, [0.8] * len(later)) == {}
    step.search_pairs = None
    assert step.search_links(later, [0.8] * len(later)) == {later[0].id: later[-1].id}


def test_a_query_threshold_above_the_threshold_is_refused(memory, judge):
    judge.query_threshold = 0.95
    with pytest.raises(ValueError, match="query_threshold must be None or a number in"):
        Supersession(memory.store, judge)


@pytest.mark.parametrize("reads", [True, False])
def test_the_manager_s_recall_and_view_read_them_as_a_search_does(tmp_path, tiny_model_dir, judge, reads):
    """RECALL and the view pick what the agent sees by the same rule as a search: the likely replacement the judge
    reads for the query first, the older statement after it; without a query_threshold the scorer's order stands."""
    judge.query_threshold = judge.query_threshold if reads else None
    with memnets.open(tmp_path / "m", encoder=tiny_model_dir, supersession=judge) as memory:
        older, newer = written(memory, (STALE, JAN), (SUCCESSOR, MAR))
        expected = [newer.id, older.id] if reads else [older.id, newer.id]
        with memory.manager("leo", k=2, working_capacity=10) as manager:
            assert [m.id for m in manager.recall(QUESTION, now=MAR)] == expected
            assert [m.id for m in manager.context_for(QUESTION, now=MAR).memories] == expected
        assert memory.get(older.id, user="leo").likely_replaced_by is None  # a reading, not a decision
