"""Retrieval evaluation on LongMemEval: each question ranks its own haystack's user turns.

For every ranker spec (the registry of :mod:`memnets.training.retrieval.rankers`) and every question, the
user turns of the question's haystack are ranked for the question, and recall_any / recall_all /
NDCG at k are taken at turn and at session level
(:mod:`memnets.training.retrieval.longmemeval_metrics`), then averaged per ``question_type`` and overall.
Abstention questions, questions without a ``has_answer`` user turn and those whose evidence is all
dated after their ``question_date`` are left out and counted.

The haystacks of LongMemEval's S split share most of their sessions, so a ranker that embeds
(dense, heuristic, learned) gets its encoder wrapped in a cache keyed by text
(:class:`memnets.nn.embedding_cache.CachedEncoder`), filled up front with every distinct user turn
of the file in large batches: a shared session is encoded once, not once per question.

Each question ranks only the sessions dated by its ``question_date`` (:func:`rank_question`): what
was said after the question is hidden, as it would be from an agent asked then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from memnets.progress import track
from memnets.training.data.asked import seen_at
from memnets.training.data.longmemeval import LongMemEvalQuestion
from memnets.training.evaluation import memory_ranker  # noqa: F401 (registers the ranker kind "memory")
from memnets.training.retrieval.asked import rank_as_asked
from memnets.training.retrieval.longmemeval_metrics import LONGMEMEVAL_KS, question_metrics
from memnets.training.retrieval.rankers import Ranker, build_ranker, parse_spec

logger = logging.getLogger(__name__)
_ROW_KEYS = {"question_id", "question_type", "question_date", "evidence", "evidence_after_question", "retrieved"}


@dataclass
class LongMemEvalReport:
    """Mean metrics overall and per question type, with each question's values kept."""

    name: str
    overall: dict[str, float]
    by_type: dict[str, dict[str, float]]
    counts: dict[str, int]
    per_question: list[dict] = field(default_factory=list, repr=False)

    def to_dict(self, with_questions: bool = False) -> dict:
        data = asdict(self)
        if not with_questions:
            data.pop("per_question")
        return data


def scored_questions(questions: Iterable[LongMemEvalQuestion]) -> list[LongMemEvalQuestion]:
    """The questions retrieval metrics cover: not abstention, with at least one ``has_answer`` user turn
    said by the ``question_date`` (:func:`asked_evidence`)."""
    return [q for q in questions if not q.abstention and asked_evidence(q)]


def asked_evidence(question: LongMemEvalQuestion) -> tuple[str, ...]:
    """The evidence turns of ``question`` dated by its ``question_date``, in its order. The turns after it are
    hidden from the question (:func:`rank_question`), so a question none of whose evidence comes before it (a data
    error) cannot be scored (it had been scored 0 at every k, with nothing said), and one with some later evidence
    is scored on the rest (its recall could not reach 1 while its nDCG did)."""
    seen = {turn.dia_id for turn in seen_at(question.user_turns_only(), question.question_date).turns}
    return tuple(turn for turn in question.evidence if turn in seen)


def rank_question(ranker: Ranker, question: LongMemEvalQuestion) -> list[str]:
    """The question's haystack user turns (LongMemEval's corpus) dated by its ``question_date``, best first."""
    return rank_as_asked(ranker, question.user_turns_only(), [question.question], [question.question_date])[0]


def cache_encodings(ranker: Ranker, texts: Iterable[str]) -> Ranker:
    """Give an embedding ranker an encoder cache keyed by text, filled with each distinct text of ``texts`` once.

    A ranker without an encoder (BM25) is returned as it is.
    """
    from memnets.nn.embedding_cache import CachedEncoder

    holder = ranker if hasattr(ranker, "encoder") else getattr(ranker, "scorer", None)
    if getattr(holder, "encoder", None) is None:
        return ranker
    holder.encoder = CachedEncoder(holder.encoder)
    holder.encoder.prefill(list(dict.fromkeys(texts)), kind="memory")
    return ranker


def corpus_texts(questions: Iterable[LongMemEvalQuestion]) -> Iterable[str]:
    """The memory texts of every question's retrieval corpus (its haystack's user turns)."""
    return (turn.content for q in questions for turn in q.user_turns_only().turns)


def evaluate_longmemeval(
    ranker: Ranker,
    questions: Sequence[LongMemEvalQuestion],
    ks: Sequence[int] = LONGMEMEVAL_KS,
    name: str = "ranker",
    progress: bool = False,
) -> LongMemEvalReport:
    """Rank each scored question's haystack and average its metrics per question type and overall.

    ``progress``: a bar over the questions (:func:`memnets.progress.track`), for a command's long run.
    """
    scored = scored_questions(questions)
    rows = []
    for question in track(scored, desc=f"{name}: ranking", unit="question", disable=not progress):
        ranked, evidence = rank_question(ranker, question), asked_evidence(question)
        rows.append(
            {
                "question_id": question.question_id,
                "question_type": question.question_type,
                "question_date": question.question_date.isoformat(),
                "evidence": list(evidence),
                "evidence_after_question": len(question.evidence) - len(evidence),  # left out of its evidence
                "retrieved": list(ranked[: max(ks)]),  # the ranked turn ids, best first
            }
            | question_metrics(ranked, evidence, question.turn_session, ks)
        )
    return summarize(name, rows, questions)


def summarize(name: str, rows: list[dict], questions: Sequence[LongMemEvalQuestion]) -> LongMemEvalReport:
    """Average per-question rows overall and per question type; count what was left out and why."""
    metrics = [key for key in rows[0] if key not in _ROW_KEYS] if rows else []

    def mean(chosen: list[dict]) -> dict[str, float]:
        return {metric: float(np.mean([row[metric] for row in chosen])) for metric in metrics}

    types = sorted({row["question_type"] for row in rows})
    abstention = sum(q.abstention for q in questions)
    with_evidence = sum(not q.abstention and bool(q.evidence) for q in questions)
    if with_evidence > len(rows):
        logger.warning(
            "LongMemEval: %d question(s) left out: all their evidence is dated after their question_date",
            with_evidence - len(rows),
        )
    late = [row for row in rows if row["evidence_after_question"]]
    if late:
        logger.warning(
            "LongMemEval: %d evidence turn(s) of %d question(s) dated after their question_date left out of their "
            "evidence (%s%s)",
            sum(row["evidence_after_question"] for row in late),
            len(late),
            ", ".join(row["question_id"] for row in late[:3]),
            ", ..." if len(late) > 3 else "",
        )
    return LongMemEvalReport(
        name=name,
        overall=mean(rows) if rows else {},
        by_type={t: mean([row for row in rows if row["question_type"] == t]) for t in types},
        counts={
            "questions": len(rows),
            "abstention": abstention,
            "no_evidence": len(questions) - abstention - with_evidence,
            "evidence_after_question": with_evidence - len(rows),
            "evidence_turns_after_question": sum(row["evidence_after_question"] for row in rows),
        }
        | {f"type_{t}": sum(row["question_type"] == t for row in rows) for t in types},
        per_question=rows,
    )


def compare_on_longmemeval(
    specs: Iterable[str], questions: Sequence[LongMemEvalQuestion], ks: Sequence[int] = LONGMEMEVAL_KS
) -> list[LongMemEvalReport]:
    """One report per ranker spec, in order; every spec is checked before any ranker is built.

    Raises ValueError when no question can be scored (all abstention or without evidence).
    """
    parsed = [parse_spec(spec) for spec in specs]
    scored = scored_questions(questions)
    if not scored:
        raise ValueError(
            f"no question can be scored: its {len(questions)} question(s) are abstention questions "
            "or have no has_answer user turn"
        )
    reports = []
    for name, kind, path in parsed:
        started = time.perf_counter()
        ranker = cache_encodings(build_ranker(kind, path), corpus_texts(scored))
        report = evaluate_longmemeval(ranker, questions, ks, name=name, progress=True)
        logger.info(
            "%s: session recall_any@5 %.3f (%.1f s)",
            name,
            report.overall.get("session_recall_any@5", 0.0),
            time.perf_counter() - started,
        )
        reports.append(report)
    return reports
