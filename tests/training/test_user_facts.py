"""The everyday-chat benchmark and training conversations of data/supersession/user_facts.py: memnets' readers
accept what it writes, the evidence is the statement that answers, and a training conversation never asks one
question twice. The pairs are written here (the held-out files are not needed)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from memnets.cli import main
from memnets.training.data.formats import load_conversations
from memnets.training.data.longmemeval import load_longmemeval

ROOT = Path(__file__).resolve().parents[2]
GENERATORS = ROOT / "data" / "supersession"


def _pair(id_, domain, older, newer, label, kind, question, before, after):
    return {"id": id_, "speaker": "user", "older": older, "newer": newer, "label": label, "kind": kind,
            "domain": domain, "question": question, "answer_before": before, "answer_after": after}  # fmt: skip


LIVE = "Where does the user live?"
PAIRS = [
    _pair("P1", "home", "I live in Leeds.", "Unpacked the last box in York.", 1, "change", LIVE, "Leeds", "York"),
    _pair("P2", "home", "I live in Leeds.", "My cousin moved to Glasgow.", 0, "other_person", LIVE, "Leeds", "Leeds"),
    _pair("P3", "pets", "My cat is Miso.", "Miso napped all day.", 0, "unrelated", "Cat's name?", "Miso", "Miso"),
    _pair(
        "P4", "work", "I teach maths.", "First week as a nurse done.", 1, "change", "User's job?", "teacher", "nurse"
    ),
    _pair("P5", "home", "I rent in Bath.", "Still renting in Bath, love it.", 0, "restatement", LIVE, "Bath", "Bath"),
]


@pytest.fixture(scope="module")
def generator():
    sys.path.insert(0, str(GENERATORS))  # it imports its sibling knowledge_update.py, as when run as a script
    try:
        spec = importlib.util.spec_from_file_location("user_facts", GENERATORS / "user_facts.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(GENERATORS))


def test_each_question_has_the_answering_statement_as_its_only_evidence(generator, tmp_path):
    path = tmp_path / "uf.json"
    generator.write(generator.user_facts_benchmark(PAIRS, fillers=2, seed=0), path)
    questions = load_longmemeval(path)
    assert [q.question_id for q in questions] == [f"uf_{pair['id']}" for pair in PAIRS]
    for question, pair in zip(questions, PAIRS):
        answering = pair["newer"] if pair["label"] == 1 else pair["older"]
        texts = {turn.dia_id: turn.text for turn in question.conversation.turns}
        assert question.question_type == "single-session-user"
        assert question.answer == (pair["answer_after"] if pair["label"] == 1 else pair["answer_before"])
        assert [texts[turn] for turn in question.evidence] == [answering]
        assert len(question.session_ids) == 3
        own_domain = {text for p in PAIRS if p["domain"] == pair["domain"] for text in (p["older"], p["newer"])}
        assert not (set(texts.values()) - {answering}) & own_domain  # no statement of its own domain besides
    assert generator.user_facts_benchmark(PAIRS, fillers=2, seed=0) != generator.user_facts_benchmark(
        PAIRS, fillers=2, seed=1
    )
    report = tmp_path / "report.json"
    assert main(["eval", "retrieval", "bm25", "--data", str(path), "--json", str(report), "-q"]) == 0
    assert list(json.loads(report.read_text())["reports"][0]["by_type"]) == ["single-session-user"]


def test_training_conversations_ask_each_question_once_and_leave_others_news_unanswering(generator, tmp_path):
    conversations = generator.training_conversations(PAIRS, "train_x")
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations))
    loaded = {c.sample_id: c for c in load_conversations(path)}
    # "Where does the user live?" is asked of Leeds and of Bath: two conversations, one answer in each
    assert list(loaded) == ["train_x-1", "train_x-2"]
    for conversation in loaded.values():
        questions = [item.question for item in conversation.qa]
        assert len(questions) == len(set(questions))
    first = loaded["train_x-1"]
    texts = {turn.dia_id: turn.text for turn in first.turns}
    evidence = {item.question: {texts[turn] for turn in item.evidence} for item in first.qa}
    # the change's newer statement answers beside the older one; the cousin's move is a turn that answers nothing
    assert evidence[LIVE] == {"I live in Leeds.", "Unpacked the last box in York."}
    assert "My cousin moved to Glasgow." in texts.values()
    second = {turn.dia_id: turn.text for turn in loaded["train_x-2"].turns}
    assert {second[t] for t in loaded["train_x-2"].qa[0].evidence} == {
        "I rent in Bath.",
        "Still renting in Bath, love it.",
    }


def test_the_committed_training_file_is_the_generators_and_holds_no_held_out_text(generator):
    written = GENERATORS / "written"
    held_out = generator.held_out_texts(written)
    committed = [json.loads(line) for line in (GENERATORS / "user_facts_train.jsonl").read_text().splitlines()]
    rebuilt = [
        conversation
        for path in sorted(written.glob("train_*.jsonl"))
        for conversation in generator.training_conversations(generator.read_pairs(path), path.stem, held_out)
    ]
    assert committed == rebuilt and len(committed) > 100
    said = {generator.normalised(turn["text"]) for c in committed for s in c["sessions"] for turn in s["turns"]}
    assert not said & held_out
