"""The one write path (memnets.memory.writes): the consistency rule on its own, then through
MemoryManager.observe, and the times of a write on both stores. The rule through AgentMemory (add,
add_many, update) and the checks every door gets (invalid Unicode, the size limit) are in the memory
contract (memnets.memory.testing), run on both stores and through memnets.Client; the adapters' doors are
tested in tests/integrations/.

The tiny random encoder puts a text and a one-detail change of it at cosine ~0.995 and unrelated
texts at ~0.91, so the default near-match threshold (0.96) separates them as the real encoder does
(the contract's test_a_changed_fact_is_an_update_with_history asserts it).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import memnets
from memnets.memory.consistency import MIN_FRAME_WORDS, classify, facts, frame, normalise
from memnets.memory.manager import DUPLICATE_THRESHOLD
from memnets.memory.testing import FLIGHT, LATER, OTHER, PHONE, PHONE2
from memnets.records import Memory
from memnets.store.errors import InvalidMemoryError

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture()
def memory(encoder, tmp_path):
    with memnets.open(tmp_path / "memory", encoder=encoder) as opened:
        yield opened


def record(text: str, **fields) -> Memory:
    return Memory(id=fields.pop("id", text), owner="ann", t=T0, content=text, **fields)


# ---------------------------------------------------------------------- the rule
def test_facts_are_numbers_times_names_and_negations_in_order():
    assert facts("My flight to Berlin leaves at 10:30 on Monday") == ("berlin", "10:30", "monday")
    assert facts("Call 555-123-4567, not 555-123-4568!") == ("555-123-4567", "not", "555-123-4568")
    assert facts("I don't like it. Anna does.") == ("not",)  # "Anna" starts a sentence: no name by case
    assert facts("We met Anna and two friends yesterday") == ("anna", "two", "yesterday")
    assert normalise("  My  Flight\tto BERLIN ") == normalise("my flight to berlin")
    assert facts("Our baby is here 😀, it cost $5 — wow") == ("😀", "$", "5")  # symbols; punctuation is none


def test_a_text_that_shows_nothing_is_refused(memory):
    for text in ("", "   ", "\u200b", "\ufeff \u2060", "\u0301", "\n\t\x0b"):
        with pytest.raises(ValueError, match="must be non-empty text"):
            memory.add(text, user="ann")
    assert memory.users() == [] and memory.add("\u200bok", user="ann").outcome == "added"


def test_texts_that_differ_in_symbols_alone_are_not_one_memory(memory):
    """A tokenizer reads most emoji as one unknown token, so the two texts embed alike: their symbols tell them
    apart, and the newer is stored (a new version: a near match whose facts differ), never dropped."""
    first = memory.add("🎉", user="ann")
    second = memory.add("💔", user="ann")
    assert second.outcome == "updated" and memory.get(first.id, user="ann").content == "💔"
    assert [m.content for m in memory.history(first.id, user="ann")] == ["🎉", "💔"]


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
        ("Our new baby is here 😀", "Our new baby is here 😭", "updated"),  # an emoji
        ("Rating for the hotel: ⭐⭐⭐⭐⭐", "Rating for the hotel: ⭐", "updated"),  # how many stars
        ("The ticket costs $40", "The ticket costs €40", "updated"),  # a currency
        ("Our new baby is here 😀", "Our new baby is here 😀!", "unchanged"),  # punctuation alone
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
