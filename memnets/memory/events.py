"""The event log of the memory manager: one typed record per move or decision.

Every change between tiers (the four moves RECALL, EMIT, RETAIN, BURY) and every decision around
them (an observation kept or dropped, a write to the archive, the recall gate's verdict, an archive
search, a reflection, a compression, a plan) is appended here, so that a run can be audited and
replayed. The log lives in memory and, when given a path, is also appended to a JSONL file as it
grows (one JSON object per line, flushed per event).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path


class Move(str, Enum):  # noqa: UP042 (str() of a member stays "Move.X", as the event logs were written)
    """What happened. The first four are the tier moves of MemGPT; the rest are decisions and writes."""

    RECALL = "RECALL"  # archive -> working, by query
    EMIT = "EMIT"  # working -> archive, persist a copy (stays in working)
    RETAIN = "RETAIN"  # context -> working (context overflow)
    BURY = "BURY"  # working -> archive, moved out (working-memory overflow)
    OBSERVE = "OBSERVE"  # a new message entered the context
    DROP = "DROP"  # an observation below the keep threshold left the context without being kept
    WRITE = "WRITE"  # records written to the archive (detail["mode"]: "through" or "batch")
    GATE = "GATE"  # the recall gate's verdict on a query
    SEARCH = "SEARCH"  # one archive search
    REFLECT = "REFLECT"  # a reflection was stored (ids: the reflection; detail["evidence"])
    COMPRESS = "COMPRESS"  # a summary replaced / condensed memories
    PLAN = "PLAN"  # a plan was made for a goal
    REPLAN = "REPLAN"  # a goal's step failed and the plan was remade
    FORGET = "FORGET"  # memories deleted (here or in the store) left every tier and the write buffer


@dataclass(frozen=True)
class Event:
    """One entry: its sequence number, kind, the memory ids it moved, the agent time, and details."""

    step: int
    move: Move
    ids: tuple[str, ...] = ()
    t: datetime | None = None
    detail: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        record = asdict(self)
        record["move"] = self.move.value
        record["ids"] = list(self.ids)
        record["t"] = self.t.isoformat() if self.t else None
        return record

    @classmethod
    def from_json(cls, record: dict) -> Event:
        t = record.get("t")
        return cls(
            step=int(record["step"]),
            move=Move(record["move"]),
            ids=tuple(record.get("ids", ())),
            t=datetime.fromisoformat(t) if t else None,
            detail=dict(record.get("detail", {})),
        )


class EventLog:
    """An append-only list of :class:`Event`, mirrored to a JSONL file when ``path`` is given."""

    def __init__(self, path: str | Path | None = None):
        self.events: list[Event] = []
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def log(self, move: Move, ids=(), t: datetime | None = None, **detail) -> Event:
        event = Event(step=len(self.events), move=Move(move), ids=tuple(ids), t=t, detail=detail)
        self.events.append(event)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(event.to_json(), default=str) + "\n")
        return event

    def of(self, move: Move) -> list[Event]:
        """The events of one kind, in order."""
        return [event for event in self.events if event.move == Move(move)]

    def count(self, move: Move) -> int:
        return len(self.of(move))

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    @staticmethod
    def read(path: str | Path) -> list[Event]:
        """The events stored in a JSONL file written by an :class:`EventLog`."""
        with Path(path).open(encoding="utf-8") as handle:
            return [Event.from_json(json.loads(line)) for line in handle if line.strip()]
