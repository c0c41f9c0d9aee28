"""Retrieval evaluation: rankers from the registry side by side on LoCoMo conversations.

Each ranker is given as a spec ``[NAME=]KIND[:PATH]`` (:mod:`memnets.training.retrieval.rankers`) and scored
with the LoCoMo rule (:func:`memnets.training.retrieval.metrics.evaluate_retriever`: recall@k, MRR@10 and
nDCG@10 per question against its own conversation's turns). ``memnets eval retrieval`` runs it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence

from memnets.training.data.locomo import Conversation
from memnets.training.evaluation import (
    memory_ranker,  # noqa: F401 (registers the ranker kind "memory")
    stored,  # noqa: F401  (registers the ranker kinds of a memory store)
)
from memnets.training.retrieval.metrics import (
    DEFAULT_CATEGORIES,
    DEFAULT_KS,
    RetrievalReport,
    evaluate_retriever,
)
from memnets.training.retrieval.rankers import build_ranker, parse_spec

logger = logging.getLogger(__name__)


def compare_rankers(
    specs: Iterable[str],
    conversations: Sequence[Conversation],
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    ks: Sequence[int] = DEFAULT_KS,
) -> list[RetrievalReport]:
    """One report per ranker spec, in the specs' order; every spec is checked before any ranker is built.

    Raises ValueError, saying why, when no question of ``conversations`` can be scored (none in
    ``categories`` with evidence), before any ranker is built.
    """
    parsed = [parse_spec(spec) for spec in specs]
    reason = unscorable(conversations, categories)
    if reason is not None:
        raise ValueError(f"no question can be scored: {reason}")
    reports = []
    for name, kind, path in parsed:
        started = time.perf_counter()
        ranker = build_ranker(kind, path)
        report = evaluate_retriever(ranker, conversations, categories=categories, ks=ks, name=name, progress=True)
        logger.info(
            "%s: recall@10 %.3f (%.1f s)",
            name,
            report.overall.get("recall@10", float("nan")),
            time.perf_counter() - started,
        )
        reports.append(report)
    return reports


def unscorable(conversations: Sequence[Conversation], categories: Sequence[int] = DEFAULT_CATEGORIES) -> str | None:
    """Why no question of ``conversations`` can be scored, or None when one can.

    A question is scored when its category is one of ``categories`` and it has evidence turns
    (LoCoMo's adversarial category 5 is outside the default categories 1-4).
    """
    questions = [item for conv in conversations for item in conv.qa]
    chosen = [item for item in questions if item.category in categories]
    if any(item.evidence for item in chosen):
        return None
    wanted = ",".join(map(str, categories))
    if not conversations:
        return "there are no conversations"
    if not questions:
        return f"its {len(conversations)} conversation(s) hold no questions"
    if not chosen:
        found = ",".join(map(str, sorted({item.category for item in questions})))
        return f"its {len(questions)} question(s) are all in categories {found}, none in the scored ones ({wanted})"
    return f"none of its {len(chosen)} question(s) in categories {wanted} has evidence turns"
