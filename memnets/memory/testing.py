"""The memory contract suite: the tests every memory with ``AgentMemory``'s API must pass, whatever is behind it.

memnets runs it on ``AgentMemory`` over the embedded store and over PostgreSQL
(tests/memory/test_memory_contract.py) and on ``memnets.Client`` through a real server on both stores
(tests/server/test_server_api.py), so that embedded and remote memories behave alike: the same results,
the same exceptions naming the same arguments. Another implementation of the API (a client of another
server, a wrapper around ``AgentMemory``) runs the same suite by subclassing :class:`MemoryContract` in a
pytest module and defining two fixtures::

    import pytest
    from memnets.memory.testing import MemoryContract

    class TestMyMemory(MemoryContract):
        @pytest.fixture(scope="class")
        def encoder(self):
            return my_encoder()  # the encoder the memories encode with (a memnets.protocols.TextEncoder)

        @pytest.fixture
        def make_memory(self, encoder, tmp_path):
            opened = []

            def make(duplicate_threshold=None):  # None: memnets.open's default threshold
                memory = my_memory(tmp_path, encoder, duplicate_threshold)  # empty, for this test only
                opened.append(memory)
                return memory

            yield make
            for memory in opened:
                memory.close()

The tests pass with an encoder that puts a text and a one-detail change of it above the default
near-match threshold (0.96) and unrelated texts below it, as all-MiniLM-L6-v2 does; the test that
relies on it checks the encoder first. What the suite does not cover: ``manager()`` (a manager's tiers
live in one process) and anything a store promises (:class:`memnets.store.testing.StoreContract`).

This module imports pytest (it is only imported by test code; ``import memnets`` never loads it).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from memnets.memory.manager import DUPLICATE_THRESHOLD
from memnets.memory.texts import MAX_TEXT_CHARS
from memnets.records import Memory
from memnets.store.errors import InvalidMemoryError
from memnets.store.filters import MemoryFilter

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
TEXTS = ["red green blue", "one two three", "cat dog bird", "north south east", "sun moon star", "left right up"]
EXACT = 0.9999  # the tiny random encoder puts every text near every other: merge identical texts only
# a changed fact and an unrelated text: near-matches of each other, or not, at the default threshold
FLIGHT = "My flight to Berlin leaves at 10:30 on Monday"
LATER = "My flight to Berlin leaves at 11:30 on Monday"
PHONE = "My phone number is 555-123-4567"
PHONE2 = "My phone number is 555-123-4568"
OTHER = "I adopted a beagle named Rex"

BAD_CALLS = [  # (call, the error, the argument its message names)
    (lambda m: m.add("text", user=""), ValueError, "user"),
    (lambda m: m.add("text", user=7), TypeError, "user"),
    (lambda m: m.add("   ", user="ann"), ValueError, "text"),
    (lambda m: m.add(42, user="ann"), TypeError, "text"),
    (lambda m: m.add("text", user="ann", metadata=["a"]), TypeError, "metadata"),
    (lambda m: m.add("text", user="ann", objects="ball"), TypeError, "objects"),
    (lambda m: m.add("text", user="ann", importance=2.0), ValueError, "importance"),
    (lambda m: m.add("text", user="ann", kind="dream"), ValueError, "kind"),
    (lambda m: m.add("text", user="ann", t="yesterday"), ValueError, "t"),
    (lambda m: m.add("text", user="ann", id="a~1"), ValueError, "id"),
    (lambda m: m.add_many(["ok", ""], user="ann"), ValueError, "text"),
    (lambda m: m.add_many("one text", user="ann"), TypeError, "items"),
    (lambda m: m.search("q", user="ann", k=0), ValueError, "k"),
    (lambda m: m.search("q", user="ann", k="3"), TypeError, "k"),
    (lambda m: m.search("", user="ann"), ValueError, "query"),
    (lambda m: m.search("q", user="ann", filters={"kind": "dream"}), ValueError, "kind"),
    (lambda m: m.list_memories(user="ann", limit=-1), ValueError, "limit"),
    (lambda m: m.update("x", user="ann"), ValueError, "text"),
]

BAD_TEXTS = [  # (call, where the error says the text is bad)
    (lambda m: m.add("bad \ud800 text", user="ann"), "position 4"),
    (lambda m: m.add_many(["fine", "also \udfff bad"], user="ann"), "items\\[1\\].*position 5"),
    (lambda m: m.add("x" * (MAX_TEXT_CHARS + 1), user="ann"), f"{MAX_TEXT_CHARS:,}"),
    (lambda m: m.search("bad \ud800 query", user="ann"), "query.*position 4"),
    (lambda m: m.search("q" * (MAX_TEXT_CHARS + 1), user="ann"), "MAX_TEXT_CHARS"),
    (lambda m: m.add("bad \x00 text", user="ann"), "text.*NUL.*position 4"),
    (lambda m: m.search("bad \x00 query", user="ann"), "query.*NUL.*position 4"),
]


def count(memory, user: str) -> int:
    """The user's current memories, read through the API (every page of ``list_memories``)."""
    return len(memory.list_memories(user=user, limit=None))


def cosine(encoder, a: str, b: str) -> float:
    """The cosine of two texts' memory vectors under ``encoder`` (its rows are unit length)."""
    vectors = np.asarray(encoder.encode([a, b]))  # a torch tensor or a numpy array
    return float(vectors[0] @ vectors[1])


class MemoryContract:
    """The contract suite as a pytest base class: subclass it and define ``make_memory`` and ``encoder``.

    ``make_memory(duplicate_threshold=None)`` returns an empty memory for the test (``None``: the
    default near-match threshold) and closes what it opened at the end; ``encoder`` is the encoder
    those memories encode with. The fixtures ``memory`` (identical texts merge, nothing else) and
    ``default_memory`` (the default threshold: the consistency rule) are built on it.
    """

    @pytest.fixture
    def make_memory(self):
        raise NotImplementedError("a MemoryContract subclass defines the make_memory fixture")

    @pytest.fixture
    def encoder(self):
        raise NotImplementedError("a MemoryContract subclass defines the encoder fixture")

    @pytest.fixture
    def memory(self, make_memory):
        return make_memory(EXACT)

    @pytest.fixture
    def default_memory(self, make_memory):
        return make_memory()

    # ---------------------------------------------------------------------- times, ids, versions

    def test_one_rule_for_time(self, memory):
        naive = memory.add("naive time", user="ann", t=datetime(2024, 1, 1, 9, 0))
        assert naive.t == datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
        other = memory.add("aware time", user="ann", t=datetime(2024, 1, 1, 9, 0, tzinfo=timezone(timedelta(hours=2))))
        assert other.t == datetime(2024, 1, 1, 7, 0, tzinfo=UTC) and other.t.tzinfo == UTC
        before = datetime.now(UTC)
        default = memory.add("no time given", user="ann")
        assert before <= default.t <= datetime.now(UTC)
        stored = memory.get(naive.id, user="ann")
        assert stored.t == naive.t and stored.t.tzinfo is not None
        in_range = memory.list_memories(
            user="ann", filters={"since": datetime(2024, 1, 1, 8, 0), "until": datetime(2024, 1, 2)}
        )
        assert [m.id for m in in_range] == [naive.id]  # naive bounds read as UTC: 07:00Z is before 08:00

    def test_add_many_with_ids_keys_items_by_them(self, memory):
        memory.add(TEXTS[0], user="ann", id="a")
        out = memory.add_many([TEXTS[1], TEXTS[1], TEXTS[2]], user="ann", ids=["a", None, "c"])
        assert [m.id for m in out] == ["a", "a", "c"]  # "a" gets a new version; the middle item duplicates it
        assert [m.content for m in memory.history("a", user="ann")] == [TEXTS[0], TEXTS[1]]
        with pytest.raises(ValueError, match="repeated"):
            memory.add_many(["x y", "y z"], user="ann", ids=["d", "d"])
        with pytest.raises(ValueError, match="ids"):
            memory.add_many(["x y"], user="ann", ids=["d", "e"])
        assert memory.get("d", user="ann") is None

    def test_near_duplicates_refresh_the_existing_memory(self, memory):
        first = memory.add(TEXTS[0], user="ann", t=T0)
        again = memory.add(TEXTS[0], user="ann", t=T0 + timedelta(days=1))
        assert again.id == first.id and count(memory, "ann") == 1
        assert memory.get(first.id, user="ann").last_access == T0 + timedelta(days=1)  # refreshed
        assert memory.add(TEXTS[0], user="ann", kind="reflection").id != first.id  # another kind is another memory
        assert memory.add(TEXTS[0], user="bob").id != first.id  # another user too
        batch = memory.add_many([TEXTS[1], TEXTS[1], TEXTS[0]], user="ann")
        assert batch[0].id == batch[1].id and batch[2].id == first.id
        assert count(memory, "ann") == 3

    def test_update_keeps_history_and_search_skips_old_versions(self, memory):
        original = memory.add(TEXTS[0], user="ann", t=T0, metadata={"v": 1})
        updated = memory.update(original.id, TEXTS[1], user="ann", t=T0 + timedelta(hours=1))
        assert updated.id == original.id and updated.content == TEXTS[1] and updated.metadata == {"v": 1}
        memory.update(original.id, user="ann", metadata={"v": 3}, t=T0 + timedelta(hours=2))
        history = memory.history(original.id, user="ann")
        assert [m.id for m in history] == [f"{original.id}~1", f"{original.id}~2", original.id]
        assert [m.content for m in history] == [TEXTS[0], TEXTS[1], TEXTS[1]]
        assert [m.superseded_by for m in history] == [original.id, original.id, None]
        hits = memory.search(TEXTS[0], user="ann", k=5)
        assert [h.memory.id for h in hits] == [original.id]  # old versions are never returned
        assert [m.id for m in memory.list_memories(user="ann")] == [original.id] and count(memory, "ann") == 1
        with pytest.raises(KeyError, match="no memory"):
            memory.update("missing", "text", user="ann")
        with pytest.raises(ValueError, match="older version"):
            memory.update(f"{original.id}~1", "text", user="ann")
        # adding with the id of an existing memory is an update too
        memory.add(TEXTS[2], user="ann", id=original.id)
        assert [m.content for m in memory.history(original.id, user="ann")][-1] == TEXTS[2]
        assert memory.delete(original.id, user="ann") is True
        assert memory.get(f"{original.id}~1", user="ann") is None and memory.history(original.id, user="ann") == []

    def test_replaces_supersedes_an_older_memory(self, memory):
        old = memory.add("I live in Paris", user="ann", t=T0)
        new = memory.add("I moved to Lisbon", user="ann", t=T0 + timedelta(days=30), replaces=old.id)
        assert new.id != old.id and memory.get(old.id, user="ann").superseded_by == new.id
        assert [h.memory.id for h in memory.search("I live in Paris", user="ann", k=5)] == [new.id]
        assert [m.id for m in memory.history(new.id, user="ann")] == [old.id, new.id]
        memory.delete(new.id, user="ann")
        assert memory.get(old.id, user="ann") is None  # the replaced memory goes with it
        with pytest.raises(KeyError, match="replaces"):
            memory.add("text", user="ann", replaces="missing")

    # ---------------------------------------------------------------------- reads and deletion

    def test_filters_apply_before_ranking(self, memory):
        for i in range(12):
            memory.add(
                f"note {i} {TEXTS[i % 6]}",
                user="ann",
                t=T0 + timedelta(days=i),
                metadata={"topic": "pets" if i % 4 == 0 else "work", "n": i},
                kind="plan" if i == 5 else "observation",
            )
        pets = memory.search(TEXTS[1], user="ann", k=3, filters={"metadata": {"topic": "pets"}})
        assert sorted(h.memory.metadata["n"] for h in pets) == [0, 4, 8]  # k results whenever k match
        ranged = memory.search(
            TEXTS[1], user="ann", k=10, filters={"since": T0 + timedelta(days=3), "until": T0 + timedelta(days=6)}
        )
        assert sorted(h.memory.metadata["n"] for h in ranged) == [3, 4, 5]
        plans = memory.search(TEXTS[1], user="ann", k=10, filters=MemoryFilter(kinds=("plan",)))
        assert [h.memory.metadata["n"] for h in plans] == [5]
        big = memory.list_memories(user="ann", limit=2, offset=1, filters={"metadata": {"n": {"$gte": 6}}})
        assert [m.metadata["n"] for m in big] == [7, 8]
        with pytest.raises(ValueError, match="colour"):
            memory.search("x", user="ann", filters={"colour": "red"})

    def test_delete_and_delete_all(self, memory):
        a = memory.add(TEXTS[0], user="ann")
        memory.add(TEXTS[1], user="ann")
        memory.add(TEXTS[0], user="bob")
        assert memory.delete(a.id, user="ann") is True and memory.delete(a.id, user="ann") is False
        assert memory.get(a.id, user="ann") is None
        assert [h.memory.content for h in memory.search(TEXTS[0], user="ann")] == [TEXTS[1]]
        assert memory.delete_all(user="ann") == 1 and memory.users() == ["bob"]
        assert count(memory, "bob") == 1

    # ---------------------------------------------------------------------- bad input

    @pytest.mark.parametrize(("call", "error", "named"), BAD_CALLS)
    def test_bad_input_is_named_and_writes_nothing(self, memory, call, error, named):
        memory.add("already here", user="ann")
        with pytest.raises(error, match=named):
            call(memory)
        assert count(memory, "ann") == 1 and memory.users() == ["ann"]

    @pytest.mark.parametrize(("call", "where"), BAD_TEXTS)
    def test_bad_text_is_refused_before_anything_is_written(self, default_memory, call, where):
        default_memory.add(OTHER, user="ann")
        with pytest.raises(InvalidMemoryError, match=where):
            call(default_memory)
        assert [m.content for m in default_memory.list_memories(user="ann")] == [OTHER]

    def test_bad_text_through_update(self, default_memory):
        a = default_memory.add(OTHER, user="ann")
        with pytest.raises(InvalidMemoryError, match="position 2"):
            default_memory.update(a.id, "a \ud83d b", user="ann")
        assert default_memory.history(a.id, user="ann") == [default_memory.get(a.id, user="ann")]

    def test_the_records_validation_is_the_one_every_door_uses(self, default_memory):
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
                default_memory.add("text", user="ann", **bad)
        assert default_memory.list_memories(user="ann") == []

    # ---------------------------------------------------------------------- the consistency rule

    def test_a_changed_fact_is_an_update_with_history(self, default_memory, encoder):
        memory = default_memory
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
        assert count(memory, "ann") == 3
        assert memory.get(first.id, user="ann").outcome is None  # read back: no outcome

    def test_add_many_applies_the_rule_within_the_call(self, default_memory):
        out = default_memory.add_many([FLIGHT, OTHER, LATER, LATER], user="ann")
        assert [m.outcome for m in out] == ["added", "added", "updated", "unchanged"]
        assert out[0].id == out[2].id == out[3].id and out[2].content == LATER
        history = default_memory.history(out[0].id, user="ann")
        assert [m.content for m in history] == [FLIGHT, LATER]
        assert [m.id for m in history] == [f"{out[0].id}~1", out[0].id]  # the earlier item's version, numbered once
        assert sorted(m.content for m in default_memory.list_memories(user="ann")) == sorted([LATER, OTHER])

    def test_an_explicit_id_is_unchanged_only_for_the_same_record(self, default_memory):
        memory = default_memory
        assert memory.add(FLIGHT, user="ann", id="f", metadata={"a": 1}).outcome == "added"
        assert memory.add(FLIGHT, user="ann", id="f", metadata={"a": 1}).outcome == "unchanged"
        replaced = memory.add(FLIGHT, user="ann", id="f", metadata={"b": 2})
        assert replaced.outcome == "updated" and replaced.metadata == {"b": 2}  # keyed: the record as given
        assert len(memory.history("f", user="ann")) == 2

    def test_update_merges_or_replaces_metadata_and_keeps_creation_order(self, default_memory):
        memory = default_memory
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
