"""Fusing a dense and a lexical ranking of the same candidates into one: weighted scores, or reciprocal ranks.

Hybrid search (:mod:`memnets.memory.hybrid`) scores each candidate memory twice: by the dense
ranking (cosine, or a pack's learned score) and by the store's lexical ranking (BM25), absent where
the memory holds no word of the query. Two rules fuse them, both measured on LoCoMo
(docs/memory.md, "Hybrid search"):

- :func:`weighted`: ``weight * dense + (1 - weight) * lexical``, each min-max scaled over the candidates
  first (a score's scale differs between encoders, scorers and stores; its order within a query does not);
  the rule hybrid search uses, with :data:`DENSE_WEIGHT` fitted on LoCoMo's training conversations.
- :func:`reciprocal_rank`: reciprocal rank fusion (Cormack et al., 2009), ``sum 1 / (k + rank)``
  over the two rankings (k = 60): no scores, no weight to fit; mem0, Graphiti, MemMachine and Hindsight
  fuse this way. It lost to the fitted weights on the validation conversation (R@10 59.6% against 63.7%,
  MRR@10 41.2% against 46.9%, archive; docs/memory.md, "Hybrid search").

Both return one fused score per candidate, aligned with the inputs, higher is better.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# weight of the dense score in weighted(): the best R@10 (66.1%) over 0.30 .. 0.70 (step 0.05) x depths 10, 20, 50
# on LoCoMo's six training conversations, through the archive, bundled all-MiniLM-L6-v2 (bench/experiments/hybrid_fusion.py)
DENSE_WEIGHT = 0.45
RRF_K = 60  # reciprocal rank fusion's constant, as in its paper and the systems that use it


def _scaled(scores: np.ndarray) -> np.ndarray:
    """``scores`` min-max scaled to [0, 1] (all equal: all 1)."""
    low, high = scores.min(initial=np.inf), scores.max(initial=-np.inf)
    return np.ones_like(scores) if high <= low else (scores - low) / (high - low)


def _checked(dense: Sequence[float], lexical: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    """(dense scores, lexical scores with NaN where absent) as float64 arrays of one length."""
    if len(dense) != len(lexical):
        raise ValueError(
            f"fusion: {len(dense)} dense scores for {len(lexical)} lexical ones; give one of each per candidate"
        )
    return np.asarray(dense, dtype=np.float64), np.array(
        [np.nan if s is None else s for s in lexical], dtype=np.float64
    )


def weighted(dense: Sequence[float], lexical: Sequence[float | None], weight: float = DENSE_WEIGHT) -> np.ndarray:
    """``weight`` times the candidates' min-max scaled dense scores plus ``1 - weight`` times their min-max
    scaled lexical scores (a candidate without one adds 0, as the lowest lexical score does)."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
        raise ValueError(f"weighted: weight must be a number in [0, 1], got {weight!r}")
    dense, lexical = _checked(dense, lexical)
    found = ~np.isnan(lexical)
    lexical_part = np.zeros_like(lexical)
    lexical_part[found] = _scaled(lexical[found])
    return weight * _scaled(dense) + (1.0 - weight) * lexical_part


def reciprocal_rank(dense: Sequence[float], lexical: Sequence[float | None], k: int = RRF_K) -> np.ndarray:
    """``1 / (k + dense rank) + 1 / (k + lexical rank)`` of each candidate (ranks from 1, ties in the given
    order; a candidate without a lexical score has only the first term)."""
    dense, lexical = _checked(dense, lexical)
    fused = 1.0 / (k + 1 + _ranks(dense))
    found = np.flatnonzero(~np.isnan(lexical))
    fused[found] += 1.0 / (k + 1 + _ranks(lexical[found]))
    return fused


def _ranks(scores: np.ndarray) -> np.ndarray:
    """The 0-based rank of each score, highest first, ties in the given order."""
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(len(scores))
    return ranks


__all__ = ["DENSE_WEIGHT", "RRF_K", "reciprocal_rank", "weighted"]
