"""Reflection (Generative Agents): once enough importance has accumulated, summarise into insight.

Each kept observation adds its importance to a running sum; when the sum since the last reflection
reaches ``threshold``, the most important of the memories seen since then become the evidence of a
new memory of kind ``"reflection"`` whose content the LLM writes and whose ``links`` are the
evidence ids. Park et al. reflect at 150 on a 1-10 scale (about 15 observations of importance 10,
or ~50 of middling ones); on our [0, 1] scale the same rule is ``threshold=15``.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from memnets.llm import LLM
from memnets.records import Memory

REFLECTION_PROMPT = "What high-level insights can you infer from the statements below?"


def memory_lines(memories: list[Memory]) -> str:
    """The bullet list prompts use for their material (see :mod:`memnets.llm`)."""
    return "\n".join(f"- {memory.content}" for memory in memories)


def derived_memory(owner: str, kind: str, content: str, evidence: list[Memory], now, metadata: dict) -> Memory:
    """A memory written from others (a reflection, a summary): as important as the most important
    of its evidence, and linked to all of it."""
    return Memory(
        id=f"{owner}/{kind}-{uuid.uuid4().hex[:12]}",
        owner=owner,
        t=now,
        content=content,
        importance=max(m.importance for m in evidence),
        kind=kind,
        links=tuple(m.id for m in evidence),
        metadata=metadata,
    )


class Reflector:
    """Tracks accumulated importance and writes reflections through an :class:`~memnets.llm.LLM`."""

    def __init__(self, llm: LLM, *, threshold: float = 15.0, max_evidence: int = 20, max_new_tokens: int = 128):
        if threshold <= 0:
            raise ValueError(f"reflection threshold must be positive, got {threshold}")
        if max_evidence < 1:
            raise ValueError(f"max_evidence must be at least 1, got {max_evidence}")
        self.llm = llm
        self.threshold = float(threshold)
        self.max_evidence = max_evidence
        self.max_new_tokens = max_new_tokens
        self.accumulated = 0.0
        self.pending: list[Memory] = []

    def add(self, memory: Memory) -> bool:
        """Count a kept memory; True when a reflection is due."""
        self.accumulated += float(memory.importance)
        self.pending.append(memory)
        return self.accumulated >= self.threshold

    def reflect(self, owner: str, now: datetime) -> Memory:
        """The reflection over the most important pending memories (kept in time order); resets the sum."""
        if not self.pending:
            raise ValueError("reflect: no memories have been seen since the last reflection")
        ranked = sorted(self.pending, key=lambda m: -m.importance)[: self.max_evidence]
        evidence = sorted(ranked, key=lambda m: m.t)
        content = self.llm.complete(
            f"{REFLECTION_PROMPT}\n{memory_lines(evidence)}", max_new_tokens=self.max_new_tokens
        )
        reflection = derived_memory(
            owner,
            "reflection",
            content,
            evidence,
            now,
            {"llm": self.llm.name, "accumulated_importance": self.accumulated},
        )
        self.accumulated = 0.0
        self.pending = []
        return reflection

    def state(self) -> dict:
        """What must survive a restart (the pending memories are referred to by id)."""
        return {"accumulated": self.accumulated, "pending": [m.id for m in self.pending]}
