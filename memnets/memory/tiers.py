"""The two in-process tiers of the memory hierarchy and their overflow policies.

- :class:`ContextWindow`: the messages the LLM sees, bounded by a token budget counted with the
  encoder's tokenizer (MemGPT's main context / registers).
- :class:`WorkingMemory`: memories at hand, bounded by a capacity in memory units (RAM).
- :class:`ContextView`: what the LLM is shown for a query, the context's messages and the memories
  the manager brought to it.

The third tier, the archive (disk), is :class:`memnets.store.archive.Archive`. The tiers only hold
entries and say what overflows; the moves between them, and their event log, belong to
:class:`memnets.memory.manager.MemoryManager`.

An overflow policy maps an entry to a sort key; the entries with the *smallest* keys leave first.
The seed's policies: the context spills its least recent messages, working memory buries its least
important memories (ties: least recently accessed first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from memnets.records import Memory


@dataclass(frozen=True)
class ContextView:
    """What the LLM is shown for a query: the context's messages and the memories brought to it."""

    messages: tuple[Memory, ...]
    memories: tuple[Memory, ...]
    recalled: bool
    gate_score: float

    def ids(self) -> list[str]:
        """Ids of everything in view (messages first, then memories)."""
        return [m.id for m in self.messages] + [m.id for m in self.memories]

    def render(self) -> str:
        """The prompt text: the memories, then the conversation, each line a bullet (see memnets.llm)."""
        parts = []
        if self.memories:
            parts.append("Relevant memories:\n" + "\n".join(f"- {m.content}" for m in self.memories))
        if self.messages:
            parts.append("Conversation:\n" + "\n".join(f"- {m.content}" for m in self.messages))
        return "\n\n".join(parts)


@dataclass(eq=False)
class Entry:
    """A memory held in a tier, with its vector (unit length) and its length in tokens."""

    memory: Memory
    vector: np.ndarray
    tokens: int

    @property
    def id(self) -> str:
        return self.memory.id


def refreshed(entries: Iterable[Entry], current: Iterable[Memory]) -> None:
    """Give ``entries`` their memories as ``current`` (the store's rows now) has them, each keeping its latest access:
    a memory held since before a change ended or linked it knew nothing of it."""
    held = {entry.id: entry for entry in entries}
    for memory in current:
        if memory.id in held:
            held[memory.id].memory = memory.replace(
                last_access=max(memory.last_access, held[memory.id].memory.last_access)
            )


Policy = Callable[[Entry], tuple]


def least_recent(entry: Entry) -> tuple:
    """Oldest last access first (then oldest creation)."""
    return (entry.memory.last_access, entry.memory.t)


def least_important(entry: Entry) -> tuple:
    """Lowest importance first; among equals, least recently accessed first."""
    return (entry.memory.importance, entry.memory.last_access, entry.memory.t)


POLICIES: dict[str, Policy] = {"least_recent": least_recent, "least_important": least_important}


def policy(name: str | Policy) -> Policy:
    """A policy by name (``"least_recent"``, ``"least_important"``) or the callable itself."""
    if callable(name):
        return name
    if name not in POLICIES:
        raise ValueError(f"unknown overflow policy {name!r}; choose one of {sorted(POLICIES)}")
    return POLICIES[name]


class ContextWindow:
    """Messages in arrival order under a token budget.

    ``overflow()`` names the entries that must leave, in arrival order (oldest first), until the
    rest fits the budget. The newest message always stays, even when it alone exceeds the budget,
    so the LLM never sees an empty context.
    """

    def __init__(self, budget: int):
        if budget < 1:
            raise ValueError(f"context budget must be a positive number of tokens, got {budget}")
        self.budget = int(budget)
        self.entries: list[Entry] = []

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)

    @property
    def tokens(self) -> int:
        return sum(entry.tokens for entry in self.entries)

    def overflow(self) -> list[Entry]:
        """The oldest entries to remove so that the rest fits (not removed yet)."""
        excess = self.tokens - self.budget
        leaving: list[Entry] = []
        for entry in self.entries[:-1]:
            if excess <= 0:
                break
            leaving.append(entry)
            excess -= entry.tokens
        return leaving

    def remove(self, ids: Iterable[str]) -> None:
        ids = set(ids)
        self.entries = [entry for entry in self.entries if entry.id not in ids]

    def ids(self) -> list[str]:
        return [entry.id for entry in self.entries]

    def __contains__(self, memory_id: str) -> bool:
        return any(entry.id == memory_id for entry in self.entries)

    def __len__(self) -> int:
        return len(self.entries)


class WorkingMemory:
    """Up to ``capacity`` memories, keyed by id; ``overflow`` names the ones the policy evicts."""

    def __init__(self, capacity: int, overflow_policy: str | Policy = "least_important"):
        if capacity < 1:
            raise ValueError(f"working-memory capacity must be a positive number of memories, got {capacity}")
        self.capacity = int(capacity)
        self.policy = policy(overflow_policy)
        self.entries: dict[str, Entry] = {}

    def add(self, entry: Entry) -> None:
        self.entries[entry.id] = entry

    def overflow(self, protected: Iterable[str] = ()) -> list[Entry]:
        """Entries to evict (policy order) until at most ``capacity`` remain; ``protected`` ids stay."""
        excess = len(self.entries) - self.capacity
        if excess <= 0:
            return []
        protected = set(protected)
        candidates = sorted((e for e in self.entries.values() if e.id not in protected), key=self.policy)
        return candidates[:excess]

    def remove(self, ids: Iterable[str]) -> list[Entry]:
        return [self.entries.pop(i) for i in ids if i in self.entries]

    def get(self, memory_id: str) -> Entry | None:
        return self.entries.get(memory_id)

    def ids(self) -> list[str]:
        return list(self.entries)

    def __contains__(self, memory_id: str) -> bool:
        return memory_id in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def vectors(self) -> np.ndarray:
        return np.stack([entry.vector for entry in self.entries.values()]) if self.entries else np.empty((0, 0))
