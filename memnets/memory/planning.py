"""Goals and plans (Generative Agents' planning), with re-planning when a step fails.

A :class:`Planner` asks the LLM for numbered steps towards a goal given the memories relevant to
it; when a step fails, :meth:`Planner.plan` is called again with the failure, and the new plan is
told what went wrong. Plans are stored as memories of kind ``"plan"`` linking to the memories they
were made from.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from memnets.llm import EXTRACTIVE_PREFIX, LLM
from memnets.memory.reflection import memory_lines
from memnets.records import Memory

_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*])\s*")


@dataclass
class Goal:
    """Something the agent wants done; ``status`` is "open", "done" or "failed"."""

    description: str
    status: str = "open"
    failures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.description.strip():
            raise ValueError("a goal needs a non-empty description")


@dataclass
class Plan:
    """Steps towards a goal, the memory that stores it, and how many times it was remade."""

    goal: Goal
    steps: list[str]
    memory: Memory
    revision: int = 0


def parse_steps(text: str, max_steps: int) -> list[str]:
    """Steps from an LLM answer: numbered or bulleted lines, else sentences; at most ``max_steps``."""
    text = text.strip()
    if text.startswith(EXTRACTIVE_PREFIX):
        text = text[len(EXTRACTIVE_PREFIX) :].strip()
    lines = [_NUMBERED.sub("", line).strip() for line in text.splitlines()]
    steps = [line for line in lines if line]
    if len(steps) <= 1:
        steps = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
    return steps[:max_steps]


class Planner:
    """Writes plans through an LLM; ``max_steps`` caps their length."""

    def __init__(self, llm: LLM, *, max_steps: int = 5, max_new_tokens: int = 160):
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.llm = llm
        self.max_steps = max_steps
        self.max_new_tokens = max_new_tokens

    def plan(
        self,
        goal: Goal,
        memories: list[Memory],
        *,
        owner: str,
        now: datetime,
        previous: Plan | None = None,
    ) -> Plan:
        """A (new) plan for ``goal``; with ``previous``, one that accounts for its recorded failures."""
        prompt = f"Goal: {goal.description}\nWrite numbered steps to reach the goal, using what you know:\n"
        material = [f"- {goal.description}"] + ([memory_lines(memories)] if memories else [])
        if previous is not None and goal.failures:
            prompt += "The previous plan failed: " + "; ".join(goal.failures) + ". Avoid what failed.\n"
        steps = parse_steps(
            self.llm.complete(prompt + "\n".join(material), max_new_tokens=self.max_new_tokens), self.max_steps
        )
        if not steps:
            steps = [goal.description]
        revision = previous.revision + 1 if previous is not None else 0
        memory = Memory(
            id=f"{owner}/plan-{uuid.uuid4().hex[:12]}",
            owner=owner,
            t=now,
            content=f"Plan for '{goal.description}' (revision {revision}): " + " | ".join(steps),
            importance=1.0,
            kind="plan",
            links=tuple(m.id for m in memories),
            metadata={"llm": self.llm.name, "goal": goal.description, "revision": revision},
        )
        return Plan(goal=goal, steps=steps, memory=memory, revision=revision)
