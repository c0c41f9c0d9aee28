"""Why a search ranked its hits: each hit's score taken apart into the features a scorer weighs.

A search answers the memories and one score each (cosine, or a pack's learned score). Someone
inspecting a memory (the server's inspector, a curious user) wants the parts behind it: the
relevance (cosine of the query's and the memory's vectors), the recency (``decay ** hours`` since
the memory's last access, the scorer's own decay), the stored importance and, with a learned
scorer, the learned score itself. :func:`explain_hits` computes them from the vectors the search
already had, so explaining costs no second encode of the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

import memnets.timeutil as timeutil
from memnets.records import Memory
from memnets.scoring import DEFAULT_DECAY, cosine, recency


@dataclass(frozen=True)
class ScoreParts:
    """The features behind one hit's score (``learned``: the learned score, None when ranked by cosine)."""

    relevance: float
    recency: float
    importance: float
    learned: float | None


class ExplainedHit(NamedTuple):
    """One search result with its score's parts."""

    memory: Memory
    score: float
    parts: ScoreParts


@dataclass(frozen=True)
class Explanation:
    """A search's hits per user, each with its parts, and how they were ranked.

    ``ranker``: "learned" (a pack's scorer) or "cosine"; ``weights``: the learned scorer's weights
    (None for cosine).
    """

    by_user: dict[str, list[ExplainedHit]]
    ranker: str
    weights: Any | None


def explain_hits(
    hits: Sequence, query_vector: np.ndarray, memory_vectors: np.ndarray, *, now: datetime, scorer=None
) -> list[ExplainedHit]:
    """``hits`` (SearchHits: memory and score) with their parts; ``memory_vectors`` are the hits'
    stored vectors, row for row; ``scorer``: the search's re-ranker (None: ranked by cosine)."""
    if not hits:
        return []
    memories = [hit.memory for hit in hits]
    weights = getattr(scorer, "weights", None)
    relevance = cosine(np.asarray(query_vector, dtype=np.float32).reshape(-1), memory_vectors)
    fresh = recency(memories, now, getattr(weights, "decay", DEFAULT_DECAY))
    return [
        ExplainedHit(
            hit.memory,
            float(hit.score),
            ScoreParts(
                relevance=float(relevance[n]),
                recency=float(fresh[n]),
                importance=float(hit.memory.importance),
                learned=float(hit.score) if scorer is not None else None,
            ),
        )
        for n, hit in enumerate(hits)
    ]


def explanation(by_user: dict[str, list[ExplainedHit]], scorer=None) -> Explanation:
    """The :class:`Explanation` of hits ranked by ``scorer`` (None: by cosine)."""
    weights = getattr(scorer, "weights", None)
    return Explanation(by_user, "learned" if scorer is not None else "cosine", weights)


__all__ = ["ExplainedHit", "Explanation", "ScoreParts", "explain_hits", "explanation"]


def explain_found(found: dict, vector: np.ndarray, vectors: dict, scorer=None) -> Explanation:
    """Each user's hits (``{user: [SearchHit]}``) of one encoded query ``vector`` taken apart
    (:func:`explain_hits`, with the hits' stored vectors: ``{user: [n, dim]}``, as the search read them), as one
    :class:`Explanation`."""
    now = timeutil.now()
    by_user = {user: explain_hits(hits, vector, vectors[user], now=now, scorer=scorer) for user, hits in found.items()}
    return explanation(by_user, scorer)
