"""uvicorn's httptools protocol with the limits of :mod:`memnets.server.protocol` (needs httptools, of the
server extra).

httptools parses HTTP/1.1 in C (llhttp): under load, h11's parsing in Python was ~10 % of the event
loop's time per request. It has no limit of its own on a request head (a 2 MB head is taken whole,
and a header line that never ends is buffered for as long as it comes), so
:class:`GuardedHttpToolsProtocol` refuses a head over :data:`~memnets.server.protocol.MAX_HEAD_BYTES`,
h11's limit, as h11 does: 400 and the connection closed. It counts both what the parser reports (a
whole head in one read) and what arrives while a head is awaited (a head still unfinished). Where the request stands comes from the
parser's callbacks rather than h11's states.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from memnets.server.protocol import MAX_HEAD_BYTES, ConnectionGuard


class HeadTooLarge(Exception):
    """A request head over MAX_HEAD_BYTES (raised in a parser callback: uvicorn answers 400 and closes)."""


class GuardedHttpToolsProtocol(ConnectionGuard, HttpToolsProtocol):
    """uvicorn's httptools protocol with :class:`~memnets.server.protocol.ConnectionGuard`'s limits and
    h11's head size limit; pass it as uvicorn's ``http`` setting."""

    def __init__(self, *args, **kwargs) -> None:
        self._head_parsed = 0  # bytes of the awaited head the parser reported (request line, headers)
        self._head_received = 0  # bytes received while a head was awaited
        self._in_message = False  # a request begun and not all in
        super().__init__(*args, **kwargs)

    def data_received(self, data: bytes) -> None:
        if self._phase == "head":
            self._head_received += len(data)
        super().data_received(data)
        if self._phase == "head" and self._head_received > MAX_HEAD_BYTES and not self.transport.is_closing():
            self.send_400_response("Invalid HTTP request received.")  # uvicorn's words for h11's refusal

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True
        if self._phase != "head":  # a request that follows one still being answered (pipelined)
            self._await_head()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm("body", self.limits.body_timeout_s)

    def on_message_complete(self) -> None:
        self._in_message = False
        self._disarm()  # the request is in: the app has it
        super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # a request already in, started by the call below
        super().on_response_complete()
        if not self.transport.is_closing() and not self._in_message and not pipelined:
            self._await_head()

    def _await_head(self) -> None:
        super()._await_head()
        self._head_parsed = self._head_received = 0

    def _count(self, size: int) -> None:
        self._head_parsed += size
        if self._head_parsed > MAX_HEAD_BYTES:
            raise HeadTooLarge(f"request head over {MAX_HEAD_BYTES} bytes")
