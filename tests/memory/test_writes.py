"""The one write path (memnets.memory.writes): the consistency rule on its own, then through
AgentMemory (add, add_many, update) and MemoryManager.observe, and the checks every door gets
(invalid Unicode, the size limit). The adapters' doors are tested in tests/test_integrations_*.py.

The tiny random encoder puts a text and a one-detail change of it at cosine ~0.995 and unrelated
texts at ~0.91, so the default near-match threshold (0.96) separates them as the real encoder does;
each test that relies on it asserts the cosine first.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import memnets
from memnets.memory.manager import DUPLICATE_THRESHOLD
from memnets.memory.writes import MAX_TEXT_CHARS, MIN_FRAME_WORDS, classify, facts, frame, normalise
from memnets.records import Memory
from memnets.store.errors import InvalidMemoryError

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
FLIGHT = "My flight to Berlin leaves at 10:30 on Monday"
LATER = "My flight to Berlin leaves at 11:30 on Monday"
PHONE = "My phone number is 555-123-4567"
PHONE2 = "My phone number is 555-123-4568"
OTHER = "I adopted a beagle named Rex"


@pytest.fixture()
def memory(encoder, tmp_path):
    with memnets.open(tmp_path / "memory", encoder=encoder) as opened:
        yield opened


def cosine(encoder, a: str, b: str) -> float:
    vectors = encoder.encode([a, b]).numpy()
    return float(vectors[0] @ vectors[1])


def record(text: str, **fields) -> Memory:
    return Memory(id=fields.pop("id", text), owner="ann", t=T0, content=text, **fields)


# ---------------------------------------------------------------------- the rule
def test_facts_are_numbers_times_names_and_negations_in_order():
    assert facts("My flight to Berlin leaves at 10:30 on Monday") == ("berlin", "10:30", "monday")
    assert facts("Call 555-123-4567, not 555-123-4568!") == ("555-123-4567", "not", "555-123-4568")
    assert facts("I don't like it. Anna does.") == ("not",)  # "Anna" starts a sentence: no name by case
    assert facts("We met Anna and two friends yesterday") == ("anna", "two", "yesterday")
    assert normalise("  My  Flight\tto BERLIN ") == normalise("my flight to berlin")


@pytest.mark.parametrize(
    ("old", "new", "outcome"),
    [
        (FLIGHT, FLIGHT, "unchanged"),  # a verbatim repeat
        (FLIGHT, "  my FLIGHT to berlin   leaves at 10:30 on monday ", "unchanged"),  # whitespace and case
        (FLIGHT, "My flight to Berlin leaves at 10:30 on Monday!", "unchanged"),  # same facts, near-equal
        (FLIGHT, LATER, "updated"),  # a time changed
        (PHONE, PHONE2, "updated"),  # one digit
        ("I like hiking with Anna", "I like hiking with Maria", "updated"),  # a name
        ("I like hiking on Sundays", "I don't like hiking on Sundays", "updated"),  # a negation
        ("Joanna: see you on Monday", "Nate: see you on Monday", "added"),  # another speaker says it
    ],
)
def test_classify(old, new, outcome):
    stored = record(old, id="old")
    assert classify(record(new, id="new"), [(stored, 0.99)], DUPLICATE_THRESHOLD) == (
        outcome,
        None if outcome == "added" else stored,
    )


def test_classify_needs_a_near_match_and_the_same_kind():
    stored = record(FLIGHT, id="old")
    train = record("My train to Berlin leaves at 11:30 on Monday", id="new")
    assert classify(train, [(stored, 0.9)], 0.98) == ("added", None)  # not near, another sentence
    assert classify(record(FLIGHT, id="new"), [(stored, 0.2)], 0.98) == ("unchanged", stored)  # equal text
    assert classify(record(LATER, id="new", kind="plan"), [(stored, 0.99)], 0.98) == ("added", None)
    assert classify(record(FLIGHT, id="new"), [(stored, 1.0)], None) == ("added", None)  # turned off
    other_agent = record(LATER, id="new", agent="bob")
    assert classify(other_agent, [(stored, 0.99)], 0.98) == ("added", None)


def test_classify_takes_the_same_sentence_with_other_names_as_an_update_at_any_cosine():
    """A changed name moves the cosine far below the threshold (0.54 for "meeting with Priya" /
    "with Omar" with all-MiniLM-L6-v2): the sentence frame catches it, and only a change of names."""
    assert frame("The meeting with Priya is at 4 pm") == frame("The meeting with Omar is at 4 pm")
    assert facts("The meeting with Priya is at 4 pm") == ("priya", "4", "pm")
    stored = record("The meeting with Priya is at 4 pm", id="old")
    assert classify(record("The meeting with Omar is at 4 pm", id="new"), [(stored, 0.54)], 0.96) == (
        "updated",
        stored,
    )
    paris = record("I live in Paris", id="old")  # 0.65 with all-MiniLM-L6-v2
    assert classify(record("I live in Lisbon", id="new"), [(paris, 0.65)], 0.96) == ("updated", paris)
    # a changed number is left to the cosine: "note 3" / "note 4" far apart are two memories
    note = record("note 3 red green blue", id="old")
    assert classify(record("note 4 red green blue", id="new"), [(note, 0.9)], 0.96) == ("added", None)
    assert classify(record("The meeting with Omar is at 5 pm", id="new"), [(stored, 0.54)], 0.96) == ("added", None)
    # another sentence about other facts stays a memory of its own
    assert classify(record("The dinner with Omar is at 4 pm", id="new"), [(stored, 0.54)], 0.96) == ("added", None)
    # another speaker's same sentence is theirs
    said = record("Joanna: I will meet Priya at the station", id="old")
    assert classify(record("Nate: I will meet Omar at the station", id="new"), [(said, 0.5)], 0.96) == ("added", None)
    # a frame of fewer than MIN_FRAME_WORDS words says too little to be the same sentence
    bye = record("Joanna: Bye Nate!", id="old")
    assert len([w for w in frame(bye.content) if w.isalpha()]) < MIN_FRAME_WORDS
    assert classify(record("Joanna: Bye Omar!", id="new"), [(bye, 0.5)], 0.96) == ("added", None)
    # the check turned off
    assert classify(record("The meeting with Omar is at 4 pm", id="new"), [(stored, 0.54)], None) == ("added", None)


def test_classify_matches_frames_written_in_other_unicode_forms_and_cases():
    """Before parsing a candidate fully, classify checks that its text holds the frame's words; that
    check must pass wherever the frames are equal: ligatures and full-width letters (NFKC), case
    folding that changes a word's length, curly apostrophes, a speaker prefix."""
    pairs = [
        ("I ﬁnished the ﬁrst draft with Priya", "I finished the first draft with Omar"),
        ("ｔｈｅ meeting with Priya is at noon", "The meeting with Omar is at noon"),
        ("Die Straße mit Priya ist lang heute", "Die Strasse mit Omar ist lang heute"),
        ("I don’t work with Priya on Fridays", "I don't work with Omar on Fridays"),
        ("Joanna: I will meet Priya at the station", "Joanna: i will meet Omar at the station"),
    ]
    for old, new in pairs:
        assert frame(old) == frame(new), (old, new)
        stored = record(old, id="old")
        assert classify(record(new, id="new"), [(stored, 0.2)], 0.96) == ("updated", stored), (old, new)


def test_classify_compares_a_memory_with_its_own_scope_only():
    stored = record(FLIGHT, id="old", agent="planner", session="s1")
    for scope in ({"agent": "critic", "session": "s1"}, {"agent": "planner", "session": "s2"}, {}):
        assert classify(record(FLIGHT, id="new", **scope), [(stored, 1.0)], 0.98) == ("added", None)  # equal text
        assert classify(record(LATER, id="new", **scope), [(stored, 0.99)], 0.98) == ("added", None)  # changed fact
    same = {"agent": "planner", "session": "s1"}
    assert classify(record(FLIGHT, id="new", **same), [(stored, 1.0)], 0.98) == ("unchanged", stored)
    assert classify(record(LATER, id="new", **same), [(stored, 0.99)], 0.98) == ("updated", stored)


# ---------------------------------------------------------------------- through AgentMemory
def test_a_changed_fact_is_an_update_with_history(memory, encoder):
    assert cosine(encoder, FLIGHT, LATER) >= DUPLICATE_THRESHOLD > cosine(encoder, FLIGHT, OTHER)
    first = memory.add(FLIGHT, user="ann", t=T0, metadata={"src": "chat"})
    assert first.outcome == "added"
    later = memory.add(LATER, user="ann", t=T0 + timedelta(hours=1), metadata={"seen": 2})
    assert later.outcome == "updated" and later.id == first.id and later.content == LATER
    assert later.t == T0 and later.updated_at == T0 + timedelta(hours=1)  # created kept
    assert later.metadata == {"src": "chat", "seen": 2}  # an add's metadata is merged into the memory's
    assert [m.content for m in memory.history(first.id, user="ann")] == [FLIGHT, LATER]
    assert [h.memory.content for h in memory.search(FLIGHT, user="ann", k=5)] == [LATER]
    again = memory.add(" my flight to berlin leaves at 11:30 on monday", user="ann", t=T0 + timedelta(hours=2))
    assert again.outcome == "unchanged" and again.id == first.id and again.content == LATER
    assert memory.get(first.id, user="ann").last_access == T0 + timedelta(hours=2)
    assert len(memory.history(first.id, user="ann")) == 2  # unchanged writes no version
    assert memory.add(OTHER, user="ann").outcome == "added"
    phone = memory.add(PHONE, user="ann")
    assert memory.add(PHONE2, user="ann").id == phone.id
    assert memory.get(phone.id, user="ann").content == PHONE2
    assert memory.store.count("ann") == 3
    assert memory.get(first.id, user="ann").outcome is None  # read from the store: no outcome


def test_add_many_applies_the_rule_within_the_call(memory):
    out = memory.add_many([FLIGHT, OTHER, LATER, LATER], user="ann")
    assert [m.outcome for m in out] == ["added", "added", "updated", "unchanged"]
    assert out[0].id == out[2].id == out[3].id and out[2].content == LATER
    history = memory.history(out[0].id, user="ann")
    assert [m.content for m in history] == [FLIGHT, LATER]
    assert [m.id for m in history] == [f"{out[0].id}~1", out[0].id]  # the earlier item's version, numbered by the store
    assert sorted(m.content for m in memory.list_memories(user="ann")) == sorted([LATER, OTHER])


def test_an_explicit_id_is_unchanged_only_for_the_same_record(memory):
    assert memory.add(FLIGHT, user="ann", id="f", metadata={"a": 1}).outcome == "added"
    assert memory.add(FLIGHT, user="ann", id="f", metadata={"a": 1}).outcome == "unchanged"
    replaced = memory.add(FLIGHT, user="ann", id="f", metadata={"b": 2})
    assert replaced.outcome == "updated" and replaced.metadata == {"b": 2}  # keyed: the record as given
    assert len(memory.history("f", user="ann")) == 2


def test_update_merges_or_replaces_metadata_and_keeps_creation_order(memory):
    a = memory.add(FLIGHT, user="ann", t=T0, metadata={"x": 1, "y": 2})
    b = memory.add(OTHER, user="ann", t=T0 + timedelta(minutes=1))
    merged = memory.update(a.id, user="ann", metadata={"y": 3}, merge_metadata=True, t=T0 + timedelta(days=1))
    assert merged.metadata == {"x": 1, "y": 3} and merged.outcome == "updated"
    replaced = memory.update(a.id, LATER, user="ann", metadata={"z": 0}, t=T0 + timedelta(days=2))
    assert replaced.metadata == {"z": 0} and replaced.content == LATER
    assert replaced.t == T0 and replaced.updated_at == T0 + timedelta(days=2)
    assert memory.update(a.id, LATER, user="ann", metadata={"z": 0}).outcome == "unchanged"
    assert [m.id for m in memory.list_memories(user="ann")] == [a.id, b.id]  # no jump to the end
    history = memory.history(a.id, user="ann")
    assert [m.content for m in history] == [FLIGHT, FLIGHT, LATER]
    assert [m.metadata for m in history] == [{"x": 1, "y": 2}, {"x": 1, "y": 3}, {"z": 0}]


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda m: m.add("bad \ud800 text", user="ann"), "position 4"),
        (lambda m: m.add_many(["fine", "also \udfff bad"], user="ann"), "items\\[1\\].*position 5"),
        (lambda m: m.add("x" * (MAX_TEXT_CHARS + 1), user="ann"), f"{MAX_TEXT_CHARS:,}"),
        (lambda m: m.search("bad \ud800 query", user="ann"), "query.*position 4"),
        (lambda m: m.search("q" * (MAX_TEXT_CHARS + 1), user="ann"), "MAX_TEXT_CHARS"),
    ],
)
def test_bad_text_is_refused_before_anything_is_written(memory, call, where):
    memory.add(OTHER, user="ann")
    with pytest.raises(InvalidMemoryError, match=where):
        call(memory)
    assert [m.content for m in memory.list_memories(user="ann")] == [OTHER]


def test_bad_text_through_update(memory):
    a = memory.add(OTHER, user="ann")
    with pytest.raises(InvalidMemoryError, match="position 2"):
        memory.update(a.id, "a \ud83d b", user="ann")
    assert memory.history(a.id, user="ann") == [memory.get(a.id, user="ann")]


# ---------------------------------------------------------------------- through the manager
def test_observe_follows_the_same_rule(memory):
    manager = memory.manager("ann", write_through_threshold=0.0)
    first = manager.observe(FLIGHT, t=T0)
    assert first.outcome == "added"
    later = manager.observe(LATER, t=T0 + timedelta(hours=1))
    assert later.outcome == "updated" and later.id == first.id
    assert [e.memory.content for e in manager.context.entries] == [LATER]  # the held entry is the new version
    assert [m.content for m in memory.history(first.id, user="ann")] == [FLIGHT, LATER]
    assert manager.observe("my flight to Berlin leaves at 11:30 on Monday", t=T0 + timedelta(hours=2)).outcome == (
        "unchanged"
    )
    assert manager.observe(OTHER, t=T0).outcome == "added"
    # a memory written through the API is the candidate of the manager too, and the other way round
    phone = memory.add(PHONE, user="ann")
    assert manager.observe(PHONE2).id == phone.id and memory.get(phone.id, user="ann").content == PHONE2
    assert memory.add(FLIGHT, user="ann").id == first.id  # the 10:30 flight again: an update back
    with pytest.raises(InvalidMemoryError, match="position 4"):
        manager.observe("bad \ud800 text")
    with pytest.raises(TypeError, match="objects"):
        manager.observe("fine", objects="ball")
    manager.close()


def test_observe_updates_a_memory_still_in_the_write_buffer(memory):
    manager = memory.manager("ann", write_through_threshold=1.0, batch_size=100)
    first = manager.observe(FLIGHT, t=T0)
    assert first.id in manager.pending and memory.get(first.id, user="ann") is None
    later = manager.observe(LATER, t=T0 + timedelta(hours=1))
    assert later.id == first.id and first.id not in manager.pending
    assert [m.content for m in memory.history(first.id, user="ann")] == [FLIGHT, LATER]
    manager.close()


def test_the_records_validation_is_the_one_every_door_uses(memory):
    for bad, error in (
        ({"metadata": ["a"]}, TypeError),
        ({"objects": "ball"}, TypeError),
        ({"importance": 2.0}, ValueError),
        ({"importance": True}, TypeError),
        ({"agent": 3}, TypeError),
        ({"kind": "dream"}, ValueError),
    ):
        with pytest.raises(error, match=next(iter(bad))):
            Memory(id="x", owner="ann", t=T0, content="text", **bad)
        with pytest.raises(error, match=next(iter(bad))):
            memory.add("text", user="ann", **bad)
    assert memory.list_memories(user="ann") == []


# ---------------------------------------------------------------------- times on both stores
def test_created_and_updated_times_survive_reopening_on_both_stores(encoder, location):
    where, options = location
    with memnets.open(where, encoder=encoder, **options) as memory:
        first = memory.add(FLIGHT, user="ann", t=T0)
        memory.add(OTHER, user="ann", t=T0 + timedelta(minutes=1))
        memory.update(first.id, LATER, user="ann", t=T0 + timedelta(days=3))
    with memnets.open(where, encoder=encoder, **options) as memory:
        current = memory.get(first.id, user="ann")
        assert (current.created_at, current.updated_at) == (T0, T0 + timedelta(days=3))
        old, new = memory.history(first.id, user="ann")
        assert (old.content, old.created_at, old.updated_at) == (FLIGHT, T0, T0)
        assert new == current
        assert [m.content for m in memory.list_memories(user="ann")] == [LATER, OTHER]  # creation order
        memory.delete_all(user="ann")


def test_a_row_without_updated_at_reads_it_as_its_creation_time(encoder, tmp_path):
    """A first version stores no updated_at (its default, t), as rows written before it existed: both read t."""
    import json
    import sqlite3

    with memnets.open(tmp_path / "m", encoder=encoder) as memory:
        added = memory.add(FLIGHT, user="ann", t=T0)
    with sqlite3.connect(tmp_path / "m" / "archive.sqlite3") as conn:
        (payload,) = conn.execute("SELECT payload FROM memories").fetchone()
        assert "updated_at" not in json.loads(payload)
    with memnets.open(tmp_path / "m", encoder=encoder) as memory:
        assert memory.get(added.id, user="ann").updated_at == T0


class StrictTokenizer:
    """A real tokenizer that refuses one character (as a tokenizer of a narrower alphabet does)."""

    def __init__(self, inner, refused: str):
        self.inner, self.refused = inner, refused

    def __call__(self, text, **options):
        if self.refused in text:
            raise ValueError(f"cannot tokenise {self.refused!r}")
        return self.inner(text, **options)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_text_the_tokenizer_cannot_take_is_refused_with_its_position(encoder, tmp_path):
    class Strict:
        dim, tokenizer = encoder.dim, StrictTokenizer(encoder.tokenizer, "\ue000")
        fingerprint = f"strict:{encoder.fingerprint}"

        def encode(self, texts, kind="memory"):
            return encoder.encode(texts, kind=kind)

    with memnets.open(tmp_path / "m", encoder=Strict()) as memory:
        with pytest.raises(InvalidMemoryError, match="tokenizer cannot take it at position 7"):
            memory.add("ok text\ue000 more", user="ann")
        manager = memory.manager("ann")
        with pytest.raises(InvalidMemoryError, match="position 0"):
            manager.observe("\ue000")
        assert memory.users() == [] and memory.add("fine", user="ann").outcome == "added"


def test_a_speaker_prefix_is_no_name():
    assert facts("Joanna: Totally! Bye Nate!") == facts("Joanna: Bye Nate!") == ("nate",)
