"""The agent loop: observe, answer from managed memory, pursue goals with re-planning."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memnets.agent import Agent
from memnets.llm import EXTRACTIVE_PREFIX
from memnets.memory.events import Move
from memnets.memory.manager import MemoryManager
from memnets.memory.planning import Goal
from memnets.memory.signals import FixedGate
from memnets.store.archive import Archive

T0 = datetime(2023, 6, 1, 9, 0)


@pytest.fixture()
def agent(tiny_model_dir, tmp_path):
    from memnets.nn.encoder import MemoryEncoder

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    manager = MemoryManager(
        encoder,
        Archive(tmp_path / "archive", encoder.dim),
        owner="ann",
        context_budget=8,
        working_capacity=2,
        k=1,
        gate=FixedGate(True),
        owns_store=True,
    )
    yield Agent(manager, name="ann")
    manager.close()


def test_answer_recalls_a_buried_fact_into_view(agent):
    facts = ["rex is a beagle", "bob plays the violin", "lisbon in august", "shoes were chewed"]
    for i, fact in enumerate(facts):
        agent.observe(fact, t=T0 + timedelta(minutes=i))
    manager = agent.manager
    assert "rex is a beagle" not in [e.memory.content for e in manager.context.entries]
    answer = agent.answer("rex is a beagle", now=T0 + timedelta(hours=1))
    # the gate (always) searched the archive; the identical memory is the best match and is shown
    assert answer.view.recalled and manager.events.count(Move.SEARCH) == 1
    assert [m.content for m in answer.view.memories] == ["rex is a beagle"]
    # the extractive LLM quotes lines of the view (memories and messages) and says what it is
    assert answer.text.startswith(EXTRACTIVE_PREFIX) and "rex is a beagle" in answer.text


def test_chat_observes_both_sides(agent):
    agent.chat("hello there", speaker="bob", now=T0)
    observed = [e.ids[0] for e in agent.manager.events.of(Move.OBSERVE)]
    assert len(observed) == 2
    contents = [e.memory.content for e in agent.manager.context.entries] + [
        e.memory.content for e in agent.manager.working.entries.values()
    ]
    assert "bob: hello there" in contents and any(c.startswith("ann: ") for c in contents)


def test_pursue_replans_after_a_failed_step_and_finishes(agent):
    calls = []

    def execute(step):
        calls.append(step)
        return "shop closed" if len(calls) == 1 else True

    goal = agent.pursue(Goal("buy violin strings"), execute, now=T0)
    assert goal.status == "done"
    assert goal.failures == [f"step '{calls[0]}' failed: shop closed"]
    moves = [e.move for e in agent.manager.events if e.move in (Move.PLAN, Move.REPLAN)]
    assert moves == [Move.PLAN, Move.REPLAN]
    assert agent.manager.events.of(Move.REPLAN)[0].detail["failures"] == goal.failures


def test_pursue_gives_up_after_the_allowed_replans(agent):
    goal = agent.pursue(Goal("fly to the moon"), lambda step: False, now=T0, max_replans=2)
    assert goal.status == "failed"
    assert agent.manager.events.count(Move.REPLAN) == 2
    assert len(goal.failures) == 3  # two that caused re-plans, and the last one
    with pytest.raises(ValueError, match="max_replans"):
        agent.pursue(Goal("x"), lambda step: True, now=T0, max_replans=-1)
