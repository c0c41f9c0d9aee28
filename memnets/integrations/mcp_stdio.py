"""MCP over stdio with a size limit on every message, the stdio counterpart of the HTTP body limit.

The SDK's stdio transport reads each line whole, however long, and parses it: one 50 MB line costs
its size several times over before any tool sees it. Here stdin is read at most
``max_message_bytes`` (+ the newline) at a time: a longer line is skipped to its end without being
kept, and the client gets a JSON-RPC error (code -32600) naming the limit. Its id is read from the
line's first or last 64 KiB, where a client writes it: before ``"params"`` or as the message's last
member (the SDK's client writes ``..., "jsonrpc": "2.0", "id": 7}``); a line with its id anywhere
else gets the error with id null. Error lines and the SDK's replies share one lock, so they never
interleave on stdout.
"""

from __future__ import annotations

import json
import re
import sys
from io import TextIOWrapper

from memnets.extras import needs_extra
from memnets.httpguard import DEFAULT_MAX_BODY_BYTES, request_json

with needs_extra("memnets.integrations.mcp_stdio", "mcp"):
    import anyio
    from mcp.server.fastmcp import FastMCP
    from mcp.server.stdio import stdio_server

DEFAULT_MAX_MESSAGE_BYTES = DEFAULT_MAX_BODY_BYTES  # the same 4 MiB as over HTTP
EDGE_BYTES = 64 * 1024  # how much of each end of an oversized line is kept to find its id
_VALUE = rb'(-?[0-9]+|"(?:[^"\\]|\\.)*")'
_HEAD_ID = re.compile(rb'"id"\s*:\s*' + _VALUE)
_TAIL_ID = re.compile(rb'"id"\s*:\s*' + _VALUE + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')
INVALID_REQUEST = -32600
PARSE_ERROR = -32700
_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")  # a \uD800-\uDFFF escape: checked before the SDK parses


def request_id(head: bytes, tail: bytes):
    """The JSON-RPC id of a message from its first and last bytes: written before ``"params"``, or
    as its last member; None when it is in neither place."""
    match = _HEAD_ID.search(head.split(b'"params"', 1)[0]) or _TAIL_ID.search(tail)
    return None if match is None else json.loads(match[1])


class _SharedStdout:
    """stdout for the SDK's writer and for this module's error lines, one whole line per lock."""

    def __init__(self) -> None:
        self.file = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
        self.lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self.lock:
            await self.file.write(text)
            await self.file.flush()

    async def flush(self) -> None:
        pass  # every write flushes under the lock


class _BoundedLines:
    """The lines of stdin as text, each at most ``limit`` bytes; longer ones are answered, not yielded."""

    def __init__(self, limit: int, stdout: _SharedStdout) -> None:
        self.limit = limit
        self.stdout = stdout
        self.stdin = sys.stdin.buffer

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._readline(self.limit + 1)
            if not line:
                raise StopAsyncIteration
            if not (line.endswith(b"\n") or len(line) <= self.limit):
                await self._refuse(line)
            elif _SURROGATE_ESCAPE.search(line) and not _valid_unicode(line):
                await self._error(line, line, PARSE_ERROR, "parse error: a string holds a lone UTF-16 surrogate")
            else:
                return line.decode("utf-8", errors="replace")  # what the SDK's own reader does

    async def _readline(self, size: int) -> bytes:
        return await anyio.to_thread.run_sync(self.stdin.readline, size)

    async def _refuse(self, start: bytes) -> None:
        head, tail = start[:EDGE_BYTES], start[-EDGE_BYTES:]
        while not tail.endswith(b"\n"):  # skip to the end of the line, keeping only its last bytes
            rest = await self._readline(1 << 20)
            if not rest:
                break
            tail = (tail + rest)[-EDGE_BYTES:]
        message = (
            f"request too large: a message over stdio is limited to {self.limit} bytes "
            f"({self.limit / 2**20:g} MiB); this one is longer"
        )
        await self._error(head, tail, INVALID_REQUEST, message)

    async def _error(self, head: bytes, tail: bytes, code: int, message: str) -> None:
        """A JSON-RPC error reply for a line the SDK is not given, with the line's id where it can be read."""
        error = {"jsonrpc": "2.0", "id": request_id(head, tail), "error": {"code": code, "message": message}}
        await self.stdout.write(json.dumps(error) + "\n")


def _valid_unicode(line: bytes) -> bool:
    """Whether the JSON line's strings are valid Unicode: Python's json decodes an escaped lone
    surrogate (``"\\ud800"``), which the SDK's parser then refuses without a reply."""
    try:
        value = request_json(line)
    except ValueError:  # not JSON, or nested past the parser's stack: the SDK's own parse error
        return True
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def run_stdio(server: FastMCP, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
    """Serve ``server`` over this process's stdin and stdout until stdin closes (``FastMCP.run("stdio")``
    with the message limit)."""
    if not isinstance(max_message_bytes, int) or isinstance(max_message_bytes, bool) or max_message_bytes < 1:
        raise ValueError(f"max_message_bytes must be a positive int, got {max_message_bytes!r}")
    stdout = _SharedStdout()
    async with stdio_server(stdin=_BoundedLines(max_message_bytes, stdout), stdout=stdout) as (read, write):
        low_level = server._mcp_server  # what FastMCP.run_stdio_async runs; the SDK exposes no other handle
        await low_level.run(read, write, low_level.create_initialization_options())
