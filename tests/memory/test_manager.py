"""MemoryManager: the four moves, the overflow policies, writes, gate-driven recall, reflection,
compression, planning and persistence, on small hand-checked fixtures with the tiny encoder."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memnets.llm import EXTRACTIVE_PREFIX
from memnets.memory.events import EventLog, Move
from memnets.memory.manager import MemoryManager, default_state_path
from memnets.memory.planning import Goal
from memnets.memory.signals import FixedGate, HeuristicGate
from memnets.store.archive import Archive

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
# each of these is exactly three word-piece tokens for the MiniLM tokenizer (checked below)
TEXTS = ["red green blue", "one two three", "cat dog bird", "north south east", "sun moon star", "left right up"]


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir)


@pytest.fixture()
def make(encoder, tmp_path):
    """Build managers on one archive folder; closes what it opened."""
    opened = []

    def build(**kwargs):
        archive = Archive(tmp_path / "archive", encoder.dim)
        kwargs.setdefault("gate", FixedGate(False))
        manager = MemoryManager(encoder, archive, owner="ann", owns_store=True, **kwargs)
        opened.append(manager)
        return manager

    yield build
    for manager in opened:
        if manager.archive._conn is not None:
            manager.archive.close()


def observe_all(manager, importances, start=0):
    """Observe TEXTS[start:] with the given importances as m<start+1>, m<start+2>, ... one minute apart."""
    return [
        manager.observe(TEXTS[i], t=at(i), id=f"m{i + 1}", importance=imp)
        for i, imp in enumerate(importances, start=start)
    ]


def test_fixture_texts_are_three_tokens(make):
    manager = make()
    assert [manager._tokens(text) for text in TEXTS] == [3] * len(TEXTS)


def test_context_overflow_retains_the_least_recent_messages(make):
    manager = make(context_budget=7, working_capacity=10)
    observe_all(manager, [0.9, 0.9, 0.9, 0.9])
    assert manager.context.ids() == ["m3", "m4"]
    assert manager.context.tokens == 6
    assert manager.working.ids() == ["m1", "m2"]
    assert [event.ids for event in manager.events.of(Move.RETAIN)] == [("m1",), ("m2",)]


def test_newest_message_stays_even_when_alone_over_budget(make):
    manager = make(context_budget=2, working_capacity=10)
    observe_all(manager, [0.9, 0.9])
    assert manager.context.ids() == ["m2"] and manager.working.ids() == ["m1"]


@pytest.mark.parametrize(
    ("policy", "buried", "left"),
    [("least_important", "m2", ["m1", "m3"]), ("least_recent", "m1", ["m2", "m3"])],
)
def test_working_overflow_policies(make, policy, buried, left):
    # budget 3: one message in context; capacity 2. Importances m1..m4 = 0.9, 0.2, 0.6, 0.8.
    manager = make(context_budget=3, working_capacity=2, working_policy=policy, batch_size=100)
    observe_all(manager, [0.9, 0.2, 0.6, 0.8])
    assert manager.context.ids() == ["m4"]
    assert manager.working.ids() == left
    assert [event.ids for event in manager.events.of(Move.BURY)] == [(buried,)]
    # the buried memory is in the archive even if it was only buffered (m2 is below write-through)
    assert [m.id for m in manager.archive.get([buried], "ann")] == [buried]


def test_write_through_and_batched_writes(make):
    manager = make(write_through_threshold=0.5, batch_size=3, context_budget=100)
    observe_all(manager, [0.9])
    assert manager.archive.count("ann") == 1  # written through at once
    observe_all(manager, [0.1, 0.2], start=1)
    assert manager.archive.count("ann") == 1  # buffered below the batch size
    assert sorted(manager.pending) == ["m2", "m3"]
    observe_all(manager, [0.3], start=3)
    assert manager.archive.count("ann") == 4 and not manager.pending
    through, batch = manager.events.of(Move.WRITE)
    assert through.detail["mode"] == "through" and through.ids == ("m1",)
    assert batch.detail["mode"] == "batch" and batch.ids == ("m2", "m3", "m4")


def test_observations_below_the_keep_threshold_are_dropped(make):
    manager = make(keep_threshold=0.5, context_budget=3, working_capacity=10)
    observe_all(manager, [0.1, 0.9])
    assert manager.context.ids() == ["m2"]
    assert manager.working.ids() == []  # m1 was not kept
    assert manager.archive.count("ann") == 1
    assert manager.events.of(Move.DROP)[0].ids == ("m1",)
    assert not manager.events.of(Move.RETAIN)


def test_emit_persists_a_copy_and_keeps_it_in_working_memory(make):
    manager = make(context_budget=3, working_capacity=10, batch_size=100)
    observe_all(manager, [0.1, 0.1])
    assert manager.archive.count("ann") == 0 and manager.working.ids() == ["m1"]
    manager.emit(["m1"], at(5))
    assert manager.archive.count("ann") == 1 and manager.working.ids() == ["m1"]
    assert manager.events.of(Move.EMIT)[0].ids == ("m1",)
    with pytest.raises(KeyError, match="not in working memory"):
        manager.emit(["m2"])


def test_recall_brings_archived_memories_back_into_working_memory(make):
    manager = make(context_budget=3, working_capacity=10, k=1, fetch_factor=2)
    observe_all(manager, [0.9, 0.9, 0.9])
    manager.bury(["m1", "m2"], at(5))
    assert manager.working.ids() == []
    recalled = manager.recall(TEXTS[0], now=at(60))
    assert [m.id for m in recalled] == ["m1"]  # the same text has cosine 1
    assert manager.working.ids() == ["m1"]
    assert manager.working.get("m1").memory.last_access == at(60)
    assert manager.archive.get(["m1"], "ann")[0].last_access == at(60)
    assert manager.events.of(Move.RECALL)[0].ids == ("m1",)
    # what is already at hand is never recalled twice
    assert [m.id for m in manager.recall(TEXTS[0], now=at(61))] == ["m2"]


def test_recall_never_buries_what_it_just_brought(make):
    manager = make(context_budget=3, working_capacity=1, k=1)
    observe_all(manager, [0.9, 0.2, 0.9])  # m3 in context; m2 (0.2) buried when m2 joined m1
    assert manager.working.ids() == ["m1"]
    # recalling m2 overflows working memory: the policy would bury m2 (least important) but it is protected
    manager.recall(TEXTS[1], now=at(9))
    assert manager.working.ids() == ["m2"]
    assert [event.ids for event in manager.events.of(Move.BURY)] == [("m2",), ("m1",)]


def test_the_view_is_picked_before_a_recall_overflow_buries_what_the_query_needs(make):
    # working [m2, m3] (m1 buried as least recent), context [m4]; the query is m2's own text
    manager = make(context_budget=3, working_capacity=2, k=1, fetch_factor=4, working_policy="least_recent")
    manager.gate = FixedGate(True)
    observe_all(manager, [0.9, 0.9, 0.9, 0.9])
    assert manager.working.ids() == ["m2", "m3"] and manager.context.ids() == ["m4"]
    # the search brings m1, overflowing working memory; its policy would bury m2 (least recent), the
    # best match, before the view was picked: now the view is picked first and what it shows stays
    view = manager.context_for(TEXTS[1], now=at(10))
    assert [m.id for m in view.memories] == ["m2"]
    assert sorted(manager.working.ids()) == ["m1", "m2"] and manager.events.of(Move.BURY)[-1].ids == ("m3",)


def test_gate_decides_whether_the_archive_is_searched(make):
    # the heuristic gate recalls when no context message reaches cosine `threshold` with the query
    manager = make(context_budget=3, working_capacity=1, k=1, gate=HeuristicGate(threshold=0.999))
    observe_all(manager, [0.9, 0.9, 0.9])  # context [m3], working [m2]; m1 buried (tie: least recent)
    assert manager.context.ids() == ["m3"] and manager.working.ids() == ["m2"]
    view = manager.context_for(TEXTS[2], now=at(10))  # the query is the context message itself
    assert not view.recalled and view.gate_score == pytest.approx(0.0, abs=1e-5)
    assert manager.events.count(Move.SEARCH) == 0
    view = manager.context_for(TEXTS[0], now=at(11))  # only the archive holds it
    assert view.recalled and manager.events.count(Move.SEARCH) == 1
    assert "m1" in view.ids() and [m.id for m in view.messages] == ["m3"]
    # what was shown is stamped as accessed, after it was ranked, in working memory and the archive
    assert manager.working.get("m1").memory.last_access == at(11)
    assert manager.archive.get(["m1"], "ann")[0].last_access == at(11)
    assert view.render() == "Relevant memories:\n- red green blue\n\nConversation:\n- cat dog bird"
    never = make(context_budget=3, gate=FixedGate(False))
    never.context_for(TEXTS[0], now=at(12))
    assert never.events.count(Move.SEARCH) == 0


def test_reflection_triggers_on_accumulated_importance_and_links_its_evidence(make):
    manager = make(reflection_threshold=1.5, context_budget=100)
    observe_all(manager, [0.5, 0.5])
    assert not manager.events.of(Move.REFLECT) and manager.reflector.accumulated == pytest.approx(1.0)
    observe_all(manager, [0.6], start=2)  # 1.6 >= 1.5
    reflections = manager.events.of(Move.REFLECT)
    assert len(reflections) == 1
    reflection = manager.archive.get(list(reflections[0].ids), "ann")[0]
    assert reflection.kind == "reflection"
    assert reflection.links == ("m1", "m2", "m3") and reflections[0].detail["evidence"] == ["m1", "m2", "m3"]
    assert reflection.content.startswith(EXTRACTIVE_PREFIX)
    assert reflection.importance == pytest.approx(0.6)
    assert reflection.id in manager.working
    observe_all(manager, [0.5], start=3)
    assert manager.reflector.accumulated == pytest.approx(0.5)  # counting restarted after the reflection


def test_compression_summarises_the_important_memories_of_a_window(make):
    manager = make(context_budget=3, working_capacity=10)
    observe_all(manager, [0.9, 0.2, 0.7, 0.8, 0.9])  # working m1..m4, context m5
    summary = manager.compress(now=at(30), start=at(0), end=at(3), min_importance=0.5)
    assert summary.kind == "summary" and summary.links == ("m1", "m3")
    assert summary.content.startswith(EXTRACTIVE_PREFIX)
    assert sorted(manager.working.ids()) == sorted(["m2", "m4", summary.id])
    assert manager.events.of(Move.COMPRESS)[0].detail["sources"] == ["m1", "m3"]
    with pytest.raises(ValueError, match="nothing to summarise"):
        manager.compress(now=at(31), min_importance=0.95)


def test_plans_and_replanning_after_a_failure(make):
    manager = make(context_budget=100)
    observe_all(manager, [0.9, 0.9])
    goal = Goal("buy a violin")
    plan = manager.plan(goal, now=at(5))
    assert plan.steps and plan.revision == 0 and plan.memory.kind == "plan"
    again = manager.replan(plan, plan.steps[0], "shop closed", now=at(6))
    assert again.revision == 1 and goal.failures == [f"step '{plan.steps[0]}' failed: shop closed"]
    assert [e.move for e in manager.events if e.move in (Move.PLAN, Move.REPLAN)] == [Move.PLAN, Move.REPLAN]
    assert manager.archive.get([again.memory.id], "ann")[0].kind == "plan"


def test_tiers_survive_a_restart(make, tmp_path):
    manager = make(context_budget=7, working_capacity=2, batch_size=100, reflection_threshold=100.0)
    observe_all(manager, [0.9, 0.2, 0.6, 0.8, 0.3])  # below write-through ones only buffered
    context, working = manager.context.ids(), manager.working.ids()
    assert context == ["m4", "m5"] and working == ["m1", "m3"]
    manager.close()
    assert manager.archive._conn is None
    state = json.loads(default_state_path(tmp_path / "archive", "ann").read_text())
    assert state["context"] == context and state["working"] == working

    again = make(context_budget=7, working_capacity=2, reflection_threshold=100.0)
    assert again.context.ids() == context and again.working.ids() == working
    assert again.archive.count("ann") == 5  # the buffer was flushed on close
    assert again.reflector.accumulated == pytest.approx(2.8)
    assert [m.id for m in again.recall(TEXTS[1], now=at(20), k=1)] == ["m2"]
    np.testing.assert_allclose(again.working.get("m1").vector, manager.working.get("m1").vector, atol=1e-6)


def test_state_of_another_owner_is_refused(make, encoder, tmp_path):
    manager = make()
    observe_all(manager, [0.9])
    manager.close()
    path = default_state_path(tmp_path / "archive", "ann")
    assert path.is_file()
    with Archive(tmp_path / "archive", encoder.dim) as archive, pytest.raises(ValueError, match="owner"):
        MemoryManager(encoder, archive, owner="bob", state_path=path)


def test_events_are_written_to_jsonl(make, tmp_path):
    path = tmp_path / "events.jsonl"
    manager = make(events=path, context_budget=3)
    observe_all(manager, [0.9, 0.9])
    stored = EventLog.read(path)
    assert [e.move for e in stored] == [e.move for e in manager.events]
    assert stored[0].move == Move.OBSERVE and stored[0].t == at(0) and stored[0].ids == ("m1",)


def test_bad_settings_are_named(make):
    with pytest.raises(ValueError, match="write_through_threshold"):
        make(write_through_threshold=1.5)
    with pytest.raises(ValueError, match="context_budget"):
        make(context_budget=0)
    with pytest.raises(ValueError, match="overflow policy"):
        make(working_policy="random")
    with pytest.raises(ValueError, match="content"):
        make().observe("  ", t=T0)
    with pytest.raises(ValueError, match="k must"):
        make().context_for("a question", k=0)
    with pytest.raises(ValueError, match="query"):
        make().context_for("")


def test_open_builds_encoder_and_archive_from_paths(tiny_model_dir, tmp_path):
    with MemoryManager.open(tmp_path / "store", encoder=tiny_model_dir, owner="ann", context_budget=3) as manager:
        observe_all(manager, [0.9, 0.9])
        assert manager.owns_store and manager.encoder.dim == manager.archive.dim
    with MemoryManager.open(tmp_path / "store", encoder=str(tiny_model_dir), owner="ann", context_budget=3) as again:
        assert again.context.ids() == ["m2"] and again.working.ids() == ["m1"]


def test_deletions_in_the_store_reach_what_the_manager_holds(make):
    # a manager on the store directly (no AgentMemory): every kind of deletion is seen through the ledger
    manager = make(context_budget=3, working_capacity=10, write_through_threshold=0.5, batch_size=100)
    observe_all(manager, [0.9, 0.2, 0.2, 0.9])  # m1, m4 written; m2, m3 buffered; context [m4]
    assert sorted(manager.pending) == ["m2", "m3"] and manager.working.ids() == ["m1", "m2", "m3"]
    assert manager.archive.purge_older_than(at(2), owner="ann") == 1  # m1 stored; m2 (t = 1 min) only buffered
    manager.flush()
    assert manager.working.ids() == ["m3"] and manager.archive.get(["m2"], "ann") == []
    assert [e.ids for e in manager.events.of(Move.FORGET)] == [("m1", "m2")]
    manager.archive.delete_owner("ann")
    view = manager.context_for(TEXTS[0], now=at(10))
    assert view.ids() == [] and not manager.pending and manager.working.ids() == []
    assert manager.archive.count("ann") == 0
    manager.close()
    assert manager.state()["context"] == [] and manager.state()["working"] == []


def test_manager_config_is_one_dataclass(make):
    from memnets.memory.manager import ManagerConfig

    config = ManagerConfig(k=2, context_budget=64)
    manager = make(config=config, working_capacity=7)  # a field given beside config changes just that one
    assert manager.config == ManagerConfig(k=2, context_budget=64, working_capacity=7)
    assert manager.context.budget == 64 and manager.working.capacity == 7
    with pytest.raises(TypeError, match="colour"):
        make(colour="red")
    with pytest.raises(ValueError, match="duplicate_threshold"):
        ManagerConfig(duplicate_threshold=2.0)
