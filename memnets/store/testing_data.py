"""The contract suite's deterministic memories and vectors (:mod:`memnets.store.testing` re-exports them).

Content and vector are pure functions of the id, so a parent can check what a killed or concurrent
child wrote without talking to it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import numpy as np

from memnets.records import Memory

DIM = 16
EPOCH = datetime(2024, 1, 1)
EXPIRY_START = datetime(2030, 1, 1, tzinfo=UTC)  # where the expiry tests' clock starts


def vector_for(memory_id: str, dim: int = DIM) -> np.ndarray:
    """A unit float32 vector determined by the id (distinct ids give distinct vectors)."""
    seed = int.from_bytes(hashlib.sha256(memory_id.encode("utf-8", "surrogatepass")).digest()[:8], "little")
    vector = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def memory_for(memory_id: str, owner: str, minutes: int = 0, **fields) -> Memory:
    """A memory whose content names its id and owner (so a leak is visible in the text)."""
    fields.setdefault("content", f"[{owner}] memory {memory_id}: the user said something worth keeping")
    return Memory(id=memory_id, owner=owner, t=EPOCH + timedelta(minutes=minutes), **fields)


def vectors_for(memories) -> np.ndarray:
    return np.stack([vector_for(m.id) for m in memories]) if memories else np.zeros((0, DIM), np.float32)


def ids(memories) -> list[str]:
    return [m.id for m in memories]


def hit_ids(hits) -> list[str]:
    return [m.id for m, _ in hits]


def expiring(memory_id: str, owner: str, seconds: float, **fields) -> Memory:
    """:func:`memory_for` with a TTL of ``seconds``, expiring that long after :data:`EXPIRY_START`."""
    return memory_for(memory_id, owner, expires_at=EXPIRY_START + timedelta(seconds=seconds), ttl=seconds, **fields)
