"""The MCP server's doors under attack, against the real ``memnets serve mcp`` in subprocesses.

- DNS rebinding: for bind hosts the mcp SDK does not protect (127.0.0.2, ``0:0:0:0:0:0:0:1``,
  ``::0:1``), a request naming another site in ``Host`` gets 421 and one from another site's
  ``Origin`` 403; the same request naming the server passes.
- The bearer scheme in any case (RFC 7235).
- Requests over 4 MiB over HTTP and stdio: an error naming the limit.
- A Rust panic in the tokenizer (pyo3's ``PanicException``, a ``BaseException``): a real tokenizer
  whose pre-tokenizer regex hits Oniguruma's retry limit on 100 ``a``s, loaded the supported way
  (``--encoder DIR``). The call that panics is a tool error; the session, the HTTP transport and
  the stdio transport answer the next calls.
- A stdio line nested past Python's JSON parser's stack (with an escaped surrogate, which that
  parser checks): the server answers the next message.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager, contextmanager

import anyio
import pytest

pytest.importorskip("mcp")

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from panic_helpers import PANIC_TEXT

STARTUP_S = 180  # importing torch and transformers on a loaded 2-core machine is slow
HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@contextmanager
def http_servers(tmp_path, encoder_dir, hosts, *extra, env=None):
    """``memnets serve mcp --transport http`` on each host at once (the slow start overlaps);
    yields {host: base URL} once all listen."""
    servers = {}
    try:
        for number, host in enumerate(hosts):
            port = _free_port(host)
            log = (tmp_path / f"server{number}.log").open("w")
            command = [sys.executable, "-m", "memnets", "serve", "mcp", str(tmp_path / f"memory{number}")]
            command += ["--encoder", str(encoder_dir), "--transport", "http", "--host", host, "--port", str(port)]
            process = subprocess.Popen(
                [*command, *extra], stdout=subprocess.DEVNULL, stderr=log, env=dict(os.environ, **(env or {}))
            )
            servers[host] = (process, port, log)
        deadline = time.monotonic() + STARTUP_S
        for host, (process, port, log) in servers.items():
            while True:
                assert process.poll() is None, log.name + ": " + open(log.name).read()
                try:
                    socket.create_connection((host, port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"the server on {host} did not start listening"
                    time.sleep(0.5)
        yield {host: f"http://{_url_host(host)}:{port}" for host, (_, port, _) in servers.items()}
    finally:
        for process, _, _log in servers.values():
            process.terminate()
        for process, _, log in servers.values():
            process.wait(timeout=30)
            log.close()


CALL_S = 120  # one tool call on a loaded machine; a server that stopped answering fails here, not hangs


async def _call(session: ClientSession, tool: str, **arguments):
    with anyio.fail_after(CALL_S):
        result = await session.call_tool(tool, arguments)
    text = result.content[0].text if result.content else ""
    return result.isError, (text if result.isError else json.loads(text))


async def _panic_then_work(session: ClientSession) -> None:
    """A panicking add is a tool error naming the panic; the same session then adds and finds."""
    failed, message = await _call(session, "add_memory", text=PANIC_TEXT, user_id="u")
    assert failed and "PanicException" in message, message
    failed, added = await _call(session, "add_memory", text="hello world", user_id="u")
    assert not failed, added
    failed, found = await _call(session, "search_memory", query="hello world", user_id="u", k=1)
    assert not failed and found["results"][0]["id"] == added["id"]
    failed, message = await _call(session, "search_memory", query=PANIC_TEXT, user_id="u", k=1)
    assert failed and "PanicException" in message, message  # a query takes the same path
    failed, listed = await _call(session, "list_memories", user_id="u")
    assert not failed and [m["content"] for m in listed["memories"]] == ["hello world"]


UNPROTECTED_BY_THE_SDK = ["127.0.0.2", "0:0:0:0:0:0:0:1", "::0:1"]


def test_foreign_host_and_origin_are_refused_on_every_loopback_bind(tmp_path, panicking_encoder_dir):
    """DNS rebinding: the SDK checks Host only for 127.0.0.1, localhost and ::1 (exact strings);
    here the guard refuses a foreign Host (421) and Origin (403) for the hosts it did not check."""
    with http_servers(tmp_path, panicking_encoder_dir, UNPROTECTED_BY_THE_SDK) as urls:
        for host, url in urls.items():
            own = url.removeprefix("http://")
            for headers, status in [
                ({"Host": "evil.example"}, 421),
                ({"Host": f"evil.example:{own.rsplit(':', 1)[1]}"}, 421),
                ({"Host": "localhost.evil.example"}, 421),
                ({"Origin": "http://evil.example"}, 403),
                ({"Origin": f"http://evil.example:{own.rsplit(':', 1)[1]}"}, 403),
                ({"Origin": "null"}, 403),
            ]:
                answer = httpx.post(f"{url}/mcp", json=HELLO, headers=ACCEPT | headers, timeout=30)
                assert answer.status_code == status, (host, headers, answer.text)
                assert "refused" in answer.text or "does not name this server" in answer.text
            # the same request naming the server, or another loopback name, reaches the MCP layer
            for headers in [{}, {"Host": "localhost"}, {"Origin": f"http://{own}"}, {"Host": "[::1]:1"}]:
                answer = httpx.post(f"{url}/mcp", json=HELLO, headers=ACCEPT | headers, timeout=30)
                assert answer.status_code == 200, (host, headers, answer.text)


TOKEN = "s3cret-token-for-the-test"


def test_bearer_scheme_in_any_case_and_a_panic_leaves_http_serving(tmp_path, panicking_encoder_dir):
    """With a token, ``bearer``/``BEARER`` pass (RFC 7235: the scheme is case-insensitive) and any
    other credentials get 401. A panicking tool call is an error for that call; the same session and
    a new one go on (before the fix the session manager answered 500 to every later request)."""
    env = {"MEMNETS_TEST_MCP_TOKEN": TOKEN}
    with http_servers(
        tmp_path, panicking_encoder_dir, ["127.0.0.1"], "--token-env", "MEMNETS_TEST_MCP_TOKEN", env=env
    ) as urls:
        url = urls["127.0.0.1"] + "/mcp"
        for authorization in [f"bearer {TOKEN}", f"BEARER  {TOKEN}", f"Bearer {TOKEN}"]:
            answer = httpx.post(url, json=HELLO, headers=ACCEPT | {"Authorization": authorization}, timeout=30)
            assert answer.status_code == 200, (authorization, answer.text)
        too_large = httpx.post(
            url, content=b"x" * (LIMIT + 1), headers=ACCEPT | {"Authorization": f"bearer {TOKEN}"}, timeout=60
        )
        assert too_large.status_code == 413 and f"the limit is {LIMIT} bytes" in too_large.text
        for authorization in [TOKEN, f"Basic {TOKEN}", f"bearer {TOKEN}x", f"bearer{TOKEN}", "bearer"]:
            answer = httpx.post(url, json=HELLO, headers=ACCEPT | {"Authorization": authorization}, timeout=30)
            assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer", authorization

        @asynccontextmanager
        async def session():
            async with (
                streamablehttp_client(url, headers={"Authorization": f"bearer {TOKEN}"}) as (read, write, _),
                ClientSession(read, write) as opened,
            ):
                await opened.initialize()
                yield opened

        async def run():
            async with session() as first:
                await _panic_then_work(first)
            async with session() as second:  # a new session after the panics
                failed, listed = await _call(second, "list_memories", user_id="u")
                assert not failed and len(listed["memories"]) == 1

        anyio.run(run)


LIMIT = 4 * 1024 * 1024
TOO_LONG = "hello " * (LIMIT // 6 + 1)  # a text just over the 4 MiB request limit


def test_a_panic_and_an_oversized_message_leave_the_stdio_server_serving(tmp_path, panicking_encoder_dir):
    """Over stdio a message over 4 MiB is refused with an error naming the limit (the SDK alone
    reads and parses a line of any length); a panic is a tool error; the server answers after both."""
    from mcp.shared.exceptions import McpError

    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "memnets",
            "serve",
            "mcp",
            str(tmp_path / "memory"),
            "--encoder",
            str(panicking_encoder_dir),
        ],
        env=dict(os.environ),
    )

    async def run():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(STARTUP_S):
                await session.initialize()
            with anyio.fail_after(CALL_S), pytest.raises(McpError, match=f"limited to {LIMIT} bytes"):
                await session.call_tool("add_memory", {"text": TOO_LONG, "user_id": "u"})
            await _panic_then_work(session)

    anyio.run(run)


@pytest.mark.parametrize(
    ("head", "tail", "found"),
    [
        (b'{"method":"tools/call","params":{"metadata":{"id":9}', b'},"jsonrpc":"2.0","id":2}\n', 2),  # the SDK's order
        (b'{"jsonrpc":"2.0","id":"a\\"b","method":"x","params":{"id":3', b"}}\n", 'a"b'),
        (b'{"method":"x","params":{', b'"id": 4}}\n', None),  # an id inside params is not the request's
    ],
)
def test_an_oversized_message_is_answered_for_its_own_id(head, tail, found):
    from memnets.integrations.mcp_stdio import request_id

    assert request_id(head, tail) == found


def _answer_to(process: subprocess.Popen, request_id: int, seconds: float) -> dict | None:
    """The JSON-RPC answer to ``request_id`` on the server's stdout, or None if it exits or stays silent."""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=1.0):
                continue
            line = process.stdout.readline()
            if not line:  # the server exited
                return None
            message = json.loads(line)
            if message.get("id") == request_id:
                return message
    return None


def test_a_line_nested_past_the_parsers_stack_leaves_the_stdio_server_serving(tmp_path, tiny_model_dir):
    """Before: a line with an escaped surrogate is parsed by Python's json to check its strings, and one
    nested past that parser's stack raised RecursionError out of the stdio reader: the server died."""
    nested = "[" * 5000 + '"\\ud800"' + "]" * 5000
    lines = [{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "NESTED"}}, HELLO]
    sent = "".join(json.dumps(line).replace('"NESTED"', nested) + "\n" for line in lines)
    command = [sys.executable, "-m", "memnets", "serve", "mcp", str(tmp_path / "memory")]
    command += ["--encoder", str(tiny_model_dir)]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as process:
        try:
            process.stdin.write(sent.encode())
            process.stdin.flush()
            answer = _answer_to(process, HELLO["id"], STARTUP_S)
        finally:
            process.kill()
    assert answer is not None and answer["result"]["serverInfo"]["name"], answer
