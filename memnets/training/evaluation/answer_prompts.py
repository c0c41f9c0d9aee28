"""Every prompt of `memnets eval answers`: the answer prompt and the judge prompts, in one place.

The answerer sees the retrieved memories (oldest first, each with its date), the date the question
is asked, and the question. The judge follows the protocols the published tables use, asked to
reply ``yes`` or ``no`` only:

- LongMemEval (its evaluator's rules, per question type): the response must contain the correct
  answer (or every step to it); ``temporal-reasoning`` forgives an off-by-one count of days,
  weeks or months; ``knowledge-update`` accepts a response that mentions older information as
  long as it gives the updated answer; ``single-session-preference`` is judged against a rubric
  of the personalised response wanted; an abstention question (id ending ``_abs``) is correct
  when the response says the question cannot be answered from what it knows.
- LoCoMo (the LLM-judge protocol of mem0's and Zep's tables): generous on wording and length,
  correct when the response names the same thing, person, date or period as the gold answer.

:func:`parse_verdict` reads a judge's reply; anything but a leading yes or no is malformed (None).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

ANSWER_SYSTEM = (
    "You answer questions about a user from memories of your past conversations with them. "
    "Use only the memories given. Answer in a short phrase. If the memories do not hold the answer, "
    "say that you do not know."
)

_SHARED_RULE = (
    "I will give you a question, a correct answer and a model's response. Answer yes if the response "
    "contains the correct answer, or is equivalent to it, or gives every intermediate step to reach it. "
    "Answer no if the response gives only part of the information the answer needs."
)
JUDGE_RULES = {
    "single-session-user": _SHARED_RULE,
    "single-session-assistant": _SHARED_RULE,
    "multi-session": _SHARED_RULE,
    "temporal-reasoning": _SHARED_RULE
    + " Do not penalise an off-by-one error in a number of days, weeks or months: if the question asks for "
    "such a count and the response is off by one (19 days where the answer is 18), the response is correct.",
    "knowledge-update": _SHARED_RULE
    + " If the response mentions earlier information along with the updated answer, it is correct as long as "
    "the updated answer is the one given as the answer.",
    "single-session-preference": (
        "I will give you a question, a rubric of the personalised response wanted and a model's response. "
        "Answer yes if the response satisfies the rubric: it need not cover every point, but it must recall "
        "and use the user's personal information correctly. Otherwise answer no."
    ),
    "abstention": (
        "I will give you a question that cannot be answered from the conversation history, an explanation "
        "and a model's response. Answer yes if the response says the question cannot be answered: the "
        "information is missing, or only other information was given. Answer no if it gives an answer."
    ),
    "locomo": (
        "I will give you a question, a gold answer and a model's response about a conversation. Be generous: "
        "answer yes if the response refers to the same thing, person, date or period as the gold answer, "
        "even in other words, another date format or at greater length; answer no otherwise."
    ),
}
_LABELS = {"single-session-preference": "Rubric", "abstention": "Explanation", "locomo": "Gold answer"}
_VERDICT = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


def answer_prompt(question: str, memories: Sequence[tuple[datetime, str]], asked: datetime) -> str:
    """The answerer's prompt: the memories oldest first with their dates, the question's date, the question."""
    lines = [f"- [{moment:%Y-%m-%d %H:%M}] {text}" for moment, text in sorted(memories, key=lambda m: m[0])]
    listed = "\n".join(lines) if lines else "- (no memories)"
    return f"Memories:\n{listed}\n\nToday is {asked:%Y-%m-%d (%A)}.\nQuestion: {question}\nAnswer:"


def judge_prompt(rule: str, question: str, gold: str, response: str) -> str:
    """The judge's prompt under ``rule`` (a LongMemEval question type, ``abstention`` or ``locomo``)."""
    if rule not in JUDGE_RULES:
        raise ValueError(f"no judge rule {rule!r}; expected one of {sorted(JUDGE_RULES)}")
    label = _LABELS.get(rule, "Correct answer")
    return (
        f"{JUDGE_RULES[rule]}\n\nQuestion: {question}\n\n{label}: {gold}\n\nModel response: {response}\n\n"
        "Is the model response correct? Answer yes or no only."
    )


def parse_verdict(reply: str) -> bool | None:
    """True for a reply starting with yes, False for no, None for anything else (a malformed verdict)."""
    match = _VERDICT.match(reply)
    return None if match is None else match[1].lower() == "yes"
