"""Hybrid ranking in the evaluation: a dense ranker's scores fused with BM25's over a conversation's turns.

The memory stores' hybrid search (:mod:`memnets.memory.hybrid`) fuses the dense ranking with the store's
lexical index; this is the same idea for the in-process rankers of :mod:`memnets.training.retrieval.rankers`, so that
``memnets eval retrieval`` (and the main job's evaluation) can rank a trained encoder or a pack with the words
beside the meaning. The candidates are the ``depth`` best turns of each ranking, as in the stores (None:
every turn); they are ranked by the fused score, the other turns below them in the dense order. A turn
that holds no word of the query has no lexical score (:func:`memnets.retrieval.fusion.weighted` adds 0 for
it, :func:`~memnets.retrieval.fusion.reciprocal_rank` only its dense term).

Kinds (registered in :mod:`memnets.training.retrieval.rankers`): ``hybrid[:ENCODER]`` (cosine of an encoder folder or
backbone name, fused with BM25) and ``hybrid_learned:PACK`` (a pack's learned score, fused with BM25), both
with :data:`EVAL_DENSE_WEIGHT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from memnets.retrieval.fusion import reciprocal_rank, weighted
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.bm25 import BM25Ranker

# weight of the dense score and depth: the best R@10 on the validation conversation (conv-49) over weights
# 0.3 .. 0.9 (step 0.05) x depths 10, 20, 50, all, and reciprocal rank fusion, with a trained MiniLM encoder of
# encoder/cpu (bench/experiments/eval_hybrid.py; docs/encoder.md, "Hybrid ranking in the evaluation"). Far
# higher than the stores' DENSE_WEIGHT (0.45, fitted for the untrained encoder): a trained encoder's ranking
# needs the words only as a tie-breaker.
EVAL_DENSE_WEIGHT = 0.9
EVAL_DEPTH = 20  # candidates of each ranking (None: all turns)
RULES = ("weighted", "rrf")


class ScoringRanker(Protocol):
    """A ranker that also gives its scores: ``scores(conversation, queries) -> [len(queries), len(turns)]``."""

    def scores(self, conversation: Conversation, queries: Sequence[str]) -> np.ndarray: ...


class HybridRanker:
    """Ranks turns by ``dense``'s scores fused with BM25's over the ``depth`` best of each: ``rule`` "weighted"
    (dense ``weight``, the rest lexical; min-max scaled over the candidates) or "rrf" (reciprocal rank fusion,
    k = 60)."""

    def __init__(
        self,
        dense: ScoringRanker,
        weight: float = EVAL_DENSE_WEIGHT,
        rule: str = "weighted",
        depth: int | None = EVAL_DEPTH,
        name: str = "hybrid",
        lexical: BM25Ranker | None = None,
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"HybridRanker: rule must be one of {RULES}, got {rule!r}")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
            raise ValueError(f"HybridRanker: depth must be a positive int or None, got {depth!r}")
        weighted([0.0], [None], weight)  # checks the weight now, naming it, rather than at the first query
        self.dense, self.weight, self.rule, self.depth, self.name = dense, weight, rule, depth, name
        self.lexical = lexical if lexical is not None else BM25Ranker()

    def order(self, dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
        """One query's turn indices, best first, from its dense and BM25 scores over the turns (BM25 0: no
        word found): the candidates by the fused score, then the rest by the dense one."""
        by_dense = np.argsort(-dense, kind="stable")
        if self.depth is None:
            candidates = by_dense
        else:
            by_words = [i for i in np.argsort(-lexical, kind="stable")[: self.depth] if lexical[i] > 0]
            candidates = np.array(list(dict.fromkeys([*by_dense[: self.depth], *by_words])))
        found = [float(lexical[i]) if lexical[i] > 0 else None for i in candidates]
        if self.rule == "weighted":
            fused = weighted(dense[candidates], found, self.weight)
        else:
            fused = reciprocal_rank(dense[candidates], found)
        head = candidates[np.argsort(-fused, kind="stable")]
        chosen = set(head.tolist())
        return np.array([*head, *(i for i in by_dense if i not in chosen)], dtype=np.int64)

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        if not queries:
            return []
        dense = self.dense.scores(conversation, queries)
        lexical = self.lexical.scores([turn.content for turn in conversation.turns], queries)
        ids = [turn.dia_id for turn in conversation.turns]
        return [[ids[i] for i in self.order(np.asarray(d, dtype=np.float64), w)] for d, w in zip(dense, lexical)]


__all__ = ["EVAL_DENSE_WEIGHT", "HybridRanker", "RULES"]
