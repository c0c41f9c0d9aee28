"""Supersession in the write path: a newer memory that ends the validity of an older one of the same speaker.

"I live in Paris", then "I moved to Berlin last month": the second is a new memory (the sentence
frame rule of :mod:`memnets.memory.writes` catches restatements only), and without this step the
first stays current and may rank first for "Where do I live?". After each write, :class:`Supersession`
picks the candidates (among the user's :data:`CANDIDATE_POOL` current memories nearest to the new
one, by the store's index as the write path's near-match lookup finds them: those of the same kind
and speaker, ``agent`` and ``"{speaker}: "`` prefix, cosine at least :data:`CANDIDATE_FLOOR`, still
valid, at most :data:`CANDIDATES`) and asks a :class:`SupersessionJudge` of each pair in the order
their facts began to hold (``valid_from``, not the order they were written: a statement from before a
newer fact, imported after it, is the one ended). For each score at or above the judge's threshold the older memory gets a
new version (so the decision is in its ``history``) with ``valid_to`` closed at the newer one's
``valid_from``, ``invalidated_by`` the newer one's id and ``invalidation_score`` the score; the
write path writes it in the same store transaction as the new memory (``WritePath.commit``).

``invalidated_by`` is its own field: ``superseded_by`` marks an older *version* row, which reads
never return, while an invalidated memory stays current (an agent may still ask about it, and
``as_of`` reads find it valid before its end). A search never ranks it above the memory that
invalidated it, at any k, and fetches that one when only the ended one was found
(:func:`memnets.memory.search.current_first`). ``update(id, valid_to=None)`` reopens it (a new version
without ``valid_to`` and ``invalidated_by``): a wrong decision is reversible.

The judge is given to ``memnets.open(..., supersession=judge)``; None (the default) leaves the step off.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import Protocol, runtime_checkable

import numpy as np

from memnets.memory.writes import speaker
from memnets.records import Memory
from memnets.store.rows import closed_by

CANDIDATES = 5  # older memories a new one is judged against
CANDIDATE_POOL = 20  # nearest memories searched for them (an index search: a write stays fast on a large store)
CANDIDATE_FLOOR = 0.3  # cosine below which an older memory is no candidate (another subject)


@runtime_checkable
class SupersessionJudge(Protocol):
    """Decides whether a newer memory ends the validity of an older one (same user, same speaker)."""

    threshold: float

    def score(self, older: str, newer: str) -> float:
        """In [0, 1]; >= threshold: ``newer`` supersedes ``older``."""


class Supersession:
    """The supersession step of a store's write path, with ``judge`` deciding (see the module docstring)."""

    def __init__(self, store, judge: SupersessionJudge):
        if not isinstance(judge, SupersessionJudge):
            raise TypeError(
                f"supersession must implement SupersessionJudge (threshold, score(older, newer)), got {judge!r:.60}"
            )
        threshold = getattr(judge, "threshold", None)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(
                f"supersession judge {judge!r:.60}: threshold must be a number in [0, 1], got {threshold!r}"
            )
        self.store, self.judge = store, judge

    def candidates(self, memory: Memory, vector: np.ndarray, later: Set[str] = frozenset()) -> list[Memory]:
        """The current memories ``memory`` is judged against: same user, kind and speaker, near it, still
        valid, not among ``later`` (the ids its own write stores after it); valid from before it or after it."""
        found = self.store.search(vector, CANDIDATE_POOL, memory.owner)
        return [
            other
            for other, cosine in found
            if other.id != memory.id
            and other.id not in later
            and cosine >= CANDIDATE_FLOOR
            and other.kind == memory.kind
            and other.valid_to is None
            and speaker(other) == speaker(memory)
        ][:CANDIDATES]

    def endings(self, memory: Memory, vector: np.ndarray, later: Set[str] = frozenset()) -> list[tuple[Memory, Memory]]:
        """(a memory, its next version, closed) for each candidate the judge says ``memory`` ends (those valid
        from no later than it); and for ``memory`` itself, closed by the earliest candidate valid from after
        it that the judge says ends it (a statement from before a newer fact, written after it: an old
        transcript imported late; in write order the stale fact had stayed open)."""
        out, enders = [], []
        for other in self.candidates(memory, vector, later):
            before = other.valid_from <= memory.valid_from
            score = self._score(other, memory) if before else self._score(memory, other)
            if score >= self.judge.threshold:
                if before:
                    out.append((other, closed_by_judge(other, memory, score)))
                else:
                    enders.append((other.valid_from, score, other))
        if enders:
            _, score, first = min(enders, key=lambda ender: ender[0])
            out.append((memory, closed_by_judge(memory, first, score)))
        return out

    def _score(self, older: Memory, newer: Memory) -> float:
        score = self.judge.score(older.content, newer.content)
        if isinstance(score, bool) or not isinstance(score, (int, float, np.floating)):
            raise TypeError(
                f"supersession judge {self.judge!r:.60}: score must be a number, got {type(score).__name__}"
            )
        score = float(score)
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"supersession judge {self.judge!r:.60}: score must lie in [0, 1], got {score!r}")
        return score

    def apply(self, written: list[Memory], vectors: np.ndarray, update: Callable) -> list[Memory]:
        """Inside a write's transaction: for each memory of ``written`` (with its row of ``vectors``) it added or
        changed, ``update(memory, closed, None)`` writes each memory it ends (or that ends it) as its closed
        version; never against one that the same write stores after it. Returns ``written`` as it was."""
        for n, (memory, vector) in enumerate(zip(written, vectors)):
            if memory.outcome != "unchanged":
                later = {m.id for m in written[n + 1 :]}
                for ended, closed in self.endings(memory, vector, later):
                    update(ended, closed, None)
        return written


def closed_by_judge(older: Memory, newer: Memory, score: float) -> Memory:
    """``older``'s next version, its validity ended where ``newer``'s begins (:func:`~memnets.store.rows.closed_by`),
    by the judge's ``score``."""
    return closed_by(older, newer).replace(
        invalidated_by=newer.id, invalidation_score=score, updated_at=max(older.updated_at, newer.updated_at)
    )


__all__ = ["CANDIDATES", "CANDIDATE_FLOOR", "CANDIDATE_POOL", "Supersession", "SupersessionJudge"]
