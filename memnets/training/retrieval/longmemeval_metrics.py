"""LongMemEval's retrieval metrics: recall_any@k, recall_all@k and NDCG@k, at turn and at session level.

The formulas are those of LongMemEval's evaluator (src/retrieval/eval_utils.py of
xiaowu0162/LongMemEval), so figures sit beside the paper's:

- recall_any@k = 1 when some relevant item is in the top k, else 0;
  recall_all@k = 1 when every relevant item is in the top k, else 0;
- NDCG@k over the whole ranked corpus: DCG = rel_1 + sum_{p=2..k} rel_p / log2(p) (the second place
  weighs as much as the first, as in the evaluator), divided by the DCG of the corpus' relevances
  sorted best first;
- session level from a turn ranking: each ranked turn stands for its session; k grows until the
  top k holds k distinct sessions (or the corpus ends); recall is over the distinct sessions of
  that top, NDCG over the per-turn session relevances of that top (a relevant session's turns all
  count as relevant).

A ranking is the whole corpus, best first, each id once. The relevant items must be non-empty
(a question without evidence is left out by the caller).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

LONGMEMEVAL_KS = (1, 3, 5, 10, 30, 50)
METRICS = ("recall_any", "recall_all", "ndcg")


def dcg(relevances: Sequence[float], k: int) -> float:
    """The evaluator's DCG of the first k relevances: rel_1 + sum_{p=2..k} rel_p / log2(p)."""
    top = list(relevances[:k])
    return (top[0] + sum(rel / math.log2(place) for place, rel in enumerate(top[1:], start=2))) if top else 0.0


def ndcg(ranked_relevances: Sequence[float], corpus_relevances: Sequence[float], k: int) -> float:
    """DCG of the ranking's first k over that of the corpus sorted best first; 0 when nothing is relevant."""
    ideal = dcg(sorted(corpus_relevances, reverse=True), k)
    return dcg(ranked_relevances, k) / ideal if ideal else 0.0


def _check(ranked: Sequence[str], relevant: set[str], k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not relevant:
        raise ValueError("relevant must not be empty: a question without evidence is left out of the metrics")
    if len(set(ranked)) != len(ranked):
        raise ValueError("ranked repeats an id: a ranking lists each corpus item once")


def turn_metrics(ranked: Sequence[str], relevant: set[str], k: int) -> dict[str, float]:
    """recall_any, recall_all and NDCG at k of a ranking of the whole corpus against relevant ids."""
    _check(ranked, relevant, k)
    top = set(ranked[:k])
    relevances = [float(item in relevant) for item in ranked]
    return {
        "recall_any": float(bool(relevant & top)),
        "recall_all": float(relevant <= top),
        "ndcg": ndcg(relevances, relevances, k),
    }


def session_metrics(
    ranked: Sequence[str], turn_session: Mapping[str, str], relevant_sessions: set[str], k: int
) -> dict[str, float]:
    """The same metrics at session level from a turn ranking, as the evaluator's turn2session maps it."""
    _check(ranked, relevant_sessions, k)
    sessions = [turn_session[turn] for turn in ranked]
    effective_k = k
    while effective_k <= len(sessions) and len(set(sessions[:effective_k])) < k:
        effective_k += 1
    top = set(sessions[:effective_k])
    relevances = [float(session in relevant_sessions) for session in sessions]
    return {
        "recall_any": float(bool(relevant_sessions & top)),
        "recall_all": float(relevant_sessions <= top),
        "ndcg": ndcg(relevances, relevances, effective_k),
    }


def question_metrics(
    ranked: Sequence[str], evidence: Sequence[str], turn_session: Mapping[str, str], ks: Sequence[int] = LONGMEMEVAL_KS
) -> dict[str, float]:
    """Every metric of one question, named ``{level}_{metric}@{k}`` (``turn_recall_any@5``, ``session_ndcg@10``)."""
    relevant = set(evidence)
    relevant_sessions = {turn_session[turn] for turn in relevant}
    row = {}
    for k in ks:
        row |= {f"turn_{name}@{k}": value for name, value in turn_metrics(ranked, relevant, k).items()}
        row |= {
            f"session_{name}@{k}": value
            for name, value in session_metrics(ranked, turn_session, relevant_sessions, k).items()
        }
    return row
