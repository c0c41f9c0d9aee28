"""The small text-generation protocol the memory system speaks, and three adapters for it.

Reflection summaries, compression summaries, plans and answers are all produced through
:class:`LLM`: one method, ``complete(prompt, *, system=None, max_new_tokens=128) -> str``.
Prompts list their material as bullet lines (``"- ..."``), which lets the no-LLM default work.

Adapters:

- :class:`ExtractiveLLM`: needs no model. It returns the most central bullet lines of the prompt
  (ranked by word overlap with the prompt's other lines), prefixed ``"[extractive]"`` so that
  nobody mistakes its output for generated text. It is the default everywhere.
- :class:`TransformersLLM`: a local causal language model folder (``AutoModelForCausalLM``),
  greedy decoding, chat template when the tokenizer has one.
- :class:`OpenAIChatLLM`: any OpenAI-compatible HTTP server (``POST {base_url}/v1/chat/completions``)
  via the standard library, e.g. vLLM, llama.cpp's server or Ollama. It sends the API key only to
  the host it was given, and bounds each call in time and size (see its docstring and docs/security.md).
"""

from __future__ import annotations

import http.client
import inspect
import json
import os
import re
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from memnets.netutil import is_loopback
from memnets.tracing import traced_methods

EXTRACTIVE_PREFIX = "[extractive]"
# An answer's size cap: its JSON envelope, plus bytes per token asked for. A token is a few characters;
# JSON's "\uXXXX" escapes take 6 bytes a character, so 64 a token leaves room for any real answer.
ANSWER_ENVELOPE_BYTES = 64 * 1024
ANSWER_BYTES_PER_TOKEN = 64
ERROR_BODY_BYTES = 4096  # what is read of an error answer's body (500 characters of it are shown)
_WORD = re.compile(r"[a-z0-9']+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
        "your",
    ]
)


@runtime_checkable
class LLM(Protocol):
    """Anything that turns a prompt into text."""

    name: str

    def complete(self, prompt: str, *, system: str | None = None, max_new_tokens: int = 128) -> str:
        """The model's continuation of ``prompt`` (``system``: an optional system instruction)."""
        ...


def bullets(prompt: str) -> list[str]:
    """The bullet lines (``"- text"``) of a prompt, without their markers: the material it lists."""
    return [line.strip()[2:].strip() for line in prompt.splitlines() if line.strip().startswith("- ")]


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


@traced_methods("memnets.llm", "complete")
class ExtractiveLLM:
    """The no-model default: picks the prompt's most central bullet lines; says what it is.

    Each bullet is scored by the number of its content words shared with the rest of the prompt
    (the other bullets and the instruction, e.g. the question), divided by the square root of its
    own length so that long lines do not win by size alone; ties keep prompt order. The top
    ``max_sentences`` come back joined by spaces after ``"[extractive] "``. A prompt without
    bullets yields its first ``max_sentences`` sentences, so the call never fails.
    """

    name = "extractive"

    def __init__(self, max_sentences: int = 3):
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be at least 1, got {max_sentences}")
        self.max_sentences = max_sentences

    def complete(self, prompt: str, *, system: str | None = None, max_new_tokens: int = 128) -> str:
        items = bullets(prompt)
        if not items:
            sentences = [s for s in re.split(r"(?<=[.!?])\s+", prompt.strip()) if s]
            return f"{EXTRACTIVE_PREFIX} {' '.join(sentences[: self.max_sentences])}".strip()
        instruction = " ".join(line for line in prompt.splitlines() if not line.strip().startswith("- "))
        word_sets = [_words(item) for item in items]
        instruction_words = _words(instruction)
        scores = []
        for i, words in enumerate(word_sets):
            others = set().union(*(w for j, w in enumerate(word_sets) if j != i)) | instruction_words
            scores.append(len(words & others) / max(1.0, len(words)) ** 0.5)
        top = sorted(range(len(items)), key=lambda i: (-scores[i], i))[: self.max_sentences]
        return f"{EXTRACTIVE_PREFIX} " + " ".join(items[i] for i in sorted(top))


@traced_methods("memnets.llm", "complete")
class TransformersLLM:
    """A local causal LM folder (``AutoModelForCausalLM`` + its tokenizer), greedy decoding.

    Uses the tokenizer's chat template when it has one (instruction-tuned models), else the plain
    prompt (with the system text in front). Returns only the newly generated tokens, decoded.
    """

    def __init__(self, path: str | Path, *, device: str = "cpu", dtype: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from memnets.progress import quiet_loading

        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"TransformersLLM: model path {str(path)!r} is not a folder")
        self.name = f"transformers:{path.name}"
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        torch_dtype = getattr(torch, dtype) if dtype else None
        with quiet_loading():  # no "Loading weights" bar
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype).to(device).eval()
        self.device = device

    def _input_ids(self, prompt: str, system: str | None):
        if getattr(self.tokenizer, "chat_template", None):
            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": prompt}
            ]
            return self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
        text = f"{system}\n\n{prompt}" if system else prompt
        return self.tokenizer(text, return_tensors="pt")["input_ids"]

    def complete(self, prompt: str, *, system: str | None = None, max_new_tokens: int = 128) -> str:
        import torch

        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        input_ids = self._input_ids(prompt, system).to(self.device)
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = self.tokenizer.eos_token_id
        with torch.inference_mode():
            output = self.model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=pad_id,
            )
        self.last_new_tokens = int(output.shape[1] - input_ids.shape[1])
        return self.tokenizer.decode(output[0, input_ids.shape[1] :], skip_special_tokens=True).strip()


@dataclass(frozen=True)
class ChatReply:
    """A chat completion's text and the tokens the server counted in and out (None when it did not say)."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class LLMError(RuntimeError):
    """An LLM endpoint failed or answered something that is not a chat completion."""


class LLMTimeoutError(LLMError):
    """An LLM endpoint did not answer in full within the call's time."""


def complete_within(llm: LLM, prompt: str, *, seconds: float | None, system: str | None, max_new_tokens: int) -> str:
    """``llm.complete(...)`` given at most ``seconds`` (None: its own limit) when its ``complete`` takes a
    ``timeout`` (:class:`OpenAIChatLLM`: the call ends then, an :class:`LLMTimeoutError`); an LLM without one
    runs to its end, and the caller checks the time after."""
    bounded = seconds is not None and "timeout" in inspect.signature(llm.complete).parameters
    options = {"timeout": seconds} if bounded else {}
    return llm.complete(prompt, system=system, max_new_tokens=max_new_tokens, **options)


def answer_limit(max_new_tokens: int) -> int:
    """The most bytes an answer of ``max_new_tokens`` tokens may take (envelope and generous bytes per token)."""
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    return ANSWER_ENVELOPE_BYTES + ANSWER_BYTES_PER_TOKEN * max_new_tokens


def _seconds(value, name: str) -> float:
    """``value`` as a positive number of seconds; a ValueError naming ``name`` otherwise."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"OpenAIChatLLM: {name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL, the port filled in from the scheme when absent."""
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or ""), parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same scheme, host and port, keeping method, body and headers.

    urllib's own handler turns a redirected POST into a GET and forwards every header, the
    ``Authorization`` header included, to whatever host the ``Location`` names. A redirect to
    another origin is refused here instead: neither the API key nor the prompt (which carries the
    user's memories) goes to a host the caller did not name.
    """

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if _origin(newurl) != _origin(req.full_url):
            fp.close()
            raise LLMError(
                f"{req.full_url} redirected (HTTP {code}) to {newurl}, another scheme, host or port; refused so that "
                "the API key and the prompt are not sent there. Set base_url to the address you trust."
            )
        return urllib.request.Request(newurl, data=req.data, headers=dict(req.header_items()), method=req.get_method())


class _CallDeadline:
    """The one deadline of an HTTP call: when ``seconds`` have passed, every connection the call opened
    is shut down, so that no wait outlives it (a TLS handshake, the headers, the body). A socket timeout
    bounds one read only: a server dripping a byte a second never lets it expire.

    Use it as a context manager around the call, with :meth:`handlers` in the call's opener;
    ``passed`` says afterwards whether the deadline cut the call.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.passed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    def __enter__(self) -> _CallDeadline:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def handlers(self) -> list[urllib.request.BaseHandler]:
        """urllib handlers of http:// and https:// whose connections this deadline cuts."""
        return [_DeadlineHTTPHandler(self), _DeadlineHTTPSHandler(self)]

    def connection(self, http_class: type) -> Callable[..., http.client.HTTPConnection]:
        """A factory of ``http_class`` connections whose sockets are kept to be cut."""

        def open_connection(host, **options) -> http.client.HTTPConnection:
            connection = http_class(host, **options)
            connection._create_connection = self._create_connection  # the hook http.client connects through
            return connection

        return open_connection

    def _create_connection(self, *args, **kwargs) -> socket.socket:
        """``socket.create_connection``, a duplicate of the socket kept (TLS takes the original over);
        one opened after the deadline is cut at once."""
        sock = socket.create_connection(*args, **kwargs)
        with self._lock:
            self._sockets.append(sock.dup())
            if self.passed:
                _shut(self._sockets[-1])
        return sock

    def _cut(self) -> None:
        with self._lock:
            self.passed = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Shut ``sock`` down both ways: a read waiting on it (in any thread) ends at once."""
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _DeadlineHandler:
    """A urllib HTTP(S) handler whose connections a :class:`_CallDeadline` cuts."""

    def __init__(self, deadline: _CallDeadline):
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class, req, **options):
        return super().do_open(self._deadline.connection(http_class), req, **options)


class _DeadlineHTTPHandler(_DeadlineHandler, urllib.request.HTTPHandler):
    pass


class _DeadlineHTTPSHandler(_DeadlineHandler, urllib.request.HTTPSHandler):
    pass


@traced_methods("memnets.llm", "complete")
class OpenAIChatLLM:
    """An OpenAI-compatible chat endpoint: ``POST {base_url}/v1/chat/completions`` via urllib.

    ``base_url`` is the server root (``http://127.0.0.1:8000``); a trailing ``/v1`` is accepted too.
    The API key comes from ``api_key`` or the environment variable named by ``api_key_env``
    (default ``OPENAI_API_KEY``; ``None`` reads no variable); local servers usually need none.

    Credentials stay with the host given: a key over plain ``http://`` is refused unless the host
    is loopback (``localhost``, 127.0.0.0/8, ``::1``), and redirects are followed only within the
    same scheme, host and port.

    A call takes at most ``timeout`` seconds in all (connecting, the headers and the whole body: a
    server dripping its answer is cut then, :class:`LLMTimeoutError`); ``complete(..., timeout=s)``
    shortens one call. An answer may take at most :func:`answer_limit` bytes of its ``max_new_tokens``
    (64 KiB + 64 bytes a token), an error body is read up to :data:`ERROR_BODY_BYTES`. Every failure of
    the endpoint (unreachable, not in time, an HTTP error, a broken connection, an answer too long or
    not a chat completion) raises :class:`LLMError`.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        temperature: float = 0.0,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAIChatLLM: base_url must start with http:// or https://, got {base_url!r}")
        self.timeout = _seconds(timeout, "timeout")
        root = base_url.rstrip("/")
        self.url = (root if root.endswith("/v1") else root + "/v1") + "/chat/completions"
        self.model = model
        self.name = f"openai:{model}"
        self.api_key = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
        scheme, host, _ = _origin(self.url)
        if self.api_key and scheme == "http" and not is_loopback(host):
            source = "api_key" if api_key is not None else f"${api_key_env}"
            raise ValueError(
                f"OpenAIChatLLM: base_url {base_url!r} is plain http:// to {host!r}, which is not loopback; refusing to "
                f"send the API key (from {source}) unencrypted. Use https://, or send no key (api_key='' or api_key_env=None)."
            )
        self.temperature = temperature

    def complete(
        self, prompt: str, *, system: str | None = None, max_new_tokens: int = 128, timeout: float | None = None
    ) -> str:
        return self.chat(prompt, system=system, max_new_tokens=max_new_tokens, timeout=timeout).text

    def chat(
        self, prompt: str, *, system: str | None = None, max_new_tokens: int = 128, timeout: float | None = None
    ) -> ChatReply:
        """:meth:`complete` with the token counts the server reports (``usage``; None where it reports none).
        ``timeout``: seconds for this call in all, when shorter than the client's ``timeout``."""
        limit = min(self.timeout, _seconds(timeout, "timeout")) if timeout is not None else self.timeout
        cap = answer_limit(max_new_tokens)
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        body = json.dumps(
            {
                "model": self.model,
                "messages": messages,
                "max_tokens": max_new_tokens,
                "temperature": self.temperature,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        raw = self._send(urllib.request.Request(self.url, data=body, headers=headers, method="POST"), limit, cap)
        try:
            payload = json.loads(raw.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise LLMError(f"{self.url} answered something that is not JSON: {error}") from error
        try:
            text = payload["choices"][0]["message"]["content"].strip()
        except (KeyError, IndexError, TypeError, AttributeError) as error:
            raise LLMError(f"{self.url} answered JSON without choices[0].message.content: {payload!r:.300}") from error
        usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
        return ChatReply(text, _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))

    def _send(self, request: urllib.request.Request, seconds: float, cap: int) -> bytes:
        """The body of the answer to ``request``: within ``seconds`` in all, at most ``cap`` bytes (one more is
        read to tell a longer one, which is refused); each failure an :class:`LLMError` saying which."""
        with _CallDeadline(seconds) as deadline:
            try:
                opener = urllib.request.build_opener(_SameOriginRedirects, *deadline.handlers())
                with opener.open(request, timeout=seconds) as response:
                    raw = response.read(cap + 1)
            except urllib.error.HTTPError as error:
                detail = ""
                with error, suppress(OSError, http.client.HTTPException):
                    detail = error.read(ERROR_BODY_BYTES).decode(errors="replace")[:500]
                raise LLMError(f"{self.url} answered HTTP {error.code}: {detail}") from error
            except (OSError, http.client.HTTPException) as error:
                raise self._failure(error, deadline) from error
        if deadline.passed:  # cut while reading: what came is a part of the answer
            raise self._late(deadline)
        if len(raw) > cap:
            raise LLMError(
                f"{self.url} answered more than {cap} bytes, the most an answer of the max_new_tokens asked may take "
                "(ANSWER_ENVELOPE_BYTES + ANSWER_BYTES_PER_TOKEN a token); refused"
            )
        return raw

    def _failure(self, error: Exception, deadline: _CallDeadline) -> LLMError:
        """The LLMError of a call that failed with ``error`` (an OSError or an HTTPException)."""
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        if deadline.passed or isinstance(reason, TimeoutError):
            return self._late(deadline)
        if isinstance(error, urllib.error.URLError):
            return LLMError(f"cannot reach {self.url}: {error.reason}")
        return LLMError(f"{self.url}: the connection failed before a full answer ({type(error).__name__}: {error})")

    def _late(self, deadline: _CallDeadline) -> LLMTimeoutError:
        return LLMTimeoutError(f"{self.url} did not answer within {deadline.seconds:.3g} s")


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def load_llm(spec: str | None) -> LLM:
    """An LLM from a short spec: ``None``/``"extractive"``, a model folder, or ``"openai:MODEL@URL"``."""
    if spec is None or spec == "extractive":
        return ExtractiveLLM()
    if spec.startswith("openai:"):
        model, _, url = spec[len("openai:") :].partition("@")
        if not model or not url:
            raise ValueError(f"LLM spec {spec!r}: expected 'openai:MODEL@http://host:port'")
        return OpenAIChatLLM(url, model)
    return TransformersLLM(spec)
