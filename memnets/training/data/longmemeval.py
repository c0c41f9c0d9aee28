"""Reader for LongMemEval (Wu et al., ICLR 2025): one question over its own haystack of chat sessions.

A LongMemEval file is a JSON list of questions, each carrying the sessions it is asked over::

    [{"question_id": "q1", "question_type": "knowledge-update", "question": "Where do I work now?",
      "answer": "the bakery", "question_date": "2023/05/30 (Tue) 10:00",
      "haystack_session_ids": ["s7", "answer_s9"], "haystack_dates": ["2023/05/01 (Mon) 09:00", ...],
      "haystack_sessions": [[{"role": "user", "content": "...", "has_answer": true}, ...], ...],
      "answer_session_ids": ["answer_s9"]}]

Each question becomes a :class:`LongMemEvalQuestion` holding a :class:`~memnets.training.data.locomo.Conversation`
of its haystack (sample id = question id), so every command that reads conversations reads it:
turn ids are ``{session_id}_{n}`` (n counts the session's turns from 1, as LongMemEval's
retrieval corpus names them), the speaker is the role, and the question's evidence is its
``has_answer`` user turns (the training labels and the turn-level retrieval target). Abstention
questions (the id ends in ``_abs``) have no evidence: they are left out of retrieval metrics.

A malformed file raises :class:`LongMemEvalFormatError` naming the file, the item and its line,
the question and the field (e.g. ``haystack_sessions[3][1].role``), as the other readers do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path

from memnets.text import lone_surrogate
from memnets.timeutil import as_utc
from memnets.training.data.locomo import (
    Conversation,
    DataFormatError,
    LocomoFormatError,
    QAItem,
    Session,
    Turn,
    _samples_with_lines,
)

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # "2023/05/20 (Sat) 02:21"
ABSTENTION_SUFFIX = "_abs"
QUESTION_CATEGORY = 4  # LoCoMo's single-hop: the category a LongMemEval question has among LoCoMo's
ROLES = ("user", "assistant")
_REQUIRED = {
    "question_id": str,
    "question_type": str,
    "question": str,
    "answer": (str, int, float),
    "question_date": str,
    "haystack_session_ids": list,
    "haystack_dates": list,
    "haystack_sessions": list,
    "answer_session_ids": list,
}
FIRST_KEY = "question_id"  # a JSON list whose first item has this key is LongMemEval (formats.py)


class LongMemEvalFormatError(DataFormatError):
    """A LongMemEval file that does not follow the format; the message names file, item, question and field."""


@dataclass(frozen=True)
class LongMemEvalQuestion:
    """One LongMemEval question and its haystack as a conversation."""

    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: datetime
    conversation: Conversation
    session_ids: tuple[str, ...]  # the haystack's, in the file's order: session number n is session_ids[n - 1]
    answer_session_ids: tuple[str, ...]

    @property
    def abstention(self) -> bool:
        """An unanswerable question (id ending in ``_abs``): judged on abstaining, not in retrieval metrics."""
        return self.question_id.endswith(ABSTENTION_SUFFIX)

    @property
    def evidence(self) -> tuple[str, ...]:
        """The turn ids of its ``has_answer`` user turns (none for an abstention question)."""
        return self.conversation.qa[0].evidence

    @cached_property
    def turn_session(self) -> dict[str, str]:
        """Turn id -> the id of the haystack session holding it."""
        return {turn.dia_id: self.session_ids[turn.session - 1] for turn in self.conversation.turns}

    def user_turns_only(self) -> Conversation:
        """The haystack with its user turns only: LongMemEval's retrieval corpus."""
        sessions = tuple(
            replace(session, turns=tuple(turn for turn in session.turns if turn.speaker == "user"))
            for session in self.conversation.sessions
        )
        return replace(self.conversation, sessions=sessions)


class _Item:
    """Error context of one question: ``fail(field, problem)`` raises with file, item, line and question."""

    def __init__(self, path: Path, index: int, line: int):
        self.where, self.question_id = f"{path}, item {index} (line {line})", None

    def fail(self, field: str, problem: str):
        question = f", question {self.question_id!r}" if self.question_id else ""
        raise LongMemEvalFormatError(f"{self.where}{question}, field {field}: {problem}")

    def text(self, value, field: str) -> str:
        if not isinstance(value, str):
            self.fail(field, f"should be a string, got {_type(value)}")
        surrogate = lone_surrogate(value)
        if surrogate is not None:
            self.fail(field, f"holds a lone surrogate at position {surrogate}")
        return value

    def date(self, value, field: str) -> datetime:
        value = self.text(value, field)
        try:
            return as_utc(datetime.strptime(value.strip(), DATE_FORMAT))
        except ValueError:
            self.fail(field, f"cannot parse date {value!r} (expected like '2023/05/20 (Sat) 02:21')")


def _type(value) -> str:
    return "null" if value is None else type(value).__name__


def parse_question(record, item: _Item) -> LongMemEvalQuestion:
    """One decoded list item -> LongMemEvalQuestion; ``item`` names file, item and line in errors."""
    if not isinstance(record, dict):
        item.fail("(the item)", f"expected a JSON object, got {_type(record)}")
    for key, kind in _REQUIRED.items():  # question_id first: later errors name the question
        if key not in record:
            item.fail(key, "missing")
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            expected = "a string or a number" if key == "answer" else f"a {kind.__name__}"
            item.fail(key, f"should be {expected}, got {_type(record[key])}")
        if key == "question_id":
            item.question_id = item.text(record["question_id"], "question_id")
    question_type = item.text(record["question_type"], "question_type")
    if question_type not in QUESTION_TYPES:
        item.fail("question_type", f"should be one of {list(QUESTION_TYPES)}, got {question_type!r}")
    session_ids = [
        item.text(value, f"haystack_session_ids[{s}]") for s, value in enumerate(record["haystack_session_ids"])
    ]
    dates, raw_sessions = record["haystack_dates"], record["haystack_sessions"]
    if not session_ids:
        item.fail("haystack_sessions", "must hold at least one session")
    for key, values in (("haystack_dates", dates), ("haystack_sessions", raw_sessions)):
        if len(values) != len(session_ids):
            item.fail(key, f"has {len(values)} entries but haystack_session_ids has {len(session_ids)}")
    sessions, seen, evidence = [], {}, []
    for s, (session_id, raw_session) in enumerate(zip(session_ids, raw_sessions)):
        if session_id in seen:
            item.fail(f"haystack_session_ids[{s}]", f"{session_id!r} repeats haystack_session_ids[{seen[session_id]}]")
        seen[session_id] = s
        t = item.date(dates[s], f"haystack_dates[{s}]")
        if not isinstance(raw_session, list):  # an empty one is kept: LongMemEval's own files have a few
            item.fail(f"haystack_sessions[{s}]", f"should be a list of turns, got {_type(raw_session)}")
        turns = []
        for k, raw_turn in enumerate(raw_session):
            where = f"haystack_sessions[{s}][{k}]"
            if not isinstance(raw_turn, dict):
                item.fail(where, f"expected a turn object {{role, content}}, got {_type(raw_turn)}")
            unknown = sorted(raw_turn.keys() - {"role", "content", "has_answer"})
            if unknown:
                item.fail(where, f"unknown key(s) {unknown}; a turn has ['content', 'has_answer', 'role']")
            for key in ("role", "content"):
                if key not in raw_turn:
                    item.fail(f"{where}.{key}", "missing")
            role = item.text(raw_turn["role"], f"{where}.role")
            if role not in ROLES:
                item.fail(f"{where}.role", f"should be one of {list(ROLES)}, got {role!r}")
            has_answer = raw_turn.get("has_answer", False)
            if not isinstance(has_answer, bool):
                item.fail(f"{where}.has_answer", f"should be true or false, got {_type(has_answer)}")
            turn = Turn(
                dia_id=f"{session_id}_{k + 1}",
                speaker=role,
                text=item.text(raw_turn["content"], f"{where}.content"),
                session=s + 1,
                t=t,
            )
            turns.append(turn)
            if has_answer and role == "user":
                evidence.append(turn.dia_id)
        sessions.append(Session(number=s + 1, t=t, turns=tuple(turns)))
    if not any(session.turns for session in sessions):
        item.fail("haystack_sessions", "no session has any turn")
    answer_sessions = []
    for a, value in enumerate(record["answer_session_ids"]):
        if item.text(value, f"answer_session_ids[{a}]") not in seen:
            item.fail(f"answer_session_ids[{a}]", f"names no haystack session: {value!r}")
        answer_sessions.append(value)
    abstention = item.question_id.endswith(ABSTENTION_SUFFIX)
    qa = QAItem(
        index=0,
        question=item.text(record["question"], "question"),
        answer=str(record["answer"]),
        category=QUESTION_CATEGORY,
        evidence=() if abstention else tuple(evidence),
    )
    conversation = Conversation(
        sample_id=item.question_id, speaker_a="user", speaker_b="assistant", sessions=tuple(sessions), qa=(qa,)
    )
    return LongMemEvalQuestion(
        question_id=item.question_id,
        question_type=question_type,
        question=qa.question,
        answer=qa.answer,
        question_date=item.date(record["question_date"], "question_date"),
        conversation=conversation,
        session_ids=tuple(session_ids),
        answer_session_ids=tuple(dict.fromkeys(answer_sessions)),
    )


def load_longmemeval(path: str | Path) -> list[LongMemEvalQuestion]:
    """Read a LongMemEval JSON file, questions in the file's order.

    Raises FileNotFoundError for a missing file and :class:`LongMemEvalFormatError` for bad JSON, a
    repeated question id or a malformed question.
    """
    path = Path(path)
    try:
        items = _samples_with_lines(path.read_text(encoding="utf-8"), path)
    except LocomoFormatError as error:  # the JSON list reader is LoCoMo's; the error is this format's
        raise LongMemEvalFormatError(str(error)) from None
    if not items:
        raise LongMemEvalFormatError(f"{path}: the list holds no question")
    questions, seen = [], {}
    for index, (record, line) in enumerate(items):
        item = _Item(path, index, line)
        question = parse_question(record, item)
        if question.question_id in seen:
            item.fail("question_id", f"{question.question_id!r} repeats item {seen[question.question_id]}")
        seen[question.question_id] = index
        questions.append(question)
    return questions


def first_item_keys(path: Path, chunk: int = 1 << 16) -> set[str]:
    """The keys of the first object of a JSON list file, read only as far as that object ends.

    An empty set when the file does not open with a JSON list of objects (the caller's reader then
    reports what is wrong).
    """
    decoder, text = json.JSONDecoder(), ""
    with path.open(encoding="utf-8") as handle:
        while block := handle.read(chunk):
            text += block
            opening = text.find("{", max(text.find("["), 0))
            if opening < 0:
                continue
            try:
                first, _ = decoder.raw_decode(text, opening)
            except (json.JSONDecodeError, RecursionError):
                chunk *= 2  # doubling keeps the repeated decoding linear in the first item's size
                continue
            return set(first) if isinstance(first, dict) else set()
    return set()
