"""Time to live: a ``ttl`` argument checked against the store, the fields it sets, and its refresh.

A memory written with a TTL expires ``ttl`` seconds after it was written (``expires_at``); a store
that declares :class:`~memnets.store.protocol.Expiry` hides it from every read once that passes,
and the deletion path's sweep (:meth:`~memnets.memory.deletion.DeletionPath.sweep_expired`)
removes it. A read that asks for it (``refresh_ttl``) and a write that repeats it restart the clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import memnets.timeutil as timeutil
from memnets.records import Memory
from memnets.store.protocol import Expiry, supports
from memnets.timeutil import ttl_seconds


class _KeepTTL:
    """The default of ``AgentMemory.update(ttl=...)``: leave the memory's expiry as it is."""

    def __repr__(self) -> str:
        return "KEEP_TTL"


KEEP_TTL = _KeepTTL()


def check_ttl(store, ttl) -> float | None:
    """A ttl argument in seconds (None: no expiry); an error naming it if bad or the store cannot expire."""
    seconds = ttl_seconds(ttl, "ttl")
    if seconds is not None and not supports(store, Expiry):
        raise ValueError(f"ttl: {type(store).__name__} does not support expiry (supports_expiry)")
    return seconds


def expiry_fields(seconds: float | None) -> dict:
    """The ``expires_at``/``ttl`` fields of a record whose time to live (seconds, or None) starts now."""
    if seconds is None:
        return {"expires_at": None, "ttl": None}
    return {"expires_at": timeutil.now() + timedelta(seconds=seconds), "ttl": seconds}


def refresh(store, memories: Sequence[Memory], owner: str) -> list[Memory]:
    """The memories with a TTL expire ``ttl`` from now again, in the store too; returned as refreshed."""
    memories = list(memories)
    with_ttl = [m for m in memories if m.ttl is not None]
    if not with_ttl or not supports(store, Expiry):
        return memories
    when = timeutil.now()
    store.refresh_expiry([m.id for m in with_ttl], owner, when)
    return [m if m.ttl is None else m.replace(expires_at=when + timedelta(seconds=m.ttl)) for m in memories]


__all__ = ["check_ttl", "expiry_fields", "refresh"]
