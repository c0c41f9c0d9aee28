"""Maximal marginal relevance (Carbonell & Goldstein, 1998): relevant *and* diverse selections.

Greedy: at each step pick the candidate i maximising
    lambda * relevance[i] - (1 - lambda) * max_{j already picked} cos(v_i, v_j),
so a near-duplicate of something already chosen loses to a slightly less relevant new fact.
With lambda = 1 this is plain top-k by relevance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from memnets.memory.search import current_first, successor_id
from memnets.records import Memory


def mmr(
    vectors: np.ndarray,
    relevance: np.ndarray,
    k: int,
    *,
    lambda_: float = 0.7,
) -> list[int]:
    """Indices of up to ``k`` candidates in MMR order.

    Args:
        vectors: ``[N, d]`` candidate vectors, L2-normalised (cosine = dot product).
        relevance: ``[N]`` relevance of each candidate to the query, on any scale comparable to
            cosine similarity (callers pass cosine, or scores min-max normalised to [0, 1]).
        k: how many to pick (fewer when there are fewer candidates).
        lambda_: weight of relevance against redundancy, in [0, 1].
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    relevance = np.asarray(relevance, dtype=np.float64)
    if vectors.ndim != 2 or relevance.shape != (vectors.shape[0],):
        raise ValueError(f"mmr: vectors must be [N, d] and relevance [N]; got {vectors.shape} and {relevance.shape}")
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"mmr: lambda_ must lie in [0, 1], got {lambda_}")
    if k < 0:
        raise ValueError(f"mmr: k must be non-negative, got {k}")
    n = vectors.shape[0]
    similarity = vectors @ vectors.T
    chosen: list[int] = []
    redundancy = np.full(n, -np.inf)  # max similarity to anything chosen so far
    available = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        objective = lambda_ * relevance - (1.0 - lambda_) * penalty
        objective[~available] = -np.inf
        best = int(np.argmax(objective))
        chosen.append(best)
        available[best] = False
        redundancy = np.maximum(redundancy, similarity[best])
    return chosen


def mmr_current_first(
    memories: Sequence[Memory],
    vectors: np.ndarray,
    relevance: np.ndarray,
    scores: np.ndarray,
    k: int,
    *,
    lambda_: float,
    links: Mapping[str, str] | None = None,
) -> list[int]:
    """Indices of up to ``k`` of ``memories`` picked by MMR (``relevance``, ``vectors``) and ranked as a search answers
    them (:func:`~memnets.memory.search.current_first` by ``scores``). A memory whose successor (the memory that ended
    or likely replaced it, or that ``links``, a search's own likely replacements, {id: id}, put in its place) is among
    ``memories`` is no MMR candidate: unlike its successor it would be "diverse" and answer in its place. Such memories
    fill the places MMR leaves, best scored first, each after its successor, so ``k`` come back whenever ``k`` were
    given (the LangChain store's MMR and the memory manager's RECALL and view)."""
    links = links or {}
    held = {memory.id for memory in memories}
    stale = {n for n, memory in enumerate(memories) if (successor_id(memory) or links.get(memory.id)) in held}
    fresh = [n for n in range(len(memories)) if n not in stale]
    order = [fresh[i] for i in mmr(vectors[fresh], relevance[fresh], k, lambda_=lambda_)] if fresh else []
    chosen = [*order, *sorted(stale, key=lambda n: -scores[n])][:k]
    position = {memories[n].id: n for n in chosen}
    ranked = current_first([(memories[n], float(scores[n])) for n in chosen], links)
    return [position[memory.id] for memory, _ in ranked]
