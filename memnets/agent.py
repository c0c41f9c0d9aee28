"""An agent loop around a pluggable LLM, with its memory run by a :class:`MemoryManager`.

The agent observes what it hears and does (each observation goes through the manager's loop),
answers from what the manager puts in view (gate, recall, best working memories, recent context),
and pursues goals step by step, re-planning when a step fails. It adds no memory logic of its own:
all of that is the manager's; the LLM only writes text (:mod:`memnets.llm`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from memnets.llm import LLM
from memnets.memory.manager import ContextView, MemoryManager
from memnets.memory.planning import Goal, Plan
from memnets.records import Memory

DEFAULT_SYSTEM = (
    "You are a helpful assistant with a long-term memory. Answer from the memories and the "
    "conversation you are shown; say so when they do not contain the answer."
)

# A step's outcome: True / None for success, False or a string (the reason) for failure.
StepOutcome = bool | str | None


@dataclass(frozen=True)
class Answer:
    """The LLM's text and the view of memory it was written from."""

    text: str
    view: ContextView


class Agent:
    """Observe, answer and pursue goals, with memory managed by ``manager`` and text from ``llm``."""

    def __init__(
        self,
        manager: MemoryManager,
        llm: LLM | None = None,
        *,
        name: str = "agent",
        system: str = DEFAULT_SYSTEM,
        max_new_tokens: int = 128,
    ):
        self.manager = manager
        self.llm = llm if llm is not None else manager.llm
        self.name = name
        self.system = system
        self.max_new_tokens = max_new_tokens

    def observe(self, content: str, *, t: datetime, speaker: str | None = None, id: str | None = None) -> Memory:
        """Something the agent perceives (a message, an event) enters its memory."""
        text = f"{speaker}: {content}" if speaker else content
        return self.manager.observe(text, t=t, id=id, speaker=speaker)

    def answer(self, question: str, *, now: datetime) -> Answer:
        """Answer ``question`` from the view of memory the manager builds for it (may RECALL)."""
        view = self.manager.context_for(question, now=now)
        prompt = f"{view.render()}\n\nQuestion: {question}\nAnswer:"
        return Answer(self.llm.complete(prompt, system=self.system, max_new_tokens=self.max_new_tokens), view)

    def chat(self, message: str, *, speaker: str, now: datetime) -> Answer:
        """One exchange: the message is observed, answered, and the reply observed as the agent's own."""
        self.observe(message, t=now, speaker=speaker)
        reply = self.answer(message, now=now)
        self.observe(reply.text, t=now, speaker=self.name)
        return reply

    def pursue(
        self,
        goal: Goal,
        execute: Callable[[str], StepOutcome],
        *,
        now: datetime,
        max_replans: int = 2,
    ) -> Goal:
        """Work through a plan for ``goal``; a failed step triggers a re-plan, up to ``max_replans``.

        ``execute(step)`` performs one step and returns True/None on success, False or a reason
        string on failure. Every outcome is observed. The goal ends "done" or "failed".
        """
        if max_replans < 0:
            raise ValueError(f"max_replans must be non-negative, got {max_replans}")
        plan: Plan = self.manager.plan(goal, now=now)
        replans = 0
        while True:
            failure = None
            for step in plan.steps:
                outcome = execute(step)
                ok = outcome is None or outcome is True
                reason = "" if ok else (outcome if isinstance(outcome, str) else "it did not work")
                self.observe(f"{self.name} tried '{step}': " + ("done" if ok else f"failed ({reason})"), t=now)
                if not ok:
                    failure = (step, reason)
                    break
            if failure is None:
                goal.status = "done"
                return goal
            if replans == max_replans:
                goal.status = "failed"
                goal.failures.append(f"step '{failure[0]}' failed: {failure[1]}")
                return goal
            plan = self.manager.replan(plan, failure[0], failure[1], now=now)
            replans += 1
