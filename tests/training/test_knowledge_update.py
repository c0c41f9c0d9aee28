"""The knowledge-update benchmark of data/supersession/knowledge_update.py: memnets' LongMemEval reader
accepts what it writes, and the evidence is the newer statement's session, never the older one's.

The pairs are written here (three domains, a change and a look-alike each), so the test needs none
of the held-out files; the LoCoMo case uses tests/fixtures/tiny_locomo.json.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from memnets.cli import main
from memnets.training.data.locomo import load_locomo
from memnets.training.data.longmemeval import load_longmemeval

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _pair(id_, domain, older, newer, label, question, after):
    return {"id": id_, "speaker": "user", "older": older, "newer": newer, "label": label, "kind": "change",
            "domain": domain, "question": question, "answer_before": "-", "answer_after": after, "split": "test"}  # fmt: skip


PAIRS = [
    _pair("P1", "home", "I live in Leeds.", "Unpacked the last box in York.", 1, "Where does the user live?", "York"),
    _pair("P2", "home", "I live in Leeds.", "Leeds was sunny today.", 0, "Where does the user live?", "Leeds"),
    _pair("P3", "pets", "My cat is called Miso.", "Miso and I walked past a cat cafe.", 0, "Cat's name?", "Miso"),
    _pair("P4", "pets", "I have a cat.", "We rehomed the cat; it's a dog house now.", 1, "Which pet?", "a dog"),
    _pair("P5", "work", "I teach maths.", "First week as a nurse done.", 1, "What is the user's job?", "nurse"),
    _pair("P6", "work", "I teach maths.", "My colleague teaches maths too.", 0, "What is the user's job?", "teacher"),
]


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("knowledge_update", ROOT / "data/supersession/knowledge_update.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _written(generator, tmp_path, fillers=3):
    path = tmp_path / "ku.json"
    generator.write(generator.written_benchmark(PAIRS, fillers=fillers, seed=0), path)
    return path


def test_every_change_is_one_question_whose_evidence_is_the_newer_session(generator, tmp_path):
    questions = load_longmemeval(_written(generator, tmp_path))
    changes = [pair for pair in PAIRS if pair["label"] == 1]
    assert [q.question_id for q in questions] == [f"ku_{pair['id']}" for pair in changes]
    for question, pair in zip(questions, changes):
        assert question.question_type == "knowledge-update"
        assert (question.question, question.answer) == (pair["question"], pair["answer_after"])
        assert question.answer_session_ids == (f"answer_{pair['id']}",)
        assert len(question.session_ids) == 3 + 2
        texts = {turn.dia_id: turn.text for turn in question.conversation.turns}
        assert [texts[turn] for turn in question.evidence] == [pair["newer"]]
        assert {question.turn_session[turn] for turn in question.evidence} == {f"answer_{pair['id']}"}
        older = question.session_ids.index(f"older_{pair['id']}")
        answer = question.session_ids.index(f"answer_{pair['id']}")
        sessions = question.conversation.sessions
        assert sessions[older].turns[0].text == pair["older"]
        assert older < answer - 1  # a filler between the two
        assert [s.t for s in sessions] == sorted(s.t for s in sessions)
        assert question.question_date > sessions[-1].t
        # fillers hold statements of other domains only
        own_domain = {text for p in PAIRS if p["domain"] == pair["domain"] for text in (p["older"], p["newer"])}
        filler_texts = {
            turn.text for s, sid in zip(sessions, question.session_ids) if sid.startswith("filler_") for turn in s.turns
        }
        assert not filler_texts & own_domain
        assert filler_texts & {text for p in PAIRS for text in (p["older"], p["newer"])}


def test_the_file_is_the_same_for_the_same_seed(generator):
    assert generator.written_benchmark(PAIRS, seed=0, fillers=3) == generator.written_benchmark(
        PAIRS, seed=0, fillers=3
    )
    assert generator.written_benchmark(PAIRS, seed=0, fillers=3) != generator.written_benchmark(
        PAIRS, seed=1, fillers=3
    )


def test_eval_retrieval_reports_it_as_knowledge_update(generator, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert (
        main(["eval", "retrieval", "bm25", "--data", str(_written(generator, tmp_path)), "--json", str(out), "-q"]) == 0
    )
    report = json.loads(out.read_text())["reports"][0]
    assert list(report["by_type"]) == ["knowledge-update"] and report["counts"]["questions"] == 3


def test_a_locomo_pair_keeps_its_two_real_sessions_and_marks_the_newer_turn(generator, tmp_path):
    pair = {"conversation": "tiny-1", "split": "test", "speaker": "Ann", "older_dia_id": "D1:3", "newer_dia_id": "D2:3",
            "older": "He is a beagle.", "newer": "I am moving to Lisbon in August.", "label": 1,
            "question": "Where is Ann moving?", "answer_after": "Lisbon"}  # fmt: skip
    path = tmp_path / "locomo_ku.json"
    generator.write(
        generator.locomo_benchmark([pair, pair | {"label": 0}], load_locomo(FIXTURES / "tiny_locomo.json")), path
    )
    (question,) = load_longmemeval(path)
    assert question.session_ids == ("older_D1", "answer_D2") and question.answer_session_ids == ("answer_D2",)
    assert [s.t.strftime("%Y-%m-%d %H:%M") for s in question.conversation.sessions] == [
        "2023-05-08 13:56",
        "2023-06-20 10:00",
    ]
    assert question.evidence == ("answer_D2_3",)
    # Ann is the user, Bob the assistant; the photo's caption stays with its turn
    user = [turn.text for turn in question.user_turns_only().turns]
    assert user[:2] == [
        "I adopted a puppy named Rex yesterday.",
        "He is a beagle. [shares a photo of a small dog on a couch]",
    ]
    assert len(user) == 4
    with pytest.raises(ValueError, match="not the pair's statement"):
        generator.locomo_benchmark([pair | {"newer": "something else"}], load_locomo(FIXTURES / "tiny_locomo.json"))
