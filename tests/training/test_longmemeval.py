"""LongMemEval: the format is read (and refused when malformed) like the others, its metrics equal hand-computed values.

tests/fixtures/tiny_longmemeval.json holds five questions built so that BM25's ranking is known by
hand: a turn scores above 0 only when it shares a query word, and turns at 0 keep the corpus'
order. The user-turn rankings are:

- q1 (single-session-user): answer_s2_1, s1_1, s1_3, s3_1 (evidence first);
- q2 (multi-session): answer_a_1, x_1, x_3, y_1, answer_b_1 (evidence 1st and 5th; sessions
  answer_a, x, x, y, answer_b);
- q3 (temporal-reasoning): p_1, answer_p_1 (evidence 2nd);
- q4_abs: an abstention question, left out; q5: its has_answer turn is the assistant's, so it has
  no user evidence and is left out.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from memnets.cli import main
from memnets.training.data.builders import build_importance_examples, build_retrieval_pairs, prepare_datasets
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import detect_format, load_conversations
from memnets.training.data.longmemeval import LongMemEvalFormatError, load_longmemeval
from memnets.training.evaluation.longmemeval import cache_encodings, corpus_texts, evaluate_longmemeval
from memnets.training.retrieval.dense import DenseRanker
from memnets.training.retrieval.longmemeval_metrics import session_metrics, turn_metrics

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_longmemeval.json"
LOG2_5 = math.log2(5)


def test_turn_metrics_follow_the_evaluator_formulas():
    ranked = ["a", "b", "c", "d", "e"]
    # evidence at places 1 and 5: DCG@5 = 1 + 1/log2(5); the ideal puts both first: 1 + 1/log2(2) = 2
    assert turn_metrics(ranked, {"a", "e"}, 1) == {"recall_any": 1.0, "recall_all": 0.0, "ndcg": 1.0}
    assert turn_metrics(ranked, {"a", "e"}, 3) == {"recall_any": 1.0, "recall_all": 0.0, "ndcg": 0.5}
    assert turn_metrics(ranked, {"a", "e"}, 5) == pytest.approx(
        {"recall_any": 1.0, "recall_all": 1.0, "ndcg": (1 + 1 / LOG2_5) / 2}
    )
    # the evaluator's DCG weighs place 2 as much as place 1 (rel_2 / log2(2)): evidence second is NDCG 1
    assert turn_metrics(ranked, {"b"}, 3)["ndcg"] == 1.0
    # third place: 1/log2(3); fourth: 1/log2(4) = 0.5
    assert turn_metrics(ranked, {"c"}, 3)["ndcg"] == pytest.approx(1 / math.log2(3))
    assert turn_metrics(ranked, {"d"}, 10) == {"recall_any": 1.0, "recall_all": 1.0, "ndcg": 0.5}
    assert turn_metrics(ranked, {"d"}, 3) == {"recall_any": 0.0, "recall_all": 0.0, "ndcg": 0.0}


def test_session_metrics_grow_k_until_it_holds_k_sessions():
    ranked = ["a_1", "a_2", "b_1", "c_1"]
    sessions = {"a_1": "a", "a_2": "a", "b_1": "b", "c_1": "c"}
    # k=2: the top 2 turns are one session, so k grows to 3 (sessions a, b): c is not in it
    assert session_metrics(ranked, sessions, {"c"}, 2) == {"recall_any": 0.0, "recall_all": 0.0, "ndcg": 0.0}
    # k=3 grows to 4 turns: c is in, at the 4th place: 1/log2(4) = 0.5 over an ideal 1
    assert session_metrics(ranked, sessions, {"c"}, 3) == {"recall_any": 1.0, "recall_all": 1.0, "ndcg": 0.5}
    # at turn level the same k=3 misses it
    assert turn_metrics(ranked, {"c_1"}, 3)["recall_any"] == 0.0
    # a relevant session's turns all count: a at places 1 and 2 is the ideal ranking
    assert session_metrics(ranked, sessions, {"a"}, 1) == {"recall_any": 1.0, "recall_all": 1.0, "ndcg": 1.0}
    # sessions a and c, k=2 grown to 3 turns (a, a, b): DCG 1 + 1 + 0; the ideal has the 3 relevant turns first
    assert session_metrics(ranked, sessions, {"a", "c"}, 2) == pytest.approx(
        {"recall_any": 1.0, "recall_all": 0.0, "ndcg": 2 / (2 + 1 / math.log2(3))}
    )
    with pytest.raises(ValueError, match="relevant must not be empty"):
        session_metrics(ranked, sessions, set(), 1)


def test_eval_retrieval_on_the_fixture_equals_the_hand_computed_values(tmp_path, capsys):
    out = tmp_path / "lme.json"
    assert main(["eval", "retrieval", "bm25", "--data", str(FIXTURE), "--json", str(out), "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # -q: errors only (bm25s had logged "Building index" at DEBUG, its own level)
    printed = " ".join(captured.out.split())
    assert "bm25 on LongMemEval: 3 questions (left out: 1 abstention, 1 without evidence)" in printed
    assert "multi-session (1)" in printed and "overall (3)" in printed
    report = json.loads(out.read_text())["reports"][0]
    assert report["counts"] == {
        "questions": 3,
        "abstention": 1,
        "no_evidence": 1,
        "evidence_after_question": 0,
        "evidence_turns_after_question": 0,
        "type_multi-session": 1,
        "type_single-session-user": 1,
        "type_temporal-reasoning": 1,
    }
    rows = {row["question_id"]: row for row in report["per_question"]}
    assert set(rows) == {"q1", "q2", "q3"} and rows["q3"]["question_date"] == "2023-05-22T09:00:00+00:00"
    q2_ndcg5 = (1 + 1 / LOG2_5) / 2
    expected = {
        "q2": {"recall_any@1": 1, "recall_all@1": 0, "ndcg@1": 1, "recall_all@3": 0, "ndcg@3": 0.5}
        | {"recall_all@5": 1, "ndcg@5": q2_ndcg5, "ndcg@50": q2_ndcg5},
        "q3": {"recall_any@1": 0, "recall_all@1": 0, "ndcg@1": 0, "recall_any@3": 1, "ndcg@3": 1, "ndcg@50": 1},
    }
    for question, values in expected.items():
        for metric, value in values.items():
            for level in ("turn", "session"):
                assert rows[question][f"{level}_{metric}"] == pytest.approx(value), (question, level, metric)
    assert all(value == 1.0 for key, value in rows["q1"].items() if "@" in key)
    overall = report["overall"]
    assert overall["turn_recall_any@1"] == pytest.approx(2 / 3) and overall["turn_recall_all@1"] == pytest.approx(1 / 3)
    assert overall["session_recall_all@3"] == pytest.approx(2 / 3)
    assert overall["session_ndcg@3"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert overall["turn_ndcg@10"] == pytest.approx((1 + q2_ndcg5 + 1) / 3)
    assert report["by_type"]["multi-session"]["session_ndcg@5"] == pytest.approx(q2_ndcg5)
    assert sorted(key.split("@")[1] for key in overall if key.startswith("turn_ndcg")) == sorted(
        ["1", "3", "5", "10", "30", "50"]
    )


def test_a_question_is_a_conversation_of_its_haystack_with_its_has_answer_user_turns_as_evidence():
    assert detect_format(FIXTURE) == "longmemeval"
    conversations = load_conversations(FIXTURE)
    assert [c.sample_id for c in conversations] == ["q1", "q2", "q3", "q4_abs", "q5"]
    q2 = conversations[1]
    assert [t.dia_id for t in q2.turns] == [
        "x_1",
        "x_2",
        "x_3",
        "answer_a_1",
        "answer_a_2",
        "y_1",
        "answer_b_1",
        "answer_b_2",
    ]
    assert q2.turn("answer_a_1").content == "user: I ran two marathons this year"
    assert q2.turn("x_2").speaker == "assistant" and q2.sessions[1].t.isoformat() == "2023-05-05T09:00:00+00:00"
    assert q2.qa[0].evidence == ("answer_a_1", "answer_b_1")
    assert conversations[3].qa[0].evidence == () and conversations[4].qa[0].evidence == ()  # abstention; assistant's
    question = load_longmemeval(FIXTURE)[1]
    assert question.question_type == "multi-session" and question.answer_session_ids == ("answer_a", "answer_b")
    assert [t.dia_id for t in question.user_turns_only().turns] == ["x_1", "x_3", "answer_a_1", "y_1", "answer_b_1"]
    assert question.turn_session["x_3"] == "x"
    assert load_conversations(FIXTURE, ["q3"])[0].sample_id == "q3"


def test_an_empty_session_is_kept_as_longmemeval_files_have_some(tmp_path):
    records = json.loads(FIXTURE.read_text())
    records[1]["haystack_sessions"][2] = []  # session y
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(records))
    q2 = load_longmemeval(path)[1]
    assert [len(s.turns) for s in q2.conversation.sessions] == [3, 2, 0, 2] and q2.evidence == (
        "answer_a_1",
        "answer_b_1",
    )


def test_training_reads_a_longmemeval_file_with_the_has_answer_turns_as_positives():
    conversations = load_conversations(FIXTURE)
    pairs = build_retrieval_pairs(conversations)
    assert sorted(zip(pairs["conv_id"], pairs["positive_id"])) == [
        ("q1", "answer_s2_1"),
        ("q2", "answer_a_1"),
        ("q2", "answer_b_1"),
        ("q3", "answer_p_1"),
    ]
    importance = build_importance_examples(conversations)
    positives = {
        (c, d) for c, d, label in zip(importance["conv_id"], importance["dia_id"], importance["label"]) if label
    }
    assert positives == {("q1", "answer_s2_1"), ("q2", "answer_a_1"), ("q2", "answer_b_1"), ("q3", "answer_p_1")}


def test_data_prepare_reads_a_longmemeval_file_named_by_a_data_config(tmp_path):
    config = tmp_path / "lme.yaml"
    splits = {"train": ["q1", "q2"], "validation": ["q3"], "test": ["q4_abs", "q5"]}
    config.write_text(yaml.safe_dump({"path": str(FIXTURE), "cache_dir": str(tmp_path / "cache"), "splits": splits}))
    assert main(["data", "prepare", "-c", str(config), "-q"]) == 0
    datasets = prepare_datasets(load_data_config(config), progress=False)
    assert sorted(datasets["retrieval"]["train"]["positive_id"]) == ["answer_a_1", "answer_b_1", "answer_s2_1"]
    assert len(datasets["retrieval"]["test"]) == 0  # abstention and assistant-evidence questions give no pair
    gate = datasets["gate"]["validation"]
    assert set(gate["conv_id"]) == {"q3"} and set(map(tuple, gate["evidence_ids"])) == {("answer_p_1",)}


class _CountingEncoder:
    """The real tiny encoder, counting the memory texts it is asked to embed."""

    def __init__(self, encoder):
        self.encoder, self.dim, self.tokenizer, self.memory_texts = encoder, encoder.dim, encoder.tokenizer, []

    @property
    def fingerprint(self):
        return self.encoder.fingerprint

    def encode(self, texts, kind="memory", **kwargs):
        if kind == "memory":
            self.memory_texts += list(texts)
        return self.encoder.encode(texts, kind=kind, **kwargs)


def test_sessions_shared_between_questions_are_embedded_once(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    questions = load_longmemeval(FIXTURE)
    plain = evaluate_longmemeval(DenseRanker(MemoryEncoder.from_pretrained(tiny_model_dir)), questions)
    counting = _CountingEncoder(MemoryEncoder.from_pretrained(tiny_model_dir))
    cached = evaluate_longmemeval(cache_encodings(DenseRanker(counting), corpus_texts(questions)), questions)
    assert len(cached.per_question) == len(plain.per_question) == 3
    for with_cache, without in zip(cached.per_question, plain.per_question):
        metrics = [key for key in without if "@" in key]
        assert [with_cache[m] for m in metrics] == pytest.approx([without[m] for m in metrics])
    # "user: The weather is cold" is in q1's and q5's haystacks; s1 and answer_s2 in q1's and q4_abs'
    distinct = {t.content for q in questions for t in q.user_turns_only().turns}
    assert sorted(counting.memory_texts) == sorted(distinct)


def _broken(change) -> Path:
    records = json.loads(FIXTURE.read_text())
    change(records)
    return records


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r[1].pop("question_date"), r"item 1 \(line \d+\), question 'q2', field question_date: missing"),
        (
            lambda r: r[0].update(question_type="trivia"),
            r"item 0 \(line 2\), question 'q1', field question_type: should be one of \[.*'knowledge-update'\], got 'trivia'",
        ),
        (
            lambda r: r[1]["haystack_sessions"][2][0].update(role="system"),
            r"question 'q2', field haystack_sessions\[2\]\[0\]\.role: should be one of \['user', 'assistant'\], got 'system'",
        ),
        (
            lambda r: r[1]["haystack_sessions"][0][1].update(has_answer="yes"),
            r"field haystack_sessions\[0\]\[1\]\.has_answer: should be true or false, got str",
        ),
        (
            lambda r: r[2]["haystack_dates"].__setitem__(1, "May 9"),
            r"question 'q3', field haystack_dates\[1\]: cannot parse date 'May 9' \(expected like '2023/05/20 \(Sat\) 02:21'\)",
        ),
        (
            lambda r: r[2]["haystack_dates"].pop(),
            r"question 'q3', field haystack_dates: has 1 entries but haystack_session_ids has 2",
        ),
        (
            lambda r: r[1]["haystack_session_ids"].__setitem__(2, "x"),
            r"question 'q2', field haystack_session_ids\[2\]: 'x' repeats haystack_session_ids\[0\]",
        ),
        (
            lambda r: r[0]["answer_session_ids"].append("s9"),
            r"question 'q1', field answer_session_ids\[1\]: names no haystack session: 's9'",
        ),
        (
            lambda r: r[3].update(question_id="q1"),
            r"item 3 \(line \d+\), question 'q1', field question_id: 'q1' repeats item 0",
        ),
        (lambda r: r[4].update(haystack_sessions=5), r"field haystack_sessions: should be a list, got int"),
        (
            lambda r: r[2].update(haystack_sessions=[[], []]),
            r"question 'q3', field haystack_sessions: no session has any turn",
        ),
        (
            lambda r: r[2]["haystack_sessions"].__setitem__(1, "turns"),
            r"question 'q3', field haystack_sessions\[1\]: should be a list of turns, got str",
        ),
        (
            lambda r: r[0]["haystack_sessions"][0][0].update(text="x"),
            r"field haystack_sessions\[0\]\[0\]: unknown key\(s\) \['text'\]",
        ),
    ],
)
def test_a_malformed_longmemeval_file_names_the_item_the_question_and_the_field(tmp_path, change, message):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(_broken(change), indent=1))
    with pytest.raises(LongMemEvalFormatError, match=rf"{re.escape(str(path))}, (.*, )?{message}"):
        load_conversations(path)


def test_eval_retrieval_on_a_malformed_longmemeval_file_exits_2_with_the_field(tmp_path, capsys):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(_broken(lambda r: r[1].pop("question")), indent=1))
    assert main(["eval", "retrieval", "bm25", "--data", str(path)]) == 2
    assert "item 1 (line" in (err := capsys.readouterr().err) and "question 'q2', field question: missing" in err
    assert err.count("\n") == 1 and err.startswith("memnets eval retrieval: error: ")  # one line (docs/cli.md)
    path.write_text("[\n" + FIXTURE.read_text().strip()[1:-1] + ",\n]")  # a trailing comma: not JSON
    with pytest.raises(LongMemEvalFormatError, match="not valid JSON"):
        load_longmemeval(path)


def test_a_longmemeval_file_is_told_by_its_first_item_however_long(tmp_path, tiny_locomo_path, capsys):
    records = json.loads(FIXTURE.read_text())
    records[0]["haystack_sessions"][0][0]["content"] = "word " * 100_000  # 500 kB: past the first read
    path = tmp_path / "long.json"
    path.write_text(json.dumps(records))
    assert detect_format(path) == "longmemeval" and detect_format(tiny_locomo_path) == "locomo"
    assert main(["eval", "retrieval", "bm25", "--data", str(FIXTURE), "--split", "test"]) == 2
    assert "is a LongMemEval file, whose every question is evaluated; it has no splits" in capsys.readouterr().err


def test_a_file_of_only_abstention_questions_has_nothing_to_score(tmp_path, capsys):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([q for q in json.loads(FIXTURE.read_text()) if q["question_id"] in {"q4_abs", "q5"}]))
    assert main(["eval", "retrieval", "bm25", "--data", str(path)]) == 1
    assert "no question can be scored: its 2 question(s) are abstention questions" in capsys.readouterr().err


def test_a_question_asked_before_all_its_evidence_is_left_out_and_counted(tmp_path, capsys, caplog):
    """Its evidence is hidden from it (what was said after a question is), so it cannot be scored: it had
    counted as scored with 0 at every k, halving the figures with nothing said."""
    questions = json.loads(FIXTURE.read_text())
    moved = next(q for q in questions if q["question_id"] == "q2")
    moved["question_date"] = "2023/01/01 (Sun) 09:00"  # before every session of its haystack
    path, out = tmp_path / "lme.json", tmp_path / "report.json"
    path.write_text(json.dumps(questions))
    assert main(["eval", "retrieval", "bm25", "--data", str(path), "--json", str(out)]) == 0
    report = json.loads(out.read_text())["reports"][0]
    assert report["counts"]["questions"] == 2 and report["counts"]["evidence_after_question"] == 1
    assert {row["question_id"] for row in report["per_question"]} == {"q1", "q3"}
    printed = " ".join(capsys.readouterr().out.split())
    assert "2 questions (left out: 1 abstention, 1 without evidence, 1 with evidence after the question)" in printed
    assert "all their evidence is dated after their question_date" in caplog.text


def test_evidence_dated_after_its_question_is_left_out_of_its_evidence(tmp_path, caplog):
    """q2's two evidence turns, the question asked between them: scored on the first (the second is hidden from
    the ranking), counted and warned; it had been counted as evidence, recall could not reach 1 while nDCG did."""
    questions = json.loads(FIXTURE.read_text())
    asked = next(q for q in questions if q["question_id"] == "q2")
    asked["question_date"] = "2023/05/06 (Sat) 09:00"  # after answer_a (05/05), before answer_b (05/07)
    path, out = tmp_path / "lme.json", tmp_path / "report.json"
    path.write_text(json.dumps(questions))
    assert main(["eval", "retrieval", "bm25", "--data", str(path), "--json", str(out)]) == 0
    report = json.loads(out.read_text())["reports"][0]
    row = next(row for row in report["per_question"] if row["question_id"] == "q2")
    assert len(row["evidence"]) == 1 and row["evidence_after_question"] == 1
    assert row["turn_recall_all@50"] == 1.0 and report["counts"]["evidence_turns_after_question"] == 1
    assert "1 evidence turn(s) of 1 question(s) dated after their question_date left out" in caplog.text


def test_a_json_folder_or_bad_categories_are_usage_errors_before_the_run(tmp_path, capsys):
    """Refused as the options are parsed, naming them: a --json folder had failed after the whole evaluation."""
    assert main(["eval", "retrieval", "bm25", "--data", str(FIXTURE), "--json", str(tmp_path)]) == 2
    assert f"argument --json: {tmp_path} is a folder" in capsys.readouterr().err
    assert main(["eval", "retrieval", "bm25", "--data", str(FIXTURE), "--categories", "x"]) == 2
    assert "argument --categories: expected comma-separated integers" in capsys.readouterr().err
