"""What a manager holds now, as plain values: its tiers, its recall gate's last decisions, its move counts.

For whoever shows a manager to a person (the server's manager route, the inspector): a
:class:`ManagerSnapshot` is a copy, so it can be rendered while the manager moves on.
"""

from __future__ import annotations

from dataclasses import dataclass

from memnets.memory.events import Event, Move
from memnets.records import Memory

GATE_DECISIONS_SHOWN = 20


@dataclass(frozen=True)
class ManagerSnapshot:
    """The memories of each tier (context oldest first, working, pending writes), the recall gate's
    last decisions (newest first) and how many moves of each kind the manager made (those it made)."""

    context: list[Memory]
    working: list[Memory]
    pending: list[Memory]
    gate: list[Event]
    moves: dict[str, int]


def snapshot(manager, gate_decisions: int = GATE_DECISIONS_SHOWN) -> ManagerSnapshot:
    """The :class:`ManagerSnapshot` of ``manager`` with its last ``gate_decisions`` gate decisions."""
    if isinstance(gate_decisions, bool) or not isinstance(gate_decisions, int) or gate_decisions < 0:
        raise ValueError(f"gate_decisions must be an int >= 0, got {gate_decisions!r}")
    gate = manager.events.of(Move.GATE)[-gate_decisions:] if gate_decisions else []
    counts = {move.value: manager.events.count(move) for move in Move}
    return ManagerSnapshot(
        context=[entry.memory for entry in manager.context.entries],
        working=[entry.memory for entry in manager.working.entries.values()],
        pending=[entry.memory for entry in manager.pending.values()],
        gate=list(reversed(gate)),
        moves={move: count for move, count in counts.items() if count},
    )


__all__ = ["GATE_DECISIONS_SHOWN", "ManagerSnapshot", "snapshot"]
