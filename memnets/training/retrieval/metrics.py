"""Retrieval metrics and the LoCoMo retrieval evaluation of one ranker.

Per question, against its own conversation's turns (the LoCoMo rule):

- recall@k = |evidence in the top k| / |evidence|;
- MRR@10 = 1 / rank of the first evidence turn within the top 10, else 0;
- nDCG@10 with binary relevance: sum over evidence turns in the top 10 of 1/log2(rank + 1),
  divided by the same sum for an ideal ranking (all evidence first).

A question sees only the turns written by the time it is asked (:mod:`memnets.training.retrieval.asked`; in
LoCoMo every question follows the last session, so it sees them all).
Questions whose evidence did not resolve to any turn are left out and counted (`skipped`).
A ranker is anything with `rank(conversation, queries) -> list[list[dia_id]]`, best first
(:class:`memnets.training.retrieval.rankers.Ranker`). The encoder's validation and
:mod:`memnets.training.evaluation.retrieval` (rankers side by side) both use :func:`evaluate_retriever`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from memnets.progress import track
from memnets.training.data.asked import asked_at
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.asked import rank_as_asked
from memnets.training.retrieval.rankers import Ranker

DEFAULT_KS = (1, 5, 10, 25, 50)
DEFAULT_CATEGORIES = (1, 2, 3, 4)
# the fields of a per-question row that are not metrics: which question, and the ids it was given and ranked first
QUESTION_FIELDS = frozenset({"category", "conv_id", "qa_index", "evidence", "retrieved"})


def _check(ranked: Sequence[str], relevant: set[str], k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not relevant:
        raise ValueError("relevant must not be empty: a question without evidence has no recall")
    if len(set(ranked[:k])) != len(ranked[:k]):  # a repeated id would count its relevance twice (above 100%)
        repeated = sorted({item for item in ranked[:k] if ranked[:k].count(item) > 1})
        raise ValueError(f"ranked repeats {repeated[:3]} in its top {k}: a ranking lists each item once")


def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    relevant = set(relevant)
    _check(ranked, relevant, k)
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    relevant = set(relevant)
    _check(ranked, relevant, k)
    for rank, item in enumerate(ranked[:k], start=1):
        if item in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    relevant = set(relevant)
    _check(ranked, relevant, k)
    dcg = sum(1.0 / math.log2(rank + 1) for rank, item in enumerate(ranked[:k], start=1) if item in relevant)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(relevant), k) + 1))
    return dcg / ideal


def question_metrics(
    ranked: Sequence[str], relevant: Iterable[str], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    relevant = set(relevant)
    metrics = {f"recall@{k}": recall_at_k(ranked, relevant, k) for k in ks}
    metrics["mrr@10"] = mrr_at_k(ranked, relevant, 10)
    metrics["ndcg@10"] = ndcg_at_k(ranked, relevant, 10)
    return metrics


@dataclass
class RetrievalReport:
    """Mean metrics overall and per category, with the per-question values kept for analysis."""

    name: str
    overall: dict[str, float]
    by_category: dict[int, dict[str, float]]
    counts: dict[str, int]
    per_question: list[dict] = field(default_factory=list, repr=False)

    def to_dict(self, with_questions: bool = False) -> dict:
        data = asdict(self)
        data["by_category"] = {str(c): m for c, m in self.by_category.items()}
        if not with_questions:
            data.pop("per_question")
        return data

    def to_json(self, with_questions: bool = False) -> str:
        return json.dumps(self.to_dict(with_questions), indent=2)


def summarize(name: str, per_question: list[dict], skipped: int = 0) -> RetrievalReport:
    """Average per-question metric rows (each with a 'category' key) into a report."""
    metric_names = [key for key in per_question[0] if key not in QUESTION_FIELDS] if per_question else []

    def mean(rows: list[dict]) -> dict[str, float]:
        return {m: float(np.mean([row[m] for row in rows])) for m in metric_names}

    categories = sorted({row["category"] for row in per_question})
    return RetrievalReport(
        name=name,
        overall=mean(per_question) if per_question else {},
        by_category={c: mean([row for row in per_question if row["category"] == c]) for c in categories},
        counts={"questions": len(per_question), "skipped_no_evidence": skipped}
        | {f"category_{c}": sum(row["category"] == c for row in per_question) for c in categories},
        per_question=per_question,
    )


def evaluate_retriever(
    ranker: Ranker,
    conversations: Iterable[Conversation],
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    ks: Sequence[int] = DEFAULT_KS,
    name: str = "retriever",
    progress: bool = False,
) -> RetrievalReport:
    """Rank each question's own conversation's turns, as they stood when it was asked, and average the metrics.

    ``progress``: a bar over the conversations (:func:`memnets.progress.track`; its rate is the ranker's time
    per conversation), for a command's long run.
    """
    rows, skipped = [], 0
    for conv in track(conversations, desc=f"{name}: ranking", unit="conv", disable=not progress):
        items = [item for item in conv.qa if item.category in categories]
        skipped += sum(1 for item in items if not item.evidence)
        items = [item for item in items if item.evidence]
        if not items:
            continue
        try:
            rankings = rank_as_asked(
                ranker, conv, [item.question for item in items], [asked_at(conv, item) for item in items]
            )
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from error
        for item, ranked in zip(items, rankings):
            rows.append(
                {"conv_id": conv.sample_id, "qa_index": item.index, "category": item.category}
                | {"evidence": list(item.evidence), "retrieved": list(ranked[: max(ks)])}
                | question_metrics(ranked, item.evidence, ks)
            )
    return summarize(name, rows, skipped)
