"""memnets.open / AgentMemory on the embedded store with the tiny encoder: scoping, durability,
encoding once, managers' bad input, and deletion that is final everywhere (store, every live manager's
tiers and write buffer, other processes, restarts). What every memory promises, through every door (times,
near-duplicates, versions, filters, bad input), is the contract suite (memnets.memory.testing,
tests/memory/test_memory_contract.py)."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from successor_helpers import (
    KS,
    QUESTION,
    STALE,
    SUCCESSOR,
    LikelyLyonJudge,
    LyonJudge,
    check_current_first,
    facts,
)

import memnets
from memnets.api import AgentMemory, SearchHit
from memnets.memory.events import Move
from memnets.memory.manager import ManagerConfig
from memnets.memory.testing import EXACT, T0, TEXTS
from memnets.records import Memory
from memnets.store import InvalidMemoryError, open_store


@pytest.fixture()
def memory(encoder, tmp_path):
    with memnets.open(tmp_path / "memory", encoder=encoder, duplicate_threshold=EXACT) as opened:
        yield opened


class RecordingStore:
    """The real store, with the upsert batches it received recorded (a spy, not a mock)."""

    def __init__(self, store):
        self.store, self.batches = store, []

    def upsert(self, memories, vectors, **options):  # options: chunks, as the store takes them
        self.batches.append([m.id for m in memories])
        return self.store.upsert(memories, vectors, **options)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_add_search_get_are_scoped_to_the_user_and_durable(encoder, tmp_path):
    with memnets.open(tmp_path / "m", encoder=encoder, duplicate_threshold=EXACT) as memory:
        added = [memory.add(text, user="ann", t=T0 + timedelta(minutes=i)) for i, text in enumerate(TEXTS[:3])]
        bob = memory.add(TEXTS[0], user="bob", t=T0)
        hits = memory.search(TEXTS[1], user="ann", k=5)
        assert all(isinstance(hit, SearchHit) for hit in hits) and len(hits) == 3
        assert hits[0].memory.id == added[1].id and hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert bob.id not in {h.memory.id for h in hits}
        assert memory.get(bob.id, user="ann") is None and memory.get(bob.id, user="bob").content == TEXTS[0]
        assert memory.users() == ["ann", "bob"]
        assert len(added[0].id) == 32 and int(added[0].id, 16) >= 0  # uuid4 hex
    with memnets.open(tmp_path / "m", encoder=encoder) as again:  # durable when add returned
        assert [m.content for m in again.list_memories(user="ann")] == TEXTS[:3]


def test_add_many_encodes_once_and_writes_important_memories_first(encoder, tmp_path):
    calls = []

    class CountingEncoder:
        dim, tokenizer, fingerprint = encoder.dim, encoder.tokenizer, encoder.fingerprint

        def encode(self, texts, kind="memory"):
            calls.append(len(texts))
            return encoder.encode(texts, kind=kind)

    store = RecordingStore(open_store(tmp_path / "m", encoder.dim))
    memory = AgentMemory(
        store,
        CountingEncoder(),
        owns_store=True,
        config=ManagerConfig(write_through_threshold=0.5, batch_size=2, duplicate_threshold=EXACT),
    )
    records = [
        Memory(id=f"r{i}", owner="ann", t=T0, content=TEXTS[i], importance=imp)
        for i, imp in enumerate([0.9, 0.1, 0.8, 0.2, 0.3])
    ]
    out = memory.add_many(records, user="ann")
    assert [m.id for m in out] == ["r0", "r1", "r2", "r3", "r4"] and calls == [5]
    assert store.batches == [["r0", "r2"], ["r1", "r3"], ["r4"]]
    texts = memory.add_many(["alpha beta", "gamma delta"], user="ann", kind="message", metadata={"src": "chat"})
    assert calls == [5, 2] and all(m.kind == "message" and m.metadata == {"src": "chat"} for m in texts)
    memory.close()


def test_a_stale_fact_never_ranks_above_its_successor_at_any_k(encoder, location):
    """A fact the user changed ("I live in Leeds", then "I moved to Lyon"), asked with the stale one's own
    words: search answers the successor first at k = 1, 3 and 10, the stale fact right after it, scores
    non-increasing, one order at every k (successor_helpers). Before, k = 1 answered "I live in Leeds"."""
    where, options = location
    judge = LyonJudge()
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=judge, **options) as memory:
        for text, when in facts():
            memory.add(text, user="ann", t=when)
        answers = {k: [(h.memory.content, h.score) for h in memory.search(QUESTION, user="ann", k=k)] for k in KS}
        check_current_first(answers)
        [then] = memory.search(QUESTION, user="ann", k=1, as_of=facts()[0][1])  # an as-of read: as it was
        assert then.memory.content == STALE and then.memory.invalidated_by is not None
        assert answers[1][0][1] == pytest.approx(then.score)  # the successor shows the stale fact's score
        vector = memory.encoder.encode([QUESTION], kind="query")
        assert [h.memory.content for h in memory.search_vector(vector[0], user="ann", k=1)] == [SUCCESSOR]


def test_a_known_at_read_answers_the_successor_as_it_was_known_first(encoder, location):
    """A known-at read from before the successor's later version answers the version of its time
    (``{id}~1``) where the stale fact names the memory's id: the successor still answers first at every k, the
    stale fact right after it. Before, k = 1 answered "I live in Leeds"."""
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=LyonJudge(), **options) as memory:
        for text, when in facts():
            memory.add(text, user="ann", t=when)
        [successor] = [m for m in memory.list_memories(user="ann") if m.content == SUCCESSOR]
        memory.update(successor.id, user="ann", metadata={"checked": True}, t=datetime(2026, 1, 1, tzinfo=UTC))
        known_at = datetime(2025, 6, 1, tzinfo=UTC)
        hits = {k: memory.search(QUESTION, user="ann", k=k, known_at=known_at) for k in KS}
        assert hits[1][0].memory.id == f"{successor.id}~1"
        check_current_first({k: [(h.memory.content, h.score) for h in found] for k, found in hits.items()})


def test_an_update_to_a_new_text_is_judged_as_an_add_is(encoder, location):
    """``update(id, text)`` states something new, as ``add(text, id=...)`` does: the supersession step reads it, so
    "I moved to Lyon" written over another memory's text ends "I live in Leeds" and answers first. Before, only the
    keyed add was judged and the update left the stale fact current and first."""
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=LyonJudge(), **options) as memory:
        stale = memory.add(STALE, user="ann", t=datetime(2024, 1, 1, tzinfo=UTC))
        memory.add("I work at the bank", user="ann", id="job", t=datetime(2024, 2, 1, tzinfo=UTC))
        memory.update("job", user="ann", metadata={"checked": True}, t=datetime(2024, 3, 1, tzinfo=UTC))
        assert memory.get(stale.id, user="ann").invalidated_by is None  # no new text: nothing to judge
        memory.update("job", SUCCESSOR, user="ann", t=datetime(2024, 5, 1, tzinfo=UTC))
        ended = memory.get(stale.id, user="ann")
        assert ended.invalidated_by == "job" and ended.valid_to == datetime(2024, 5, 1, tzinfo=UTC)
        assert [h.memory.content for h in memory.search(QUESTION, user="ann", k=1)] == [SUCCESSOR]


@pytest.mark.parametrize("judge", [LyonJudge(), LikelyLyonJudge()], ids=["ended", "likely replaced"])
def test_deleting_the_memory_that_ended_a_fact_makes_it_current_again(encoder, location, judge):
    """The judge's decision read the successor's text; deleted, the decision goes with it: the stale fact is valid
    again (a new version), or no longer linked, and answers an as-of read of now; no version of it names the
    deleted memory (a caller's id may spell what it said: the history had kept it). Before, it stayed ended by a
    memory that no longer existed, and the user had no current fact."""
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=judge, **options) as memory:
        stale = memory.add(STALE, user="ann", t=datetime(2024, 1, 1, tzinfo=UTC))
        successor = memory.add(SUCCESSOR, user="ann", t=datetime(2024, 5, 1, tzinfo=UTC))
        linked = memory.get(stale.id, user="ann")
        assert successor.id in (linked.invalidated_by, linked.likely_replaced_by)
        assert memory.delete(successor.id, user="ann")
        now = memory.get(stale.id, user="ann")
        assert (now.valid_to, now.invalidated_by, now.likely_replaced_by) == (None, None, None)
        versions = memory.history(stale.id, user="ann")
        assert len(versions) == 3  # as said, as judged (now without the deleted memory), as released
        assert all(successor.id not in (v.invalidated_by, v.likely_replaced_by) for v in versions)
        assert all(v.valid_to is None for v in versions)
        found = memory.search(QUESTION, user="ann", k=3, as_of=datetime.now(UTC))
        assert [h.memory.content for h in found] == [STALE]


def test_a_likely_replaced_fact_stays_valid_and_ranks_below_its_likely_successor_at_any_k(encoder, location):
    """The judge more likely than not, too unsure to end it (LikelyLyonJudge: 0.7 between its order_threshold
    0.5 and its threshold 0.9): "I live in Leeds" stays valid, linked to "I moved to Lyon", and search answers as
    it does for an ended fact (successor_helpers). Before, only an ending moved the stale fact down."""
    where, options = location
    with memnets.open(
        where, encoder=encoder, duplicate_threshold=EXACT, supersession=LikelyLyonJudge(), **options
    ) as memory:
        for text, when in facts():
            memory.add(text, user="ann", t=when)
        stale, successor = (
            next(m for m in memory.list_memories(user="ann") if m.content == t) for t in (STALE, SUCCESSOR)
        )
        assert (stale.valid_to, stale.invalidated_by) == (None, None)
        assert (stale.likely_replaced_by, stale.likely_replaced_score) == (successor.id, 0.7)
        answers = {k: [(h.memory.content, h.score) for h in memory.search(QUESTION, user="ann", k=k)] for k in KS}
        check_current_first(answers)
        memory.update(stale.id, "I live in Leeds again", user="ann")  # a new text: no judgement of the old one ranks it
        assert memory.get(stale.id, user="ann").likely_replaced_by is None


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"metadata": {"note": "a\x00b"}}, r"metadata\['note'\] contains NUL"),
        ({"metadata": {"a\x00": 1}}, "metadata: the field name .* contains NUL"),
        ({"metadata": {"list": [{"deep": "\x00"}]}}, r"metadata\['list'\]\[0\]\['deep'\] contains NUL"),
        ({"session": "s\x00"}, "session contains NUL"),
        ({"agent": "planner\x00"}, "agent contains NUL"),
        ({"user": "an\x00n"}, "owner contains NUL"),
    ],
    ids=["metadata value", "metadata field", "nested metadata", "session", "agent", "user"],
)
def test_a_nul_anywhere_is_refused_by_both_stores_naming_where(encoder, location, options, named):
    """PostgreSQL holds no NUL (U+0000) in text, and its driver's error named nothing; the embedded store took it. Both
    refuse it now, naming the field, and write nothing (the text and the query: memnets.memory.testing.BAD_TEXTS)."""
    where, store_options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, **store_options) as memory:
        memory.add("already here", user="ann")
        with pytest.raises(ValueError, match=named):
            memory.add("I live in Leeds", **{"user": "ann", **options})
        assert [m.content for m in memory.list_memories(user="ann")] == ["already here"]
        assert memory.users() == ["ann"]


@pytest.mark.parametrize(
    ("metadata", "named"),
    [({"note": "a\x00b"}, r"metadata\['note'\] contains NUL"), ({"$in": 1}, "'\\$in'")],
    ids=["NUL", "operator"],
)
def test_add_many_refusing_a_record_past_the_first_batch_leaves_no_earlier_batch(encoder, location, metadata, named):
    """add_many writes in batches of ``batch_size``, and the store checks each record as its batch is written: the
    batches are one transaction, so a record refused in the last batch leaves none of the batches before it."""
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, batch_size=2, **options) as memory:
        memory.add("already here", user="ann")
        records = [Memory(id=f"m{n}", owner="ann", t=T0, content=TEXTS[n % len(TEXTS)] + f" {n}") for n in range(6)]
        records[5] = records[5].replace(metadata=metadata)
        with pytest.raises(ValueError, match=named):
            memory.add_many(records, user="ann")
        assert [m.content for m in memory.list_memories(user="ann")] == ["already here"]


@pytest.mark.parametrize(
    ("call", "error", "named"),
    [
        (lambda m: m.manager("ann", k=0), ValueError, "k"),
        (lambda m: m.manager("ann", colour=1), TypeError, "colour"),
    ],
)
def test_bad_manager_input_is_named_and_writes_nothing(memory, call, error, named):
    """The contract's bad input (memnets.memory.testing.BAD_CALLS) for manager(), which only AgentMemory has."""
    memory.add("already here", user="ann")
    with pytest.raises(error, match=named):
        call(memory)
    assert memory.store.count("ann") == 1 and memory.users() == ["ann"]


def test_delete_takes_the_reflections_and_summaries_built_on_the_memory(memory):
    manager = memory.manager("ann", context_budget=100, reflection_threshold=1.5, write_through_threshold=0.0)
    for i, text in enumerate(TEXTS[:3]):
        manager.observe(text, id=f"m{i}", importance=0.6, t=T0 + timedelta(minutes=i))
    reflection = memory.get(manager.events.of(Move.REFLECT)[0].ids[0], user="ann")
    assert reflection.links == ("m0", "m1", "m2") and TEXTS[0] in reflection.content  # it quotes m0
    summary = memory.add(
        Memory(
            id="s1", owner="ann", t=T0, content=f"about: {reflection.content}", kind="summary", links=(reflection.id,)
        ),
        user="ann",
    )
    unrelated = memory.add(
        Memory(id="s2", owner="ann", t=T0, content=TEXTS[4], kind="summary", links=("m1",)), user="ann"
    )
    bob = memory.add(Memory(id="r", owner="bob", t=T0, content=TEXTS[0], kind="reflection", links=("m0",)), user="bob")

    assert memory.delete("m0", user="ann") is True
    left = {m.id for m in memory.list_memories(user="ann")}
    assert left == {"m1", "m2", unrelated.id}  # m0, its reflection and the summary of that reflection are gone
    assert reflection.id not in manager.working and summary.id not in manager.working
    assert memory.get(bob.id, user="bob") is not None  # another user's link to the same id is not followed
    assert all(TEXTS[0] not in h.memory.content for h in memory.search(TEXTS[0], user="ann", k=10))


class CountingEncoder:
    """The real encoder, with the kinds of its encode calls recorded (a spy, not a mock)."""

    def __init__(self, encoder):
        self.encoder, self.calls = encoder, []

    def encode(self, texts, kind="memory", **kwargs):
        self.calls.append(kind)
        return self.encoder.encode(texts, kind=kind, **kwargs)

    def __getattr__(self, name):
        return getattr(self.encoder, name)


def test_search_many_encodes_the_query_once_and_matches_search_per_user(encoder, tmp_path):
    spy = CountingEncoder(encoder)
    with memnets.open(tmp_path / "m", encoder=spy, duplicate_threshold=EXACT) as memory:
        for user, texts in (("ann", TEXTS[:3]), ("bob", TEXTS[2:5]), ("cy", TEXTS[4:])):
            memory.add_many(texts, user=user)
        spy.calls.clear()
        many = memory.search_many(TEXTS[2], users=["cy", "ann", "bob", "nobody"], k=2)
        assert spy.calls == ["query"] and list(many) == ["cy", "ann", "bob", "nobody"] and many["nobody"] == []
        for user in ("ann", "bob", "cy"):
            assert many[user] == memory.search(TEXTS[2], user=user, k=2)
        assert memory.search_many(TEXTS[2], users=[], k=2) == {}
        with pytest.raises(TypeError, match="users must be a list"):
            memory.search_many(TEXTS[2], users="ann")
        with pytest.raises(ValueError, match="user"):
            memory.search_many(TEXTS[2], users=["ann", ""])


def test_the_encoder_is_chosen_at_open_and_never_swapped_after(encoder, tmp_path):
    """A wrapper (the server's BatchingEncoder) is passed to ``memnets.open``, and the writes and searches
    use it; replacing the encoder of an open memory is refused (before, a setter swapped it after the
    write path was built)."""
    spy = CountingEncoder(encoder)
    with memnets.open(tmp_path / "m", encoder=spy) as memory:
        memory.add(TEXTS[0], user="ann")
        memory.search(TEXTS[0], user="ann")
        assert spy.calls == ["memory", "query"]
        with pytest.raises(AttributeError):
            memory.encoder = encoder
        assert memory.encoder is spy


def test_users_share_one_encoder_loaded_once(tiny_model_dir, tmp_path, monkeypatch):
    from memnets.nn.encoder import MemoryEncoder

    loads = []
    real = MemoryEncoder.from_pretrained.__func__

    def counting(cls, *args, **kwargs):
        loads.append(args)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(MemoryEncoder, "from_pretrained", classmethod(counting))
    with memnets.open(tmp_path / "m", encoder=str(tiny_model_dir)) as memory:
        ann, bob = memory.manager("ann"), memory.manager("bob")
        assert ann.encoder is bob.encoder is memory.encoder and ann.store is bob.store is memory.store
        assert ann.importance is bob.importance and ann.gate is bob.gate
        ann.observe(TEXTS[0], id="a1", importance=0.9)
        bob.observe(TEXTS[1], id="b1", importance=0.9)
        assert [m.id for m in memory.list_memories(user="ann")] == ["a1"]
    assert len(loads) == 1


def test_manager_observe_fields_identity_and_defaults(memory):
    manager = memory.manager("ann", context_budget=100, write_through_threshold=0.0)
    before = datetime.now(UTC)
    seen = manager.observe(
        "I kicked the ball in the park", speaker="Ann", action="kick", objects=["ball"], location="park"
    )
    assert (seen.agent, seen.action, seen.objects, seen.location) == ("Ann", "kick", ("ball",), "park")
    assert seen.t >= before
    stored = memory.get(seen.id, user="ann")
    assert (stored.action, stored.objects, stored.location) == ("kick", ("ball",), "park")
    # the same fact again (by the same speaker: the agent is a scope) is not stored twice: the memory
    # is refreshed and moves to the context's end
    manager.observe(TEXTS[0], id="m2")
    again = manager.observe("I kicked the ball in the park", speaker="Ann")
    assert again.id == seen.id and memory.store.count("ann") == 2
    assert manager.context.ids() == ["m2", seen.id]
    # re-observing an id replaces its entry: one context entry per id
    manager.observe(TEXTS[1], id="m2")
    assert manager.context.ids().count("m2") == 1 and memory.get("m2", user="ann").content == TEXTS[1]
    view = manager.context_for(TEXTS[1])  # now defaults to the current time
    assert "m2" in view.ids()


def test_delete_reaches_live_managers_tiers_and_buffer(memory):
    manager = memory.manager("ann", context_budget=3, working_capacity=10, write_through_threshold=1.0, batch_size=100)
    for i in range(3):
        manager.observe(TEXTS[i], id=f"m{i}", importance=0.3)
    assert manager.context.ids() == ["m2"] and manager.working.ids() == ["m0", "m1"] and len(manager.pending) == 3
    other = memory.manager("bob", write_through_threshold=1.0, batch_size=100)
    other.observe(TEXTS[0], id="m0", importance=0.3)
    assert memory.delete("m0", user="ann") is True  # only in a buffer: the store never had it
    assert memory.delete("m2", user="ann") is True
    assert manager.working.ids() == ["m1"] and manager.context.ids() == [] and list(manager.pending) == ["m1"]
    assert manager.events.of(Move.FORGET)[0].ids == ("m0",)
    assert "m0" in other.pending  # another user's memory with the same id is untouched
    memory.close()
    assert [m.id for m in open_store(memory.store.directory, None).list_memories("ann")] == ["m1"]


def test_delete_through_the_store_while_buffered_then_close_and_reopen(encoder, tmp_path):
    # the bug of issue 12: delete through the archive while the manager buffers it; close wrote it back
    with memnets.open(tmp_path / "m", encoder=encoder) as memory:
        manager = memory.manager("ann", write_through_threshold=1.0, batch_size=100)
        manager.observe(TEXTS[0], id="m1", importance=0.3)
        manager.observe(TEXTS[1], id="m2", importance=0.3)
        assert memory.store.count("ann") == 0 and sorted(manager.pending) == ["m1", "m2"]
        assert manager.archive.delete(["m1"], "ann") == 0  # nothing stored yet, but the deletion is recorded
        manager.close()
    with memnets.open(tmp_path / "m", encoder=encoder) as memory:
        assert memory.get("m1", user="ann") is None and memory.get("m2", user="ann") is not None
        again = memory.manager("ann")
        assert "m1" not in again.context.ids() + again.working.ids()
        again.observe(TEXTS[2], id="m1", importance=0.9)  # a new memory under the deleted id is kept
        assert memory.get("m1", user="ann").content == TEXTS[2]


def _delete_in_another_process(folder: str, ids: list[str], owner: str) -> None:
    store = open_store(folder, None)
    store.delete(ids, owner)
    store.close()


def test_delete_from_another_process_while_a_manager_holds_the_memory(encoder, tmp_path):
    folder = tmp_path / "m"
    with memnets.open(folder, encoder=encoder, duplicate_threshold=None) as memory:
        manager = memory.manager(
            "ann", context_budget=3, working_capacity=10, write_through_threshold=0.5, batch_size=100
        )
        manager.observe(TEXTS[0], id="kept", importance=0.9)  # written through, then RETAINed to working memory
        manager.observe(TEXTS[1], id="buffered", importance=0.1)  # waits in the write buffer
        manager.observe(TEXTS[2], id="last", importance=0.9)
        assert "kept" in manager.working and "buffered" in manager.pending
        process = multiprocessing.get_context("spawn").Process(
            target=_delete_in_another_process, args=(str(folder), ["kept", "buffered"], "ann")
        )
        process.start()
        process.join(120)
        assert process.exitcode == 0
        view = manager.context_for(TEXTS[0])
        assert "kept" not in view.ids() and "kept" not in manager.working and "buffered" not in manager.pending
        manager.flush()
        assert memory.get("buffered", user="ann") is None
    with memnets.open(folder, encoder=encoder) as memory:
        assert [m.id for m in memory.list_memories(user="ann")] == ["last"]
        restored = memory.manager("ann")
        assert set(restored.context.ids() + restored.working.ids()) <= {"last"}


def test_close_closes_managers_and_is_idempotent(encoder, tmp_path):
    memory = memnets.open(tmp_path / "m", encoder=encoder)
    manager = memory.manager("ann", write_through_threshold=1.0)
    manager.observe(TEXTS[0], id="m1", importance=0.2)
    memory.close()
    memory.close()
    assert manager.closed
    with pytest.raises(RuntimeError, match="closed"):
        memory.add("text", user="ann")
    with memnets.open(tmp_path / "m", encoder=encoder) as again:
        assert again.get("m1", user="ann") is not None  # the buffer was flushed on close


def test_pack_and_encoder_are_exclusive(encoder, tmp_path):
    with pytest.raises(ValueError, match="pack or encoder"):
        memnets.open(tmp_path / "m", pack=tmp_path / "pack", encoder=encoder)


def test_vectors_are_unit_rows(memory):
    memory.add(TEXTS[0], user="ann", id="v")
    vector = memory.store.vectors(["v"], "ann")[0]
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_update_and_replaces_reach_live_managers(memory):
    manager = memory.manager("ann", context_budget=100)
    held = manager.observe(TEXTS[0], id="m1", importance=0.9)  # written through, in the context
    old = manager.observe(TEXTS[1], id="m2", importance=0.9)
    memory.update(held.id, TEXTS[2], user="ann")
    entry = next(e for e in manager.context.entries if e.id == "m1")
    assert entry.memory.content == TEXTS[2]
    np.testing.assert_allclose(entry.vector, memory.store.vectors(["m1"], "ann")[0], atol=1e-6)
    memory.add(TEXTS[3], user="ann", id="m3", replaces=old.id)
    assert "m2" not in manager.context.ids() and manager.events.of(Move.FORGET)[-1].detail["reason"] == "superseded"


@pytest.mark.parametrize("metadata", [{"$a": 1}, {"topic": "x", "$or": [1]}])
def test_a_metadata_field_that_starts_with_a_dollar_is_refused(encoder, tmp_path, metadata):
    """A filter reads a "$" key as an operator, so such a field could never be matched: refused at write."""
    with memnets.open(tmp_path / "memory", encoder=encoder) as memory:
        with pytest.raises(InvalidMemoryError, match="metadata field names may not start with '\\$'"):
            memory.add("Ann likes olives", user="ann", metadata=metadata)
        kept = memory.add("Ann likes olives", user="ann", metadata={"topic": "food"})
        with pytest.raises(InvalidMemoryError, match="'\\$a'"):
            memory.update(kept.id, user="ann", metadata={"$a": 1})
        assert [m.metadata for m in memory.list_memories(user="ann")] == [{"topic": "food"}]


def test_metadata_nested_past_the_json_depth_is_refused_at_every_write(encoder, tmp_path):
    """A metadata value nested deeper than MAX_JSON_DEPTH is refused before anything is written (it had
    been stored, and its user's reads through the server then failed); 63 levels below the top are kept."""
    from memnets.records import MAX_JSON_DEPTH

    def nested(levels: int):
        value: object = ["leaf"]
        for _ in range(levels - 1):
            value = {"a": value}
        return {"top": value}

    with memnets.open(tmp_path / "memory", encoder=encoder) as memory:
        with pytest.raises(ValueError, match=f"nested over {MAX_JSON_DEPTH} levels"):
            memory.add("Ann likes olives", user="ann", metadata=nested(MAX_JSON_DEPTH))
        kept = memory.add("Ann likes olives", user="ann", metadata=nested(MAX_JSON_DEPTH - 1))
        with pytest.raises(ValueError, match="metadata\\['top'\\]\\['a'\\]"):
            memory.update(kept.id, user="ann", metadata=nested(300))
        with pytest.raises(ValueError, match="nested over"):
            memory.search("olives", user="ann", filters={"metadata": {"top": {"$eq": nested(100)}}})
        assert [m.metadata for m in memory.list_memories(user="ann")] == [nested(MAX_JSON_DEPTH - 1)]
