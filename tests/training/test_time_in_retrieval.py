"""Time in retrieval: what a question says about time (memnets.temporal.questions) and the `dated`
ranker that adds it to the cosine (memnets.training.retrieval.dated).

The ranker is checked with an encoder that gives every text the same vector, so that the cosine
ties and the order is the time feature's alone: a real MemoryEncoder would hide what is measured.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import torch

from memnets.temporal.questions import asks_when, dated_memory, named_range, time_features
from memnets.training.data.locomo import Conversation, Session, Turn
from memnets.training.retrieval.dated import DatedRanker
from memnets.training.retrieval.rankers import build_ranker

ASKED = date(2023, 8, 20)


def test_when_questions_are_told_from_others():
    for question in ("When did Caroline go to the support group?", "What year did Ann move?", "How long ago was it?"):
        assert asks_when(question), question
    for question in ("What does Ann eat?", "Where did Caroline move from?", "Whence came the wind?"):
        assert not asks_when(question), question


def test_a_named_time_is_the_span_of_its_dates():
    assert named_range("What did Ann do in May?", ASKED) == (date(2023, 5, 1), date(2023, 5, 31))
    assert named_range("What did Ann do last year?", ASKED) == (date(2022, 1, 1), date(2022, 12, 31))
    assert named_range("What does Ann eat?", ASKED) is None


def test_time_features_lift_dated_memories_for_when_and_memories_in_a_named_time():
    memories = [
        dated_memory("I went to the support group yesterday", date(2023, 5, 8)),  # dates its event: 7 May
        dated_memory("I love the support group", date(2023, 5, 8)),  # written in May, names no time
        dated_memory("We painted the fence last week", date(2023, 7, 3)),  # resolves to late June
    ]
    assert time_features("When did Caroline go to the support group?", ASKED, memories) == [1.0, 0.0, 1.0]
    # a named time: the resolved dates, else the day the memory was written, must fall in it
    assert time_features("What happened in May?", ASKED, memories) == [1.0, 1.0, 0.0]
    assert time_features("What does Caroline like?", ASKED, memories) == [0.0, 0.0, 0.0]


class SameVector:
    """Every text the same unit vector: cosine ties everywhere."""

    dim, tokenizer, fingerprint = 4, None, "same"

    def encode(self, texts, kind="memory", **kwargs):
        return torch.nn.functional.normalize(torch.ones(len(texts), self.dim), dim=1)


def conversation() -> Conversation:
    def turn(dia_id, text, day):
        return Turn(dia_id, "Ann", text, 1, datetime(2023, *day, tzinfo=UTC))

    sessions = (
        Session(1, datetime(2023, 5, 8, tzinfo=UTC), (turn("D1:1", "I like the lake", (5, 8)),)),
        Session(2, datetime(2023, 6, 2, tzinfo=UTC), (turn("D2:1", "We went to the lake yesterday", (6, 2)),)),
        Session(3, datetime(2023, 8, 20, tzinfo=UTC), (turn("D3:1", "The lake is cold", (8, 20)),)),
    )
    return Conversation("c", "Ann", "Bo", sessions, ())


def test_the_dated_ranker_puts_the_turn_that_dates_its_event_first_for_a_when_question():
    ranker = DatedRanker(SameVector())
    when, plain = ranker.rank(conversation(), ["When did Ann go to the lake?", "What does Ann like?"])
    assert when[0] == "D2:1"
    assert DatedRanker(SameVector(), time_weight=0).rank(conversation(), ["When did Ann go to the lake?"])[0] == plain
    assert DatedRanker(SameVector()).rank(conversation(), ["What did Ann do in August?"])[0][0] == "D3:1"


def test_dated_is_a_registered_ranker_kind(tiny_model_dir):
    assert isinstance(build_ranker("dated", str(tiny_model_dir)), DatedRanker)
