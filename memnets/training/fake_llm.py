"""A local OpenAI-compatible chat server with scripted answers: the LLM of tests and benchmarks, no network.

:class:`FakeChatServer` answers ``POST /v1/chat/completions`` on 127.0.0.1 (a free port) from a
thread of this process, so :class:`~memnets.llm.OpenAIChatLLM` talks real HTTP to it::

    with FakeChatServer(['{"facts": []}'], delay=0.2) as server:
        llm = OpenAIChatLLM(server.url, "fake")

Each request takes the next scripted answer (:meth:`FakeChatServer.script` adds more); when none is
left, ``respond(messages)`` is asked, if given, else the request gets HTTP 500 naming the cause.
``delay`` seconds pass before every answer (a slow model, or a late one for a client's timeout);
``drip`` seconds pass before each byte of it, status line and headers included (a server that keeps a
connection busy without ever letting a socket timeout expire).
Every request's JSON body is kept in ``requests``. It ships with the package (as
``memnets.store.testing`` does) so that the tests and ``bench/`` share it without importing each other.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Responder = Callable[[list[dict]], str]


class FakeChatServer:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 answering from a script (see the module docstring).

    Args:
        answers: the contents of the first answers, in order.
        respond: what to answer once the script is used up, from the request's messages.
        delay: seconds to wait before each answer.
        drip: seconds to wait before each byte of an answer (0: the answer is sent at once).
    """

    def __init__(
        self,
        answers: Iterable[str] = (),
        *,
        respond: Responder | None = None,
        delay: float = 0.0,
        drip: float = 0.0,
    ):
        for name, value in (("delay", delay), ("drip", drip)):
            if value < 0:
                raise ValueError(f"FakeChatServer: {name} must be >= 0 seconds, got {value!r}")
        self.requests: list[dict] = []
        self.delay = delay
        self.drip = drip
        self._answers = deque(answers)
        self._respond = respond
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-chat-server", daemon=True)

    @property
    def url(self) -> str:
        """The server root, as ``OpenAIChatLLM``'s ``base_url`` takes it."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def script(self, *answers: str) -> None:
        """Queue more answers (contents of the assistant message), after those already queued."""
        with self._lock:
            self._answers.extend(answers)

    def start(self) -> FakeChatServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _answer(self, body: dict) -> str | None:
        """The next answer for a request, or None when the script is used up and nothing responds."""
        with self._lock:
            self.requests.append(body)
            if self._answers:
                return self._answers.popleft()
        return self._respond(body.get("messages", [])) if self._respond is not None else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                content = server._answer(body) if self.path.rstrip("/").endswith("/chat/completions") else None
                time.sleep(server.delay)
                if content is None:
                    self._send(500, {"error": f"FakeChatServer: no scripted answer left for {self.path}"})
                    return
                message = {"role": "assistant", "content": content}
                self._send(200, {"object": "chat.completion", "choices": [{"index": 0, "message": message}]})

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                head = (
                    f"HTTP/1.1 {status} {self.responses[status][0]}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
                )
                self.close_connection = True
                try:
                    self._write(head.encode() + data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (its timeout)
                    pass

            def _write(self, response: bytes) -> None:
                """The whole ``response``: at once, or a byte every ``drip`` seconds."""
                if not server.drip:
                    self.wfile.write(response)
                    return
                for n in range(len(response)):
                    time.sleep(server.drip)
                    self.wfile.write(response[n : n + 1])

            def log_message(self, *args) -> None:
                pass

        return Handler


__all__ = ["FakeChatServer"]
