"""The memory record: the one unit every tier, store and scorer speaks about."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

MEMORY_KINDS = ("observation", "reflection", "plan", "summary", "message")


@dataclass
class Memory:
    """One memory of an agent (Generative Agents' m = (t, content, importance)).

    Attributes:
        id: unique id within the archive (for LoCoMo turns, "<sample_id>/<dia_id>").
        owner: the agent or user the memory belongs to; every read path is scoped to it.
        t: when the memory was created (for LoCoMo, its session's date).
        content: the text that is embedded and shown to the LLM.
        importance: long-term value in [0, 1] (heuristic, or the trained scorer's probability).
        kind: one of MEMORY_KINDS.
        last_access: when it was last retrieved; recency decays from here (defaults to t).
        links: ids of the memories this one was derived from (a reflection's evidence).
        agent, action, objects, location: the seed's structured view of an observation, optional.
    """

    id: str
    owner: str
    t: datetime
    content: str
    importance: float = 0.0
    kind: str = "observation"
    last_access: datetime | None = None
    links: tuple[str, ...] = ()
    agent: str | None = None
    action: str | None = None
    objects: tuple[str, ...] = ()
    location: str | None = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Memory.id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.owner, str) or not self.owner:
            raise ValueError(f"Memory {self.id!r}: owner must be a non-empty string, got {self.owner!r}")
        if not isinstance(self.t, datetime):
            raise TypeError(f"Memory {self.id!r}: t must be a datetime, got {type(self.t).__name__}")
        if self.kind not in MEMORY_KINDS:
            raise ValueError(f"Memory {self.id!r}: kind must be one of {MEMORY_KINDS}, got {self.kind!r}")
        if not 0.0 <= float(self.importance) <= 1.0:
            raise ValueError(f"Memory {self.id!r}: importance must lie in [0, 1], got {self.importance!r}")
        self.links = tuple(self.links)
        self.objects = tuple(self.objects)
        if self.last_access is None:
            self.last_access = self.t

    def replace(self, **changes) -> "Memory":
        """A copy with some fields changed (records are passed between tiers by value)."""
        return dataclasses.replace(self, **changes)
