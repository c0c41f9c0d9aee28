"""A question's own date hides the memories written after it, in every evaluation.

The conversation is built so that BM25 would put the later memory first: Ann lives in Paris in
May, moves to Berlin in June, and the question "Where does Ann live now?" is asked on 15 May. Its
word "now" is only in the June turn, so over the whole conversation the June turn ranks first
(checked below); asked in May, the question must find Paris.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from memnets.llm import OpenAIChatLLM
from memnets.training.data.asked import asked_at, seen_at
from memnets.training.data.jsonl import load_jsonl
from memnets.training.data.longmemeval import load_longmemeval
from memnets.training.evaluation.answers import AnswerItem, answer_question
from memnets.training.evaluation.longmemeval import evaluate_longmemeval
from memnets.training.fake_llm import FakeChatServer
from memnets.training.retrieval.bm25 import BM25Ranker
from memnets.training.retrieval.metrics import evaluate_retriever

QUESTION = "Where does Ann live now?"
MAY = [
    ("may-1", "Ann", "I live in Paris with my cat"),
    ("may-2", "Bob", "That sounds lovely"),
    ("may-3", "Ann", "The bakery on my street is great"),
]
JUNE = [
    ("june-1", "Ann", "Now I live in Berlin, I moved last week"),
    ("june-2", "Bob", "Good luck with the move"),
]
LATE_TURN = {"june-2": "2024-06-01T10:07:00"}  # a turn's own time, after its session's start


def _turns(rows):
    return [
        {"id": dia_id, "speaker": speaker, "text": text} | ({"time": LATE_TURN[dia_id]} if dia_id in LATE_TURN else {})
        for dia_id, speaker, text in rows
    ]


def _conversation_file(tmp_path, asked: str | None):
    question = {"question": QUESTION, "evidence": ["may-1"], "category": "single-hop"}
    record = {
        "id": "ann",
        "sessions": [
            {"time": "2024-05-01T10:00:00", "turns": _turns(MAY)},
            {"time": "2024-06-01T10:00:00", "turns": _turns(JUNE)},
        ],
        "questions": [question | ({"time": asked} if asked else {})],
    }
    path = tmp_path / "ann.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return path


def test_a_question_asked_between_sessions_sees_only_the_earlier_one(tmp_path):
    (conversation,) = load_jsonl(_conversation_file(tmp_path, "2024-05-15T09:00:00"))
    item = conversation.qa[0]
    assert asked_at(conversation, item) == datetime(2024, 5, 15, 9, tzinfo=UTC)
    seen = seen_at(conversation, asked_at(conversation, item))
    assert [turn.dia_id for turn in seen.turns] == ["may-1", "may-2", "may-3"]


def test_without_a_time_a_question_follows_the_last_session_and_sees_everything(tmp_path):
    (conversation,) = load_jsonl(_conversation_file(tmp_path, None))
    item = conversation.qa[0]
    assert item.asked is None
    # after the last session: its start, or a later turn's own time (june-2, at 10:07), so every turn is seen
    assert asked_at(conversation, item) == datetime(2024, 6, 1, 10, 7, tzinfo=UTC)
    assert seen_at(conversation, asked_at(conversation, item)) is conversation  # LoCoMo's case: nothing hidden


def test_the_retrieval_evaluation_hides_the_later_memory_that_would_rank_first(tmp_path):
    (conversation,) = load_jsonl(_conversation_file(tmp_path, "2024-05-15T09:00:00"))
    assert BM25Ranker().rank(conversation, [QUESTION])[0][0] == "june-1"  # what an evaluation without dates saw

    report = evaluate_retriever(BM25Ranker(), [conversation], ks=(1, 5))
    assert report.overall["recall@1"] == 1.0

    (unasked,) = load_jsonl(_conversation_file(tmp_path, None))
    assert evaluate_retriever(BM25Ranker(), [unasked], ks=(1, 5)).overall["recall@1"] == 0.0


def _longmemeval_file(tmp_path, question_date: str):
    record = {
        "question_id": "q-ann",
        "question_type": "knowledge-update",
        "question": QUESTION,
        "answer": "Paris",
        "question_date": question_date,
        "haystack_session_ids": ["answer_may", "june"],
        "haystack_dates": ["2024/05/01 (Wed) 10:00", "2024/06/01 (Sat) 10:00"],
        "haystack_sessions": [
            [{"role": "user", "content": MAY[0][2], "has_answer": True}, {"role": "assistant", "content": "Nice"}]
            + [{"role": "user", "content": MAY[2][2]}],
            [{"role": "user", "content": JUNE[0][2]}, {"role": "assistant", "content": "Good luck"}],
        ],
        "answer_session_ids": ["answer_may"],
    }
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([record]))
    return path


def test_longmemeval_hides_the_sessions_dated_after_the_question_date(tmp_path):
    asked_in_may = load_longmemeval(_longmemeval_file(tmp_path, "2024/05/15 (Wed) 09:00"))
    report = evaluate_longmemeval(BM25Ranker(), asked_in_may, ks=(1,))
    assert report.overall["session_recall_any@1"] == 1.0

    asked_in_july = load_longmemeval(_longmemeval_file(tmp_path, "2024/07/01 (Mon) 09:00"))
    assert evaluate_longmemeval(BM25Ranker(), asked_in_july, ks=(1,)).overall["session_recall_any@1"] == 0.0


def test_the_answer_evaluation_retrieves_only_what_was_written_before_the_question(tmp_path):
    (conversation,) = load_jsonl(_conversation_file(tmp_path, "2024-05-15T09:00:00"))
    item = AnswerItem(
        id="ann/0",
        category="single-hop",
        question=QUESTION,
        gold="Paris",
        conversation=conversation,
        evidence=("may-1",),
        asked=asked_at(conversation, conversation.qa[0]),
        rule="locomo",
    )
    with FakeChatServer(respond=lambda messages: "yes") as server:
        llm = OpenAIChatLLM(server.url, "fake")
        row = answer_question(item, BM25Ranker(), llm, llm, k=5, retries=0, pause=0.0)
    assert row["retrieved"][0] == "may-1"
    assert not {"june-1", "june-2"} & set(row["retrieved"])
