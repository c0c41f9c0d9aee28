"""Hybrid ranking in the evaluation: a dense ranker's scores fused with BM25's over a conversation's turns.

The memory stores' hybrid search (:mod:`memnets.memory.hybrid`) fuses the dense ranking with the store's
lexical index; this is the same idea for the in-process rankers of :mod:`memnets.retrieval.rankers`, so that
``memnets eval retrieval`` (and the main job's evaluation) can rank a trained encoder or a pack with the words
beside the meaning. Every turn of the conversation is a candidate (no depth: the ranking is over all turns);
a turn that holds no word of the query has no lexical score (:func:`memnets.retrieval.fusion.weighted` adds
0 for it, :func:`~memnets.retrieval.fusion.reciprocal_rank` only its dense term).

Kinds (registered in :mod:`memnets.retrieval.rankers`): ``hybrid[:ENCODER]`` (cosine of an encoder folder or
backbone name, fused with BM25) and ``hybrid_learned:PACK`` (a pack's learned score, fused with BM25), both
with :data:`EVAL_DENSE_WEIGHT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from memnets.data.locomo import Conversation
from memnets.retrieval.bm25 import BM25Ranker, rank_by_scores
from memnets.retrieval.fusion import reciprocal_rank, weighted

# weight of the dense score: the best R@10 on the validation conversation (conv-49) over 0.3 .. 0.9 (step 0.05)
# with the trained MiniLM encoder of encoder/cpu (bench/experiments/eval_hybrid.py; docs/encoder.md, "Hybrid
# ranking in the evaluation"). Higher than the stores' DENSE_WEIGHT (0.45, fitted for the untrained encoder): a
# trained encoder's ranking deserves more of the say.
EVAL_DENSE_WEIGHT = 0.7
RULES = ("weighted", "rrf")


class ScoringRanker(Protocol):
    """A ranker that also gives its scores: ``scores(conversation, queries) -> [len(queries), len(turns)]``."""

    def scores(self, conversation: Conversation, queries: Sequence[str]) -> np.ndarray: ...


class HybridRanker:
    """Ranks turns by ``dense``'s scores fused with BM25's: ``rule`` "weighted" (dense ``weight``, the rest
    lexical; min-max scaled over the turns) or "rrf" (reciprocal rank fusion, k = 60)."""

    def __init__(
        self,
        dense: ScoringRanker,
        weight: float = EVAL_DENSE_WEIGHT,
        rule: str = "weighted",
        name: str = "hybrid",
        lexical: BM25Ranker | None = None,
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"HybridRanker: rule must be one of {RULES}, got {rule!r}")
        weighted([0.0], [None], weight)  # checks the weight now, naming it, rather than at the first query
        self.dense, self.weight, self.rule, self.name = dense, weight, rule, name
        self.lexical = lexical if lexical is not None else BM25Ranker()

    def fuse(self, dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
        """One query's fused scores from its dense and BM25 scores over the same turns (BM25 0: no word found)."""
        found = [float(s) if s > 0 else None for s in lexical]
        return weighted(dense, found, self.weight) if self.rule == "weighted" else reciprocal_rank(dense, found)

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        if not queries:
            return []
        dense = self.dense.scores(conversation, queries)
        lexical = self.lexical.scores([turn.content for turn in conversation.turns], queries)
        ids = [turn.dia_id for turn in conversation.turns]
        return [rank_by_scores(self.fuse(d, w), ids) for d, w in zip(dense, lexical)]


__all__ = ["EVAL_DENSE_WEIGHT", "HybridRanker", "RULES"]
