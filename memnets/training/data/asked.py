"""When a question is asked, and the conversation as it stood then.

An evaluation must not let a question find what was said after it was asked. LongMemEval dates
each question (``question_date``); a question of the JSONL format may carry its ``time``; LoCoMo
asks every question after its conversation's last session, so there nothing is hidden.
:func:`seen_at` gives the conversation a question could have seen, and the retrieval, LongMemEval
and answer evaluations rank that instead of the whole conversation.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from memnets.timeutil import as_utc
from memnets.training.data.locomo import Conversation, QAItem


def asked_at(conversation: Conversation, item: QAItem) -> datetime:
    """When ``item`` is asked: its own time where the data gives one, else the end of the conversation
    (its last session's time, or a later turn's own time), from where it sees every turn."""
    if item.asked is not None:
        return item.asked
    times = [conversation.sessions[-1].t, *(turn.t for turn in conversation.turns)]
    return max(times, key=as_utc)


def seen_at(conversation: Conversation, asked: datetime) -> Conversation:
    """The conversation without the sessions and turns dated after ``asked``.

    The conversation itself is returned when nothing is hidden, so rankers that cache per
    conversation see the same object. Naive times are read as UTC, as everywhere in memnets.
    """
    cut = as_utc(asked, "asked")
    sessions = tuple(
        replace(session, turns=tuple(turn for turn in session.turns if as_utc(turn.t) <= cut))
        for session in conversation.sessions
        if as_utc(session.t) <= cut
    )
    if sum(len(session.turns) for session in sessions) == len(conversation.turns):
        return conversation
    return replace(conversation, sessions=sessions)
