"""Answer-level evaluation: retrieve the top k, answer with the user's model, judge the answer.

For each question (a LongMemEval question over its haystack, or a LoCoMo / JSONL question over its
conversation), a ranker of the registry (:mod:`memnets.training.retrieval.rankers`: bm25, dense, a trained
encoder, a pack) ranks the conversation's turns written by the time the question is asked
(:mod:`memnets.training.retrieval.asked`); the top k go to the answerer with the question's
date (:func:`memnets.training.evaluation.answer_prompts.answer_prompt`), and the judge compares the answer
with the gold one under the rule of the question's protocol (LongMemEval's per-type rules,
abstention, or LoCoMo's). The report gives accuracy per category beside the evidence recall@k of
the same retrieval, tokens in and out and the latency of each call, and each question's retrieved
ids, answer and verdict.

Failures do not stop the run: a call that raises :class:`memnets.llm.LLMError` (unreachable, late
past the client's timeout, an HTTP error, not a chat completion) is retried ``retries`` times with
a doubling pause; a judge reply that is neither yes nor no is asked again the same way. A question
whose answer or verdict never came is counted as not correct, with its error in its row
(``unjudged`` in the counts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from memnets.llm import LLM, ChatReply, LLMError
from memnets.training.data.asked import asked_at
from memnets.training.data.locomo import CATEGORY_NAMES, Conversation
from memnets.training.data.longmemeval import LongMemEvalQuestion
from memnets.training.evaluation.answer_prompts import ANSWER_SYSTEM, answer_prompt, judge_prompt, parse_verdict
from memnets.training.retrieval.asked import rank_as_asked
from memnets.training.retrieval.rankers import Ranker

logger = logging.getLogger(__name__)
ANSWER_TOKENS, JUDGE_TOKENS = 200, 10


@dataclass(frozen=True)
class AnswerItem:
    """One question to answer: its conversation (the corpus), gold answer, evidence, date and judge rule."""

    id: str
    category: str
    question: str
    gold: str
    conversation: Conversation
    evidence: tuple[str, ...]
    asked: datetime
    rule: str


def longmemeval_items(questions: Iterable[LongMemEvalQuestion]) -> list[AnswerItem]:
    """LongMemEval questions over their whole haystack (user and assistant turns), judged by type."""
    return [
        AnswerItem(
            id=q.question_id,
            category=q.question_type,
            question=q.question,
            gold=q.answer,
            conversation=q.conversation,
            evidence=q.evidence,
            asked=q.question_date,
            rule="abstention" if q.abstention else q.question_type,
        )
        for q in questions
    ]


def conversation_items(
    conversations: Iterable[Conversation], categories: Sequence[int] = (1, 2, 3, 4)
) -> list[AnswerItem]:
    """LoCoMo / JSONL questions in ``categories``, asked at their own time, else after the last session."""
    return [
        AnswerItem(
            id=f"{conv.sample_id}/{item.index}",
            category=CATEGORY_NAMES.get(item.category, str(item.category)),
            question=item.question,
            gold=item.answer,
            conversation=conv,
            evidence=item.evidence,
            asked=asked_at(conv, item),
            rule="locomo",
        )
        for conv in conversations
        for item in conv.qa
        if item.category in categories
    ]


@dataclass
class Call:
    """One model call after its retries: the reply (None when every attempt failed), seconds, attempts, and
    what went wrong on the way (each failed attempt's error, a malformed verdict)."""

    reply: ChatReply | None
    seconds: float
    attempts: int
    errors: list[str] = field(default_factory=list)


def call(llm: LLM, prompt: str, *, system: str | None, max_new_tokens: int, retries: int, pause: float) -> Call:
    """``llm``'s reply to ``prompt``, retried on LLMError; token counts when the LLM reports them (``chat``)."""
    started, errors = time.perf_counter(), []
    for attempt in range(1, retries + 2):
        try:
            if hasattr(llm, "chat"):
                reply = llm.chat(prompt, system=system, max_new_tokens=max_new_tokens)
            else:
                reply = ChatReply(llm.complete(prompt, system=system, max_new_tokens=max_new_tokens))
            return Call(reply, time.perf_counter() - started, attempt, errors)
        except LLMError as failure:
            errors.append(str(failure))
            logger.warning("attempt %d of %d failed: %s", attempt, retries + 1, failure)
            if attempt <= retries:
                time.sleep(pause * 2 ** (attempt - 1))
    return Call(None, time.perf_counter() - started, retries + 1, errors)


def judge(judge_llm: LLM, item: AnswerItem, answer: str, retries: int, pause: float) -> tuple[bool | None, list[Call]]:
    """The verdict on ``answer`` (None when no well-formed one came) and every judge call made for it."""
    calls = []
    for _ in range(retries + 1):
        made = call(
            judge_llm,
            judge_prompt(item.rule, item.question, item.gold, answer),
            system=None,
            max_new_tokens=JUDGE_TOKENS,
            retries=retries,
            pause=pause,
        )
        calls.append(made)
        if made.reply is None:
            return None, calls
        verdict = parse_verdict(made.reply.text)
        if verdict is not None:
            return verdict, calls
        made.errors.append(f"malformed verdict {made.reply.text[:80]!r} (expected yes or no)")
        logger.warning("%s: %s", item.id, made.errors[-1])
    return None, calls


def _tokens(calls: Sequence[Call], field_name: str) -> int | None:
    counts = [getattr(c.reply, field_name) for c in calls if c.reply is not None]
    return None if not counts or any(count is None for count in counts) else sum(counts)


def answer_question(
    item: AnswerItem, ranker: Ranker, answerer: LLM, judge_llm: LLM, k: int, retries: int, pause: float
) -> dict:
    """Retrieve, answer and judge one question; its row for the report."""
    ranked = rank_as_asked(ranker, item.conversation, [item.question], [item.asked])[0][:k]
    turns = [item.conversation.turn(dia_id) for dia_id in ranked]
    answered = call(
        answerer,
        answer_prompt(item.question, [(turn.t, turn.content) for turn in turns], item.asked),
        system=ANSWER_SYSTEM,
        max_new_tokens=ANSWER_TOKENS,
        retries=retries,
        pause=pause,
    )
    answer = None if answered.reply is None else answered.reply.text
    verdict, judged = (None, []) if answer is None else judge(judge_llm, item, answer, retries, pause)
    errors = [error for made in [answered, *judged] for error in made.errors]
    return {
        "id": item.id,
        "category": item.category,
        "rule": item.rule,
        "question": item.question,
        "gold": item.gold,
        "question_date": item.asked.isoformat(),
        "retrieved": ranked,
        "recall": len(set(item.evidence) & set(ranked)) / len(item.evidence) if item.evidence else None,
        "answer": answer,
        "verdict": verdict,
        "judge_reply": judged[-1].reply.text if judged and judged[-1].reply is not None else None,
        "tokens": {
            "answer_in": _tokens([answered], "prompt_tokens"),
            "answer_out": _tokens([answered], "completion_tokens"),
            "judge_in": _tokens(judged, "prompt_tokens"),
            "judge_out": _tokens(judged, "completion_tokens"),
        },
        "latency_s": {"answer": round(answered.seconds, 4), "judge": round(sum(c.seconds for c in judged), 4)},
        "attempts": {"answer": answered.attempts, "judge": sum(c.attempts for c in judged)},
        "errors": errors,
    }


@dataclass
class AnswerReport:
    """Accuracy, recall, tokens and latency per category and overall, with every question's row."""

    retriever: str
    k: int
    by_category: dict[str, dict]
    overall: dict
    per_question: list[dict] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        return {
            "retriever": self.retriever,
            "k": self.k,
            "overall": self.overall,
            "by_category": self.by_category,
            "questions": self.per_question,
        }


def _mean(values: Iterable) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def summary(rows: Sequence[dict]) -> dict:
    """Accuracy (correct over all questions: an unjudged one is not correct), recall@k, tokens, latency."""
    latency = [row["latency_s"]["answer"] + row["latency_s"]["judge"] for row in rows]
    return {
        "questions": len(rows),
        "correct": sum(row["verdict"] is True for row in rows),
        "unjudged": sum(row["verdict"] is None for row in rows),
        "accuracy": sum(row["verdict"] is True for row in rows) / len(rows),
        "recall": _mean(row["recall"] for row in rows),
        "answer_tokens_in": _mean(row["tokens"]["answer_in"] for row in rows),
        "answer_tokens_out": _mean(row["tokens"]["answer_out"] for row in rows),
        "judge_tokens_in": _mean(row["tokens"]["judge_in"] for row in rows),
        "judge_tokens_out": _mean(row["tokens"]["judge_out"] for row in rows),
        "latency_s_mean": float(np.mean(latency)),
        "latency_s_p95": float(np.percentile(latency, 95)),
    }


def evaluate_answers(
    items: Sequence[AnswerItem],
    ranker: Ranker,
    answerer: LLM,
    judge_llm: LLM,
    *,
    k: int = 10,
    retries: int = 2,
    pause: float = 1.0,
    name: str = "retriever",
) -> AnswerReport:
    """Answer and judge every item, one question at a time (each with its own date at hand)."""
    if not items:
        raise ValueError("no question to answer")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rows = [answer_question(item, ranker, answerer, judge_llm, k, retries, pause) for item in items]
    categories = list(dict.fromkeys(row["category"] for row in rows))
    return AnswerReport(
        retriever=name,
        k=k,
        by_category={c: summary([row for row in rows if row["category"] == c]) for c in categories},
        overall=summary(rows),
        per_question=rows,
    )
