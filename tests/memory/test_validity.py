"""Validity beside recording on both stores: every memory carries valid_from / valid_to, an update closes
the old version where the new one begins, a deletion is no validity change, a supersession judge ends an
older memory of the same speaker (logged in its history, reversible by update, ranked below), and a
store written before validity existed reads right."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import memnets
from memnets.memory.supersession import SupersessionJudge
from memnets.memory.validity import changes, in_words

EXACT = None  # the consistency check off: every text is a memory of its own (the judge decides here)
JAN, MAR, JUN, SEP, DEC = (datetime(2024, month, 1, tzinfo=UTC) for month in (1, 3, 6, 9, 12))
NEXT_MAR = datetime(2025, 3, 1, tzinfo=UTC)


class KeywordJudge:
    """A real SupersessionJudge for tests: a newer text ends an older one when it names the change of the
    older one's subject (``moved`` after ``live``, ``fish`` after ``vegetarian``)."""

    threshold = 0.5
    CHANGES = (("live", "moved"), ("vegetarian", "fish"))

    def score(self, older: str, newer: str) -> float:
        older, newer = older.lower(), newer.lower()
        return 0.9 if any(a in older and b in newer for a, b in self.CHANGES) else 0.1


@pytest.fixture
def memory(location, encoder):
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, **options) as opened:
        yield opened


def fact_changed_twice(memory) -> str:
    """Ann lived in Paris from January, in Berlin from June, in Rome from December (2024); returns its id."""
    first = memory.add("Ann lives in Paris", user="ann", t=JAN)
    memory.update(first.id, "Ann lives in Berlin", user="ann", t=JUN)
    memory.update(first.id, "Ann lives in Rome", user="ann", t=DEC)
    return first.id


def test_a_memory_is_valid_from_its_time_and_open_until_changed(memory):
    added = memory.add("Ann lives in Paris", user="ann", t=JAN)
    assert (added.valid_from, added.valid_to, added.invalidated_by) == (JAN, None, None)
    [stored] = memory.list_memories(user="ann")
    assert (stored.valid_from, stored.valid_to) == (JAN, None)
    assert memory.get(added.id, user="ann").valid_from == JAN


def test_an_update_closes_the_old_version_where_the_new_one_begins(memory):
    memory_id = fact_changed_twice(memory)
    paris, berlin, rome = memory.history(memory_id, user="ann")
    assert [m.content for m in (paris, berlin, rome)] == [
        "Ann lives in Paris",
        "Ann lives in Berlin",
        "Ann lives in Rome",
    ]
    assert (paris.valid_from, paris.valid_to) == (JAN, JUN)
    assert (berlin.valid_from, berlin.valid_to) == (JUN, DEC)
    assert (rome.valid_from, rome.valid_to) == (DEC, None)
    # a metadata-only update corrects the record: the fact's validity stays
    corrected = memory.update(memory_id, user="ann", metadata={"source": "call"}, t=NEXT_MAR)
    assert (corrected.valid_from, corrected.valid_to) == (DEC, None)


def test_a_fact_that_changed_twice_reads_as_of_three_dates(memory):
    memory_id = fact_changed_twice(memory)
    memory.add("Ann has a beagle named Rex", user="ann", t=JAN)
    for moment, city in ((MAR, "Paris"), (SEP, "Berlin"), (NEXT_MAR, "Rome")):
        hits = memory.search("Where does Ann live?", user="ann", k=5, as_of=moment)
        lives = [hit.memory for hit in hits if "lives" in hit.memory.content]
        assert [m.content for m in lives] == [f"Ann lives in {city}"], moment
        listed = memory.list_memories(user="ann", as_of=moment)
        assert sorted(m.content for m in listed) == sorted([f"Ann lives in {city}", "Ann has a beagle named Rex"])
    assert memory.list_memories(user="ann", as_of=datetime(2023, 1, 1, tzinfo=UTC)) == []
    # known_at: what had been written by then (before the December update, Berlin held, still open)
    believed = {m.content: m for m in memory.list_memories(user="ann", known_at=SEP)}
    assert set(believed) == {"Ann lives in Berlin", "Ann has a beagle named Rex"}
    assert believed["Ann lives in Berlin"].valid_to is None  # its end was written later
    # both axes: as known in September, Ann still lived in Berlin in March next year
    hits = memory.search("Where does Ann live?", user="ann", k=5, as_of=NEXT_MAR, known_at=SEP)
    assert "Ann lives in Berlin" in [hit.memory.content for hit in hits]
    assert memory.get(memory_id, user="ann").content == "Ann lives in Rome"  # plain reads: the current fact


def test_a_fact_said_before_the_current_one_held_becomes_its_history(location, encoder):
    """An older statement written after a newer one (an old transcript imported late) is kept as an older
    version, valid until the next version began; the newer fact stays current. Before: the stale fact
    became current and the newer one an interval of no length, so no time ever read it."""
    where, options = location
    with memnets.open(where, encoder=encoder, **options) as memory:  # the consistency rule on (by default)
        porto = memory.add("Ann lives in Porto", user="ann", t=JUN)
        lisbon = memory.add("Ann lives in Lisbon", user="ann", t=JAN)
        assert (lisbon.outcome, lisbon.superseded_by, lisbon.valid_from, lisbon.valid_to) == (
            "updated",
            porto.id,
            JAN,
            JUN,
        )
        assert memory.get(porto.id, user="ann").content == "Ann lives in Porto"
        assert [h.memory.content for h in memory.search("Where does Ann live?", user="ann", k=5)] == [
            "Ann lives in Porto"
        ]
        for moment, city in ((MAR, "Lisbon"), (SEP, "Porto")):
            assert [m.content for m in memory.list_memories(user="ann", as_of=moment)] == [f"Ann lives in {city}"]
        # one said between two known versions ends the one before it where it began
        memory.add("Ann lives in Madrid", user="ann", t=MAR)
        versions = {m.content: (m.valid_from, m.valid_to) for m in memory.history(porto.id, user="ann")}
        assert versions == {
            "Ann lives in Lisbon": (JAN, MAR),
            "Ann lives in Madrid": (MAR, JUN),
            "Ann lives in Porto": (JUN, None),
        }
        # the same old statements read again (the transcript imported twice): the history says them already
        assert memory.add("Ann lives in Lisbon", user="ann", t=JAN).outcome == "unchanged"
        assert memory.add("Ann lives in Madrid", user="ann", t=datetime(2024, 4, 1, tzinfo=UTC)).outcome == "unchanged"
        assert len(memory.history(porto.id, user="ann")) == 3
        # an add keyed by an existing id, said before that memory held: the same
        memory.add("Ann's dentist is Dr Ortiz", user="ann", id="dentist", t=SEP)
        weiss = memory.add("Ann's dentist is Dr Weiss", user="ann", id="dentist", t=MAR)
        assert (weiss.superseded_by, weiss.valid_to) == ("dentist", SEP)
        assert memory.get("dentist", user="ann").content == "Ann's dentist is Dr Ortiz"


def test_a_deletion_is_no_validity_change(memory):
    memory_id = fact_changed_twice(memory)
    memory.delete(memory_id, user="ann")
    for moment in (MAR, SEP, NEXT_MAR):  # deleted is deleted at every time: no version comes back
        assert memory.list_memories(user="ann", as_of=moment) == []
    assert memory.list_memories(user="ann", known_at=SEP) == []


def test_a_judge_ends_the_older_memory_of_the_same_speaker(location, encoder):
    where, options = location
    judge = KeywordJudge()
    assert isinstance(judge, SupersessionJudge)
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=judge, **options) as memory:
        paris = memory.add("I live in Paris", user="ann", agent="ann", t=JAN)
        other = memory.add("I live in a flat with a garden", user="ann", agent="bob", t=JAN)  # another speaker
        berlin = memory.add("I moved to Berlin last month", user="ann", agent="ann", t=JUN)
        ended = memory.get(paris.id, user="ann")
        assert (ended.valid_to, ended.invalidated_by, ended.invalidation_score) == (JUN, berlin.id, 0.9)
        assert memory.get(other.id, user="ann").valid_to is None
        [before] = memory.history(paris.id, user="ann")[:-1]  # the decision is a version in its history
        assert before.valid_to in (None, JAN) and before.invalidated_by is None
        hits = [hit.memory.id for hit in memory.search("I live in Paris", user="ann", k=3)]
        assert hits.index(berlin.id) < hits.index(paris.id)  # the stale fact ranks below the current one
        assert [m.content for m in memory.list_memories(user="ann", as_of=MAR, filters={"agent": "ann"})] == [
            "I live in Paris"
        ]
        reopened = memory.update(paris.id, user="ann", valid_to=None)  # a wrong decision is reversible
        assert (reopened.valid_to, reopened.invalidated_by, reopened.invalidation_score) == (None, None, None)
        assert len(memory.history(paris.id, user="ann")) == 3


class UnsureKeywordJudge(KeywordJudge):
    """KeywordJudge's scores (0.9 for a change) under a threshold of 0.95: a change is only likely (from 0.5)."""

    threshold, order_threshold = 0.95, 0.5


def test_a_judge_below_its_threshold_links_a_likely_replacement_and_ends_nothing(location, encoder):
    """A score between the judge's order_threshold and threshold: the older memory stays valid, its new version
    names the newer one (``likely_replaced_by``, the score), its history says so, and search ranks it below; a
    statement imported late is linked to the newer one as an ending would be. Without an order_threshold the same
    judge links nothing (the judges before it, and custom ones, work as they did)."""
    where, options = location
    with memnets.open(
        where, encoder=encoder, duplicate_threshold=EXACT, supersession=UnsureKeywordJudge(), **options
    ) as memory:
        paris = memory.add("I live in Paris", user="ann", t=JAN)
        berlin = memory.add("I moved to Berlin last month", user="ann", t=JUN)
        linked = memory.get(paris.id, user="ann")
        assert (linked.valid_to, linked.invalidated_by) == (None, None)
        assert (linked.likely_replaced_by, linked.likely_replaced_score) == (berlin.id, 0.9)
        assert changes(memory.history(paris.id, user="ann")) == ["first said", "likely replaced (0.90)"]
        assert in_words(linked) == f"current, likely replaced by {berlin.id}"
        hits = [hit.memory.id for hit in memory.search("I live in Paris", user="ann", k=2)]
        assert hits == [berlin.id, paris.id]
        fish = memory.add("I eat fish now", user="bo", t=SEP)
        vegetarian = memory.add("I am vegetarian", user="bo", t=MAR)  # said before, written after
        assert memory.get(vegetarian.id, user="bo").likely_replaced_by == fish.id
        assert memory.get(fish.id, user="bo").likely_replaced_by is None
    with memnets.open(
        where, encoder=encoder, duplicate_threshold=EXACT, supersession=FixedJudge(0.9, 0.95), **options
    ) as memory:
        rome = memory.add("I live in Rome", user="cy", t=JAN)
        memory.add("I moved to Milan", user="cy", t=JUN)
        assert memory.get(rome.id, user="cy").likely_replaced_by is None


class TableJudge:
    """Scores of (older, newer) pairs from a table (0.1 for any other), ending from 0.95, likely replacing from 0.5."""

    threshold, order_threshold = 0.95, 0.5

    def __init__(self, scores: dict[tuple[str, str], float]):
        self.table = scores

    def score(self, older: str, newer: str) -> float:
        return self.table.get((older, newer), 0.1)


def test_a_new_memory_likely_replaces_only_its_best_candidate_and_none_beside_an_ending(location, encoder):
    """A likely replacement is a guess made once: the best-scored candidate alone is linked, and where the new
    memory ends one, the others it scores in the likely band stay as they were."""
    where, options = location
    bank, run, job = (
        "I work at the bank",
        "I run every morning before work",
        "I left the bank, I work for a startup now",
    )
    tied = TableJudge({(bank, job): 0.9, (run, job): 0.9})  # equal scores: the first candidate alone
    unsure = TableJudge({(bank, job): 0.9, (run, job): 0.8})
    sure = TableJudge({(bank, job): 0.99, (run, job): 0.8})
    for user, judge in (("ann", unsure), ("bo", sure), ("cy", tied)):
        with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=judge, **options) as memory:
            old_job = memory.add(bank, user=user, t=JAN)
            running = memory.add(run, user=user, t=JAN)
            new_job = memory.add(job, user=user, t=JUN)
            old_job, running = memory.get(old_job.id, user=user), memory.get(running.id, user=user)
            decided = [m.likely_replaced_by or m.invalidated_by for m in (old_job, running)]
            if judge is tied:
                assert sorted(decided, key=str) == sorted([new_job.id, None], key=str)
                continue
            assert (running.likely_replaced_by, running.invalidated_by, running.valid_to) == (None, None, None)
            assert decided[0] == new_job.id


@pytest.mark.parametrize("order", [0.99, -0.1, "half", True])
def test_open_refuses_an_order_threshold_outside_0_and_the_threshold(tmp_path, encoder, order):
    judge = UnsureKeywordJudge()
    judge.order_threshold = order
    with pytest.raises(ValueError, match="order_threshold must be None or a number in \\[0, threshold"):
        memnets.open(tmp_path / "m", encoder=encoder, supersession=judge)


def test_a_judge_reads_facts_in_the_order_they_held_not_the_order_written(location, encoder):
    """The newer fact written first, the older one after it (an old transcript imported late), in two calls
    or out of order in one: the older one is ended where the newer began. Before: both stayed open and
    as_of after the change answered the stale fact."""
    where, options = location
    with memnets.open(
        where, encoder=encoder, duplicate_threshold=EXACT, supersession=KeywordJudge(), **options
    ) as memory:
        berlin = memory.add("I moved to Berlin last month", user="ann", agent="ann", t=JUN)
        paris = memory.add("I live in Paris", user="ann", agent="ann", t=JAN)
        ended = memory.get(paris.id, user="ann")
        assert (ended.valid_to, ended.invalidated_by, ended.invalidation_score) == (JUN, berlin.id, 0.9)
        assert memory.get(berlin.id, user="ann").valid_to is None
        for moment, fact in ((MAR, "I live in Paris"), (SEP, "I moved to Berlin last month")):
            assert [m.content for m in memory.list_memories(user="ann", as_of=moment)] == [fact]
        messages = [
            {"role": "user", "content": "I eat fish now", "time": SEP.isoformat()},
            {"role": "user", "content": "I am vegetarian", "time": MAR.isoformat()},
        ]
        fish, vegetarian = (o.memory for o in memory.add(messages=messages, user="bo"))
        assert (memory.get(vegetarian.id, user="bo").valid_to, memory.get(vegetarian.id, user="bo").invalidated_by) == (
            SEP,
            fish.id,
        )
        assert memory.get(fish.id, user="bo").valid_to is None


def test_a_judge_that_says_no_changes_nothing(location, encoder):
    where, options = location
    with memnets.open(
        where, encoder=encoder, duplicate_threshold=EXACT, supersession=KeywordJudge(), **options
    ) as memory:
        paris = memory.add("I live in Paris", user="ann", t=JAN)
        memory.add("I love Paris in spring", user="ann", t=JUN)
        assert memory.get(paris.id, user="ann").valid_to is None
        assert len(memory.history(paris.id, user="ann")) == 1


def test_open_refuses_a_judge_without_the_protocol(tmp_path, encoder):
    with pytest.raises(TypeError, match="SupersessionJudge"):
        memnets.open(tmp_path / "m", encoder=encoder, supersession=lambda a, b: 1.0)


class FixedJudge:
    def __init__(self, score, threshold=0.5):
        self.answer, self.threshold = score, threshold

    def score(self, older: str, newer: str):
        return self.answer


@pytest.mark.parametrize("threshold", ["high", None, 1.5, True])
def test_open_refuses_a_judge_whose_threshold_is_no_number_in_0_1(tmp_path, encoder, threshold):
    """Before: a threshold of "high" was taken at open and failed at the first add ('>=' not supported)."""
    with pytest.raises(ValueError, match="threshold must be a number in \\[0, 1\\]"):
        memnets.open(tmp_path / "m", encoder=encoder, supersession=FixedJudge(0.9, threshold))


@pytest.mark.parametrize("score", [None, "0.9"])
def test_a_judge_answering_no_number_is_a_type_error_naming_it_and_nothing_is_written(tmp_path, encoder, score):
    """Before: None was a bare float() error not naming the judge, and "0.9" was taken as 0.9."""
    with memnets.open(
        tmp_path / "m", encoder=encoder, duplicate_threshold=EXACT, supersession=FixedJudge(score)
    ) as memory:
        memory.add("I live in Paris", user="ann", t=JAN)
        with pytest.raises(TypeError, match="supersession judge .*score must be a number"):
            memory.add("I moved to Berlin last month", user="ann", t=JUN)
        assert [m.content for m in memory.list_memories(user="ann")] == ["I live in Paris"]


def strip_validity(store) -> None:
    """Rewrite every row's payload as memnets wrote it before validity existed (no validity entries)."""
    d = store._dialect
    with store._writing() as conn:
        rows = conn.execute(f"SELECT owner, id, payload FROM {d.memories}").fetchall()
        for owner, memory_id, payload in rows:
            fields = json.loads(bytes(payload))
            for name in ("valid_from", "valid_to", "invalidated_by", "invalidation_score"):
                fields.pop(name, None)  # entries at their defaults are not written at all
            conn.execute(
                f"UPDATE {d.memories} SET payload = {d.mark} WHERE owner = {d.mark} AND id = {d.mark}",
                (json.dumps(fields).encode(), owner, memory_id),
            )


def test_a_store_written_before_validity_reads_with_its_versions_in_time(location, encoder):
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, **options) as memory:
        memory_id = fact_changed_twice(memory)
        strip_validity(memory.store)
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, **options) as memory:
        paris, berlin, rome = memory.history(memory_id, user="ann")
        # no validity stored: each version is valid from when it was written, and open as stored
        assert (paris.valid_from, paris.valid_to, rome.valid_from) == (JAN, None, DEC)
        for moment, city in ((MAR, "Paris"), (SEP, "Berlin"), (NEXT_MAR, "Rome")):  # an end is the next's start
            assert [m.content for m in memory.list_memories(user="ann", as_of=moment)] == [f"Ann lives in {city}"]
        memory.update(memory_id, "Ann lives in Oslo", user="ann", t=datetime(2025, 6, 1, tzinfo=UTC))
        assert memory.history(memory_id, user="ann")[-2].valid_to == datetime(2025, 6, 1, tzinfo=UTC)


def test_a_version_that_begins_where_the_last_did_keeps_the_end_known_then(location, encoder):
    """A metadata correction, or the undo of a judge's ending, begins where the version before it did: that version
    keeps the validity it had, so a read of a time between the two writes finds the end known then (a close at its
    own start had erased the end, and the known-time read took the version for open)."""
    where, options = location
    with memnets.open(
        where, encoder=encoder, duplicate_threshold=EXACT, supersession=KeywordJudge(), **options
    ) as memory:
        paris = memory.add("Ann lives in Paris", user="ann", t=JAN)
        memory.update(paris.id, user="ann", valid_to=MAR, t=JUN)  # Ann left Paris in March, said in June
        memory.update(paris.id, user="ann", metadata={"source": "call"}, t=SEP)  # a correction of the record
        assert memory.list_memories(user="ann", as_of=JUN, known_at=JUN) == []
        assert [(v.valid_from, v.valid_to) for v in memory.history(paris.id, user="ann")] == [
            (JAN, None),
            (JAN, MAR),
            (JAN, MAR),
        ]
        leeds = memory.add("I live in Leeds", user="bob", t=JAN)
        memory.add("I moved to Lyon", user="bob", t=MAR)  # ends Leeds in March
        memory.update(leeds.id, user="bob", valid_to=None, t=SEP)  # the ending undone in September
        known_in_june = memory.list_memories(user="bob", as_of=JUN, known_at=JUN)
        assert [m.content for m in known_in_june] == ["I moved to Lyon"]
        assert {m.content for m in memory.list_memories(user="bob", as_of=DEC)} == {
            "I live in Leeds",
            "I moved to Lyon",
        }


class HomeJudge:
    """A newer statement of where the speaker lives ends an older, different one."""

    threshold = 0.5

    def score(self, older: str, newer: str) -> float:
        return 0.95 if "live" in older and "live" in newer and older != newer else 0.05


def test_a_new_text_withdraws_the_decisions_of_the_old_one(location, encoder):
    """update(id, text) is a new statement: the facts the old text ended are released and the new text is judged
    afresh. A correction that moved Ann's move to before the fact it had ended left each ended by the other (no
    current fact); now the newer fact ends the corrected one, and holds."""
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=HomeJudge(), **options) as memory:
        leeds = memory.add("I live in Leeds", user="ann", t=MAR)
        lyon = memory.add("I live in Lyon now", user="ann", t=JUN)
        assert memory.get(leeds.id, user="ann").invalidated_by == lyon.id
        memory.update(lyon.id, "I lived in Lyon", user="ann", valid_from=JAN, t=SEP)  # it was before Leeds
        now_leeds, now_lyon = memory.get(leeds.id, user="ann"), memory.get(lyon.id, user="ann")
        assert (now_leeds.invalidated_by, now_leeds.valid_to) == (None, None)
        assert (now_lyon.invalidated_by, now_lyon.valid_to) == (leeds.id, MAR)
        assert [m.content for m in memory.list_memories(user="ann", as_of=DEC)] == ["I live in Leeds"]


def test_a_statement_written_again_under_its_id_reopens_nothing(location, encoder):
    """A chat history sent whole each turn, a LangGraph put of the same value, an add keyed by the id with new
    metadata: the ended fact stays ended (it had come back as "updated", current and first again)."""
    where, options = location
    with memnets.open(
        where, encoder=encoder, duplicate_threshold=EXACT, supersession=KeywordJudge(), **options
    ) as memory:
        history = [
            {"role": "user", "content": "I live in Leeds", "id": "m1", "time": JAN.isoformat()},
            {"role": "user", "content": "I moved to Lyon", "id": "m2", "time": JUN.isoformat()},
        ]
        memory.add(messages=history, user="ann")
        assert [o.outcome for o in memory.add(messages=history, user="ann")] == ["unchanged", "unchanged"]
        assert memory.get("m1", user="ann").invalidated_by == "m2"
        memory.add("I live in Paris", user="bo", id="b1", t=JAN)
        memory.add("I moved to Rome", user="bo", id="b2", t=JUN)
        memory.add("I live in Paris", user="bo", id="b1", metadata={"checked": True}, t=SEP)
        paris = memory.get("b1", user="bo")
        assert (paris.metadata, paris.valid_to, paris.invalidated_by) == ({"checked": True}, JUN, "b2")


def test_a_record_given_whole_keeps_its_own_end(location, encoder):
    """A record that carries an end (an export read back: each older version written under the memory's id) is no
    restatement: its end is kept (it had been taken for the same statement, and the imported fact came back open)."""
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, **options) as memory:
        first = memory.add("Ann lives in Paris", user="ann", id="paris", t=JAN)
        ended = first.replace(valid_to=MAR, updated_at=JUN)
        assert memory.add(ended, user="ann").outcome == "updated"
        assert memory.get("paris", user="ann").valid_to == MAR


def test_a_stale_fact_said_again_after_its_end_holds_again(location, encoder):
    """Said again after the change that ended it, without an id: a new version, valid from then (it had been taken
    for a repeat, and the fact that ended it stayed first)."""
    where, options = location
    with memnets.open(where, encoder=encoder, supersession=KeywordJudge(), **options) as memory:
        leeds = memory.add("I live in Leeds", user="ann", t=JAN)
        memory.add("I moved to Lyon", user="ann", t=MAR)
        again = memory.add("I live in Leeds", user="ann", t=SEP)
        assert (again.outcome, again.id, again.valid_from, again.valid_to) == ("updated", leeds.id, SEP, None)
        assert memory.add("I live in Leeds", user="ann", t=DEC).outcome == "unchanged"  # current: a repeat
        assert memory.add("I live in Leeds", user="ann", t=JAN).outcome == "unchanged"  # held then


def test_a_manager_emits_a_change_judged_and_answers_the_current_fact_first(tmp_path, encoder):
    """EMIT stores a buffered change as a flush does, judged (it had stored it unjudged, the fact it changed current
    for good); recall and the view answer the current fact before the one it ended, as a search does (they had ranked
    by score alone, the stale fact first)."""
    with memnets.open(
        tmp_path / "m", encoder=encoder, duplicate_threshold=EXACT, supersession=KeywordJudge()
    ) as memory:
        fact = memory.add("I'm vegetarian", user="ann", t=JAN)
        manager = memory.manager("ann", write_through_threshold=0.9, context_budget=1)
        change = manager.observe("I started eating fish again", t=JUN, importance=0.5)
        manager.observe("Lovely weather today", t=JUN, importance=0.5)  # the change leaves the context
        manager.emit([change.id], JUN)
        assert memory.get(fact.id, user="ann").invalidated_by == change.id
        manager.close()
        stale = memory.add("I live in Leeds", user="bo", t=JAN)
        moved = memory.add("I moved to Lyon", user="bo", t=JUN)
        with memory.manager("bo", k=2, working_capacity=10) as fresh:
            assert [m.id for m in fresh.recall("I live in Leeds", now=SEP)] == [moved.id, stale.id]
            assert [m.id for m in fresh.context_for("I live in Leeds", now=SEP).memories] == [moved.id, stale.id]


def test_a_managers_observations_pass_the_same_judge(tmp_path, encoder):
    with memnets.open(
        tmp_path / "m", encoder=encoder, duplicate_threshold=EXACT, supersession=KeywordJudge()
    ) as memory:
        manager = memory.manager("ann")
        older = manager.observe("I'm vegetarian", t=JAN, importance=1.0)  # important: written through at once
        newer = manager.observe("I started eating fish again", t=JUN, importance=1.0)
        ended = memory.get(older.id, user="ann")
        assert (ended.valid_to, ended.invalidated_by) == (JUN, newer.id)


def test_an_observation_ends_a_fact_only_once_it_is_stored(tmp_path, encoder):
    """Judged when stored, not when observed: one the manager does not keep, or deletes from its buffer, ends
    nothing (no fact is left ended by a memory that exists nowhere); a buffered one ends it at the flush."""
    with memnets.open(
        tmp_path / "m", encoder=encoder, duplicate_threshold=EXACT, supersession=KeywordJudge()
    ) as memory:
        fact = memory.add("I'm vegetarian", user="ann", t=JAN)
        with memory.manager("ann", keep_threshold=0.5) as manager:
            manager.observe("I started eating fish again", t=MAR, importance=0.1)  # not kept
        assert memory.get(fact.id, user="ann").valid_to is None
        manager = memory.manager("ann", write_through_threshold=0.9)
        dropped = manager.observe("I started eating fish again", t=MAR, importance=0.5)  # kept, buffered
        assert dropped.id in manager.pending and memory.get(fact.id, user="ann").valid_to is None
        memory.delete(dropped.id, user="ann")
        manager.flush()
        assert memory.get(fact.id, user="ann").valid_to is None
        buffered = manager.observe("I started eating fish again", t=JUN, importance=0.5)
        assert memory.get(fact.id, user="ann").valid_to is None  # in the buffer: not in the store yet
        manager.flush()
        ended = memory.get(fact.id, user="ann")
        assert (ended.valid_to, ended.invalidated_by) == (JUN, buffered.id)
        manager.close()


class AlwaysJudge:
    """A judge that says every newer memory ends every older one: only the write order decides."""

    threshold = 0.5

    def score(self, older: str, newer: str) -> float:
        return 1.0


def test_in_one_add_many_an_item_ends_only_the_items_before_it(tmp_path, encoder):
    with memnets.open(tmp_path / "m", encoder=encoder, duplicate_threshold=EXACT, supersession=AlwaysJudge()) as memory:
        first, second = memory.add_many(["I live in Paris", "I moved to Berlin"], user="ann", t=JAN)
        assert memory.get(first.id, user="ann").invalidated_by == second.id
        assert memory.get(second.id, user="ann").valid_to is None


def test_a_restored_memory_equals_the_one_construction_gives():
    """Stores decode rows with Memory.restored (no second check of what they checked when writing): the
    defaults that follow another time (last_access and updated_at from t, valid_from from updated_at)
    and every other field come out as construction makes them."""
    from memnets.records import Memory

    fields = dict(id="m1", owner="ann", t=JAN, content="Ann lives in Paris", links=("m0",), metadata={"a": 1})
    built, restored = Memory(**fields), Memory.restored(**fields)
    assert restored == built and restored.last_access == restored.updated_at == restored.valid_from == JAN
    later = dict(fields, last_access=MAR, updated_at=JUN, valid_to=SEP, invalidated_by="m2", invalidation_score=0.9)
    assert Memory.restored(**later) == Memory(**later) and Memory.restored(**later).valid_from == JUN
    assert Memory.restored(**fields).outcome is None and Memory.restored(**fields).ttl is None
