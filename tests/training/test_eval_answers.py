"""`memnets eval answers` against a local OpenAI-compatible server with scripted answers (127.0.0.1, no network).

The server answers the answering prompt from a script keyed by the question, and judges as a
strict model would (yes when the response contains the gold answer; for an abstention question,
when it says it does not know). The script also fails on purpose: an HTTP 500, an answer later
than the client's timeout and a malformed verdict, each once, so the retries are seen in the JSON.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from memnets.cli import main
from memnets.training.evaluation.answer_prompts import judge_prompt, parse_verdict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LONGMEMEVAL = FIXTURES / "tiny_longmemeval.json"
ANSWERS = {  # question -> (the model's answer, what goes wrong on the first attempt)
    "Which bakery did I join?": ("You joined the bakery downtown.", None),
    "How many marathons and triathlons did I run?": ("Two marathons.", "late"),
    "When did I adopt the puppy?": ("On May 3.", "http500"),
    "Where does my brother work now?": ("I do not know; you never said.", None),
    "What soup did you recommend?": ("Lentil soup.", "malformed verdict"),
}


class _ScriptedModel(BaseHTTPRequestHandler):
    requests: ClassVar[list] = []
    failed: ClassVar[set] = set()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        type(self).requests.append(prompt)
        if prompt.startswith("Memories:"):
            question = re.search(r"Question: (.*)\n", prompt)[1]
            reply, trouble = ANSWERS.get(question, ("I do not know.", None))
        else:
            question = re.search(r"Question: (.*)\n", prompt)[1]
            gold = re.search(r"(?:Correct answer|Rubric|Explanation|Gold answer): (.*)\n", prompt)[1]
            response = re.search(r"Model response: (.*)\n", prompt)[1]
            abstention = "cannot be answered" in prompt
            correct = "do not know" in response if abstention else gold.lower() in response.lower()
            reply = "yes" if correct else "no"
            trouble = "malformed" if ANSWERS.get(question, ("", ""))[1] == "malformed verdict" else None
        key = (trouble, question)
        if trouble and key not in type(self).failed:
            type(self).failed.add(key)
            if trouble == "http500":
                return self._send(500, {"error": "overloaded"})
            if trouble == "late":
                time.sleep(1.5)  # past the client's --timeout 0.5
            if trouble == "malformed":
                reply = "Maybe, it depends."
        words = sum(len(m["content"].split()) for m in body["messages"])
        self._send(
            200,
            {
                "choices": [{"message": {"content": reply}}],
                "usage": {"prompt_tokens": words, "completion_tokens": len(reply.split())},
            },
        )

    def _send(self, status: int, payload: dict):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (the late answer)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture()
def model_server():
    _ScriptedModel.requests, _ScriptedModel.failed = [], set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _words(text: str) -> int:
    return len(text.split())


def test_eval_answers_on_longmemeval_writes_every_question_and_the_table(model_server, tmp_path, capsys):
    out = tmp_path / "answers.json"
    argv = ["eval", "answers", "--data", str(LONGMEMEVAL), "--llm", model_server, "-k", "2", "--timeout", "0.5"]
    assert main([*argv, "--json", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "answers with bm25 (top 2)" in printed and "overall" in printed and "multi-session" in printed
    payload = json.loads(out.read_text())
    rows = {row["id"]: row for row in payload["questions"]}
    assert {q: row["verdict"] for q, row in rows.items()} == {
        "q1": True,
        "q2": False,  # "Two marathons." lacks the triathlon
        "q3": True,
        "q4_abs": True,  # abstention: saying it does not know is correct
        "q5": True,
    }
    # bm25 over each haystack's turns: the evidence found in the top 2, as the docstring of the fixture's test says
    assert rows["q1"]["retrieved"] == ["answer_s2_1", "s1_1"] and rows["q1"]["recall"] == 1.0
    assert rows["q2"]["retrieved"] == ["answer_a_1", "x_1"] and rows["q2"]["recall"] == 0.5
    assert rows["q3"]["retrieved"] == ["p_1", "answer_p_1"] and rows["q3"]["recall"] == 1.0
    assert rows["q4_abs"]["recall"] is None and rows["q5"]["recall"] is None  # no user evidence
    assert rows["q4_abs"]["rule"] == "abstention" and rows["q3"]["rule"] == "temporal-reasoning"
    # the failures were retried: an HTTP 500 (q3), an answer past the timeout (q2), a malformed verdict (q5)
    assert rows["q3"]["attempts"] == {"answer": 2, "judge": 1} and "HTTP 500" in rows["q3"]["errors"][0]
    assert rows["q2"]["attempts"]["answer"] == 2 and "did not answer within 0.5 s" in rows["q2"]["errors"][0]
    assert rows["q5"]["attempts"]["judge"] == 2 and "malformed verdict 'Maybe, it depends.'" in rows["q5"]["errors"][0]
    assert rows["q1"]["errors"] == [] and rows["q1"]["answer"] == "You joined the bakery downtown."
    # tokens are the server's usage counts: the answer prompt's words in, the reply's words out
    answer_prompt = next(p for p in _ScriptedModel.requests if p.startswith("Memories:") and "bakery did I" in p)
    assert rows["q1"]["tokens"]["answer_in"] == _words(answer_prompt) + _words(
        "You answer questions about a user from memories of your past conversations with them. Use only the "
        "memories given. Answer in a short phrase. If the memories do not hold the answer, say that you do not know."
    )
    assert rows["q1"]["tokens"]["answer_out"] == 5 and rows["q1"]["tokens"]["judge_out"] == 1
    assert rows["q5"]["tokens"]["judge_out"] == 3 + 1  # "Maybe, it depends." then "yes"
    # the answer prompt holds the retrieved turns with their dates and the question's date
    assert "- [2023-05-02 09:00] user: I will join the bakery downtown" in answer_prompt
    assert "Today is 2023-05-20 (Saturday)." in answer_prompt
    judge_prompts = [p for p in _ScriptedModel.requests if not p.startswith("Memories:")]
    assert any("off-by-one" in p and "puppy" in p for p in judge_prompts)
    assert any("Explanation: You did not mention" in p for p in judge_prompts)
    overall = payload["overall"]
    assert overall["questions"] == 5 and overall["correct"] == 4 and overall["accuracy"] == 0.8
    assert overall["unjudged"] == 0 and overall["recall"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert payload["by_category"]["multi-session"]["accuracy"] == 0.0
    assert payload["by_category"]["knowledge-update"]["accuracy"] == 1.0
    assert all(row["latency_s"]["answer"] > 0 for row in rows.values())
    assert overall["latency_s_p95"] >= overall["latency_s_mean"] > 0


def test_eval_answers_on_locomo_judges_with_the_locomo_rule(model_server, tmp_path, tiny_locomo_path):
    out = tmp_path / "answers.json"
    argv = ["eval", "answers", "--data", str(tiny_locomo_path), "--llm", model_server, "--limit", "2"]
    assert main([*argv, "--json", str(out), "-q"]) == 0
    rows = json.loads(out.read_text())["questions"]
    assert len(rows) == 2 and {row["rule"] for row in rows} == {"locomo"}
    assert all(row["verdict"] is False for row in rows)  # the script does not know these: "I do not know."
    assert all("Gold answer:" in p for p in _ScriptedModel.requests if not p.startswith("Memories:"))


def test_eval_answers_with_an_encoder_retrieves_the_top_k_of_each_haystack(model_server, tmp_path, tiny_model_dir):
    out = tmp_path / "answers.json"
    argv = [
        "eval",
        "answers",
        "--data",
        str(LONGMEMEVAL),
        "--llm",
        model_server,
        "--retriever",
        f"dense:{tiny_model_dir}",
    ]
    assert main([*argv, "-k", "3", "--limit", "2", "--json", str(out), "-q"]) == 0
    payload = json.loads(out.read_text())
    assert payload["retriever"] == f"dense:{tiny_model_dir}" and payload["k"] == 3
    q1, q2 = payload["questions"]
    assert len(q1["retrieved"]) == 3 and set(q1["retrieved"]) <= {
        "s1_1",
        "s1_2",
        "s1_3",
        "answer_s2_1",
        "answer_s2_2",
        "s3_1",
    }
    assert len(q2["retrieved"]) == 3 and all(row["verdict"] is not None for row in payload["questions"])


def test_an_unreachable_model_leaves_every_question_unjudged_with_its_error(tmp_path, capsys):
    out = tmp_path / "answers.json"
    argv = ["eval", "answers", "--data", str(LONGMEMEVAL), "--llm", "http://127.0.0.1:9", "--retries", "0"]
    assert main([*argv, "--json", str(out), "-q"]) == 0
    payload = json.loads(out.read_text())
    assert payload["overall"]["unjudged"] == 5 and payload["overall"]["accuracy"] == 0.0
    assert all(row["answer"] is None and "cannot reach" in row["errors"][0] for row in payload["questions"])


def test_eval_answers_refuses_bad_arguments_with_exit_2(tmp_path, capsys):
    argv = ["eval", "answers", "--data", str(LONGMEMEVAL), "--llm"]
    assert main([*argv, "ftp://x"]) == 2
    assert "base_url must start with http:// or https://" in capsys.readouterr().err
    assert main([*argv, "http://127.0.0.1:9", "-k", "0"]) == 2
    assert main([*argv, "http://127.0.0.1:9", "--retriever", "nope"]) == 2
    assert "unknown kind 'nope'" in capsys.readouterr().err


def test_judge_prompts_per_rule_and_verdict_parsing():
    assert "off-by-one" in judge_prompt("temporal-reasoning", "q", "18 days", "19 days")
    assert "updated answer" in judge_prompt("knowledge-update", "q", "a", "b")
    assert "Rubric: likes jazz" in judge_prompt("single-session-preference", "q", "likes jazz", "b")
    with pytest.raises(ValueError, match="no judge rule 'trivia'"):
        judge_prompt("trivia", "q", "a", "b")
    assert [parse_verdict(r) for r in ["Yes.", " no", "YES, it is", "**No**", "maybe", "yesterday", ""]] == [
        True,
        False,
        True,
        False,
        None,
        None,
        None,
    ]
