"""The ranker kind ``memory[:PACK]`` (memnets.training.evaluation.memory_ranker): a conversation written into a fresh
memory through the write path and ranked by its search.

On the tiny random encoder (tests/conftest.py) with a test judge of its own, a LongMemEval-format
question about a changed fact: "I live in Leeds." (older), later "We moved to York in March." (newer,
the evidence). Plain cosine ranks the stale statement above the newer one for "Where does the user
live?" (checked here, so the test means what it says); the memory ranks the newer one above when the
judge ends the older one, and keeps the cosine order when it does not. The file also holds a repeated
statement (the write path merges it: "unchanged") and an empty turn (never written), which still
appear, once each, in every ranking.
"""

from __future__ import annotations

import json

import pytest

from memnets.cli import main
from memnets.training.data.locomo import load_locomo
from memnets.training.data.longmemeval import load_longmemeval
from memnets.training.evaluation.longmemeval import rank_question
from memnets.training.evaluation.memory_ranker import MemoryRanker, message
from memnets.training.retrieval.dense import DenseRanker
from memnets.training.retrieval.rankers import build_ranker, parse_spec

OLDER, NEWER = "I live in Leeds.", "We moved to York in March."
REPEATED = "Can you recommend a film for tonight?"
SESSIONS = [  # (date, [(role, content, has_answer)])
    ("2023/03/01 (Wed) 09:00", [("user", OLDER, False), ("assistant", "Noted.", False)]),
    (
        "2023/03/08 (Wed) 09:00",
        [("user", REPEATED, False), ("assistant", "Try Paddington.", False), ("user", "", False)],
    ),
    ("2023/03/15 (Wed) 09:00", [("user", "How many cups are in a litre?", False), ("user", REPEATED, False)]),
    ("2023/04/02 (Sun) 09:00", [("user", NEWER, True), ("assistant", "Congratulations!", False)]),
]


class LeedsToYork:
    """A test judge: the newer text ends the older one when the older says Leeds and the newer York."""

    threshold = 0.5

    def __init__(self):
        self.asked: list[tuple[str, str]] = []

    def score(self, older: str, newer: str) -> float:
        self.asked.append((older, newer))
        return 1.0 if "Leeds" in older and "York" in newer else 0.0


class Never:
    """A test judge that ends nothing."""

    threshold = 0.5

    def score(self, older: str, newer: str) -> float:
        return 0.0


@pytest.fixture(scope="module")
def changed_fact(tmp_path_factory):
    """The LongMemEval-format file of the module docstring: one knowledge-update question."""
    ids = [f"s{n}" for n in range(1, len(SESSIONS))] + ["answer_s4"]
    question = {
        "question_id": "ku_1",
        "question_type": "knowledge-update",
        "question": "Where does the user live?",
        "answer": "York",
        "question_date": "2023/05/01 (Mon) 09:00",
        "haystack_session_ids": ids,
        "haystack_dates": [date for date, _ in SESSIONS],
        "haystack_sessions": [
            [{"role": role, "content": content, "has_answer": answer} for role, content, answer in turns]
            for _, turns in SESSIONS
        ],
        "answer_session_ids": ["answer_s4"],
    }
    path = tmp_path_factory.mktemp("memory_ranker") / "changed_fact.json"
    path.write_text(json.dumps([question]))
    return path


@pytest.fixture(scope="module")
def pack(encoder, tmp_path_factory):
    """A pack of the tiny encoder alone (no supersession head: "auto" is the default judge)."""
    from memnets.pack import export_pack

    return export_pack(tmp_path_factory.mktemp("pack") / "pack", encoder)


def _turn_of(question, text: str) -> str:
    (dia_id,) = [turn.dia_id for turn in question.user_turns_only().turns if turn.text == text]
    return dia_id


def test_the_newer_fact_ranks_above_the_older_when_the_judge_ends_it(changed_fact, encoder):
    (question,) = load_longmemeval(changed_fact)
    older, newer = _turn_of(question, OLDER), _turn_of(question, NEWER)
    assert question.evidence == (newer,)
    dense = rank_question(DenseRanker(encoder), question)
    assert dense.index(older) < dense.index(newer)  # the stale turn first: what the memory should undo

    judge = LeedsToYork()
    ended = rank_question(MemoryRanker(encoder=encoder, judge=judge), question)
    assert (OLDER, NEWER) in judge.asked  # the texts as said: the speaker is a field
    assert ended.index(newer) < ended.index(older)

    kept = rank_question(MemoryRanker(encoder=encoder, judge=Never()), question)
    assert kept.index(older) < kept.index(newer)


@pytest.mark.parametrize("judge", [LeedsToYork(), Never(), "auto"], ids=["ends", "never", "auto"])
def test_every_turn_is_ranked_once_merged_and_unwritten_ones_too(changed_fact, encoder, judge):
    (question,) = load_longmemeval(changed_fact)
    conversation = question.conversation  # the assistant turns too: written with role "assistant"
    queries = [question.question, REPEATED, "Congratulations!"]
    rankings = MemoryRanker(encoder=encoder, judge=judge).rank(conversation, queries)
    dia_ids = [turn.dia_id for turn in conversation.turns]
    assert len(rankings) == len(queries)
    for ranking in rankings:
        assert sorted(ranking) == sorted(dia_ids)
    first, again = [turn.dia_id for turn in conversation.turns if turn.text == REPEATED]
    (empty,) = [turn.dia_id for turn in conversation.turns if not turn.text]
    for ranking in rankings:  # the repeat was merged into the first saying: it sits right after it
        assert ranking.index(again) == ranking.index(first) + 1
        assert ranking[-1] == empty  # never written: after every turn the search returned


def test_every_turn_of_a_locomo_conversation_is_ranked_once(tiny_locomo_path, encoder):
    ranker = MemoryRanker(encoder=encoder, judge=LeedsToYork())
    for conversation in load_locomo(tiny_locomo_path):
        queries = [item.question for item in conversation.qa]
        dia_ids = sorted(turn.dia_id for turn in conversation.turns)
        assert [sorted(ranking) for ranking in ranker.rank(conversation, queries)] == [dia_ids] * len(queries)


def test_a_turn_is_a_message_of_its_speaker_at_its_time(changed_fact, tiny_locomo_path):
    (question,) = load_longmemeval(changed_fact)
    user, assistant = question.conversation.sessions[0].turns
    assert message(user) == {"role": "user", "name": "user", "content": OLDER, "time": user.t}
    assert message(assistant)["role"] == "assistant"
    photo = next(turn for turn in load_locomo(tiny_locomo_path)[0].turns if turn.image_caption)
    assert message(photo) == {"role": "user", "name": photo.speaker, "content": photo.said, "time": photo.t}
    assert photo.image_caption in message(photo)["content"]


def test_the_memory_kind_takes_a_pack_from_its_spec(pack, encoder):
    assert parse_spec(f"memory:{pack}") == (f"memory:{pack}", "memory", str(pack))
    ranker = build_ranker("memory", str(pack))
    assert isinstance(ranker, MemoryRanker) and ranker.pack.path == pack and ranker.judge == "auto"
    with pytest.raises(ValueError, match="pack or encoder, not both"):
        MemoryRanker(pack, encoder=encoder)


@pytest.mark.parametrize("data", ["changed_fact", "tiny_locomo_path"])
def test_eval_retrieval_runs_the_memory_kind_on_both_formats(request, data, pack, tiny_model_dir, tmp_path):
    path, out = request.getfixturevalue(data), tmp_path / "report.json"
    argv = ["eval", "retrieval", f"dense:{tiny_model_dir}", f"memory:{pack}", "--data", str(path), "--json", str(out)]
    assert main([*argv, "-q"]) == 0
    reports = json.loads(out.read_text())["reports"]
    assert [report["name"] for report in reports] == [f"dense:{tiny_model_dir}", f"memory:{pack}"]
    assert reports[1]["counts"]["questions"] == reports[0]["counts"]["questions"] > 0
