"""`memnets serve mcp`: the real command in a subprocess, driven by the mcp SDK's own client.

The server runs on the tiny random encoder (``--encoder``), so search is only checked where any
encoder is exact: a query equal to a memory's text finds it first. What the server wrote is read
back afterwards through ``memnets.open`` on the same folder.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from successor_helpers import KS, QUESTION, LyonJudge, check_current_first, facts

import memnets

TOOLS = {
    "add_memory",
    "add_messages",
    "search_memory",
    "list_memories",
    "get_memory",
    "memory_history",
    "update_memory",
    "delete_memory",
    "delete_all_memories",
}
FLIGHT = "Carol's flight to Berlin leaves at 10:30 on Monday"
LATER = "Carol's flight to Berlin leaves at 11:30 on Monday"
OUTCOMES = ["added", "updated", "unchanged", "added"]
STARTUP_S = 180  # importing torch and transformers on a loaded 2-core machine is slow


def server_args(folder, encoder_dir, *extra) -> list[str]:
    return ["-m", "memnets", "serve", "mcp", str(folder), "--encoder", str(encoder_dir), *extra]


@asynccontextmanager
async def stdio_session(folder, encoder_dir, *extra, errlog=sys.stderr):
    params = StdioServerParameters(
        command=sys.executable, args=server_args(folder, encoder_dir, *extra), env=dict(os.environ)
    )
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(STARTUP_S):
            await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments) -> dict:
    """A tool's structured result; fails the test on a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    assert result.structuredContent == json.loads(result.content[0].text)
    return result.structuredContent


async def error_of(session: ClientSession, tool: str, **arguments) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.isError
    return result.content[0].text


def test_raw_stdio_names_memnets_version_and_answers_a_lone_surrogate_with_a_parse_error(tmp_path, tiny_model_dir):
    """Raw JSON-RPC lines to the real stdio server: serverInfo.version is memnets'; a string holding
    an escaped lone surrogate (which the SDK's parser refuses without a reply) gets a -32700 reply
    with its id, and the server answers the next request."""
    import queue
    import threading

    server = subprocess.Popen(
        [sys.executable, *server_args(tmp_path / "memory", tiny_model_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    replies: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [replies.put(json.loads(line)) for line in server.stdout], daemon=True).start()

    def send(line: str) -> None:
        server.stdin.write(line.encode() + b"\n")
        server.stdin.flush()

    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        reply = replies.get(timeout=STARTUP_S)
        assert reply["result"]["serverInfo"] == {"name": "memnets", "version": memnets.__version__}
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        lone = '{"name": "add_memory", "arguments": {"text": "a \\ud800 b", "user_id": "u"}}'  # \ud800 escaped
        send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ' + lone + "}")
        reply = replies.get(timeout=120)
        assert reply["id"] == 2 and reply["error"]["code"] == -32700, reply
        assert "lone UTF-16 surrogate" in reply["error"]["message"]
        send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
        reply = replies.get(timeout=120)
        assert reply["id"] == 3 and "add_memory" in {tool["name"] for tool in reply["result"]["tools"]}
    finally:
        server.stdin.close()
        server.wait(timeout=60)


def test_stdio_round_trip(tmp_path, tiny_model_dir):
    folder = tmp_path / "memory"
    server_log = tmp_path / "server.log"

    async def run():
        with server_log.open("w") as errlog:
            async with stdio_session(folder, tiny_model_dir, errlog=errlog) as session:
                return await round_trip(session)

    async def round_trip(session):
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
        tea = await call(
            session, "add_memory", text="Alice drinks green tea", user_id="alice", metadata={"source": "chat"}
        )
        await call(session, "add_memory", text="Alice lives in Lisbon", user_id="alice")
        await call(session, "add_memory", text="Bob plays chess", user_id="bob")
        assert tea["content"] == "Alice drinks green tea" and tea["metadata"] == {"source": "chat"}
        found = await call(session, "search_memory", query="Alice drinks green tea", user_id="alice", k=5)
        assert found["results"][0]["id"] == tea["id"]
        assert len(found["results"]) == 2  # only alice's memories
        assert found["results"][0]["score"] >= found["results"][1]["score"]
        listed = await call(session, "list_memories", user_id="alice", limit=1, offset=1)
        assert [m["content"] for m in listed["memories"]] == ["Alice lives in Lisbon"]
        got = await call(session, "get_memory", memory_id=tea["id"], user_id="alice")
        assert got["content"] == "Alice drinks green tea"
        assert "no memory" in await error_of(session, "get_memory", memory_id=tea["id"], user_id="bob")
        updated = await call(
            session, "update_memory", memory_id=tea["id"], text="Alice drinks black tea", user_id="alice"
        )
        assert updated["id"] == tea["id"] and updated["content"] == "Alice drinks black tea"
        assert "no memory" in await error_of(session, "update_memory", memory_id="nope", text="x", user_id="alice")
        # metadata only: the text stays, the metadata is replaced, both versions are in the history
        relabelled = await call(
            session, "update_memory", memory_id=tea["id"], user_id="alice", metadata={"source": "form"}
        )
        assert relabelled["content"] == "Alice drinks black tea" and relabelled["metadata"] == {"source": "form"}
        history = await call(session, "memory_history", memory_id=tea["id"], user_id="alice")
        assert [(v["content"], v["metadata"]) for v in history["versions"]] == [
            ("Alice drinks green tea", {"source": "chat"}),
            ("Alice drinks black tea", {"source": "chat"}),
            ("Alice drinks black tea", {"source": "form"}),
        ]
        assert "no memory" in await error_of(session, "memory_history", memory_id="nope", user_id="alice")
        assert "give text, metadata" in await error_of(session, "update_memory", memory_id=tea["id"], user_id="alice")
        # filters are applied in the store, before ranking: the query is the other memory's text
        lisbon_query = {"query": "Alice lives in Lisbon", "user_id": "alice", "k": 5}
        only = await call(session, "search_memory", **lisbon_query, filters={"metadata": {"source": "form"}})
        assert [m["id"] for m in only["results"]] == [tea["id"]]
        ops = await call(
            session, "search_memory", **lisbon_query, filters={"metadata": {"source": {"$in": ["web", "x"]}}}
        )
        assert ops["results"] == []
        listed = await call(
            session, "list_memories", user_id="alice", filters={"metadata": {"source": {"$ne": "form"}}}
        )
        assert [m["content"] for m in listed["memories"]] == ["Alice lives in Lisbon"]
        assert "unknown operators ['$regex']" in await error_of(
            session, "search_memory", **lisbon_query, filters={"metadata": {"source": {"$regex": "f.*"}}}
        )
        # an argument no tool takes is an error the client sees, naming it
        unknown = await error_of(session, "search_memory", **lisbon_query, filter={"metadata": {}})
        assert "unknown argument filter (this tool takes query, user_id, k, filters" in unknown
        # the API's outcomes: added, an update when a time changes (same id), unchanged on a repeat
        outcomes = [
            await call(session, "add_memory", text=text, user_id="carol")
            for text in (FLIGHT, LATER, LATER.lower(), "Carol keeps bees")
        ]
        assert [o["outcome"] for o in outcomes] == OUTCOMES
        assert outcomes[0]["id"] == outcomes[1]["id"] == outcomes[2]["id"] != outcomes[3]["id"]
        assert outcomes[1]["content"] == LATER and outcomes[1]["created_at"] == outcomes[0]["created_at"]
        assert await call(session, "delete_all_memories", user_id="carol") == {"deleted": 2}
        assert await call(session, "delete_all_memories", user_id="bob") == {"deleted": 1}
        lisbon = (await call(session, "search_memory", query="Alice lives in Lisbon", user_id="alice", k=1))["results"][
            0
        ]
        assert await call(session, "delete_memory", memory_id=lisbon["id"], user_id="alice") == {"deleted": True}
        assert await call(session, "delete_memory", memory_id=lisbon["id"], user_id="alice") == {"deleted": False}
        return tea["id"]

    tea_id = anyio.run(run)
    # quiet: no line per call, no loader lines, no progress bars; only what went wrong would show
    assert server_log.read_text() == ""
    # what the server wrote is in the memory folder
    with memnets.open(folder, encoder=tiny_model_dir) as memory:
        added = [memory.add(text, user="dan").outcome for text in (FLIGHT, LATER, LATER.lower(), "Carol keeps bees")]
        assert added == OUTCOMES  # the API in this process says what the server said
        memory.delete_all(user="dan")
        assert memory.users() == ["alice"]
        assert [m.content for m in memory.list_memories(user="alice")] == ["Alice drinks black tea"]
        assert memory.get(tea_id, user="alice").metadata == {"source": "form"}


def test_search_memory_never_answers_a_stale_fact_above_its_successor(tmp_path, tiny_model_dir):
    """Leo's memories (successor_helpers) written with a judge that ended "Leeds" by "Lyon", then searched
    through the real stdio server at k = 1, 3 and 10: the successor first, the stale fact right after it
    (marked by its invalidated_by), one order, scores non-increasing."""
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=tiny_model_dir, supersession=LyonJudge()) as memory:
        written = [memory.add(text, user="leo", t=when) for text, when in facts()]

    async def run():
        async with stdio_session(folder, tiny_model_dir) as session:
            return {k: await call(session, "search_memory", query=QUESTION, user_id="leo", k=k) for k in KS}

    answers = {k: found["results"] for k, found in anyio.run(run).items()}
    check_current_first({k: [(hit["content"], hit["score"]) for hit in hits] for k, hits in answers.items()})
    assert answers[3][1]["invalidated_by"] == written[1].id == answers[3][0]["id"]
    assert answers[3][1]["invalidation_score"] == 1.0 and answers[3][1]["likely_replaced_score"] is None  # as REST


def test_single_user_server_refuses_other_users(tmp_path, tiny_model_dir):
    """``--user``: the server object in this process, reached by the SDK's client over its in-memory transport."""
    from mcp.shared.memory import create_connected_server_and_client_session

    from memnets.integrations.mcp_server import build_server

    with memnets.open(tmp_path / "memory", encoder=tiny_model_dir) as memory:
        server = build_server(memory, user="alice")

        async def run():
            async with create_connected_server_and_client_session(server) as session:
                secret = await call(session, "add_memory", text="Alice's secret", user_id="alice")
                for tool, args in [
                    ("add_memory", {"text": "intrusion"}),
                    ("add_messages", {"messages": [{"role": "user", "content": "intrusion"}]}),
                    ("search_memory", {"query": "Alice's secret"}),
                    ("list_memories", {}),
                    ("get_memory", {"memory_id": secret["id"]}),
                    ("update_memory", {"memory_id": secret["id"], "text": "overwritten"}),
                    ("delete_memory", {"memory_id": secret["id"]}),
                    ("delete_all_memories", {}),
                ]:
                    message = await error_of(session, tool, user_id="mallory", **args)
                    assert "serves user 'alice' only" in message and "'mallory'" in message
                empty = await error_of(session, "list_memories", user_id="")
                assert empty.endswith("argument user_id: must be non-empty text")

        anyio.run(run)
        assert memory.users() == ["alice"]
        assert [m.content for m in memory.list_memories(user="alice")] == ["Alice's secret"]
        with pytest.raises(ValueError, match="user"):
            build_server(memory, user="")


BAD_ARGUMENTS = [  # (tool, arguments besides user_id, the start of the one-line answer)
    ("search_memory", {"query": "x", "k": 0}, "argument k: must be at least 1, got 0"),
    ("search_memory", {"query": "x", "k": 101}, "argument k: must be at most 100, got 101"),
    ("search_memory", {"query": ""}, "argument query: must be non-empty text"),
    ("add_memory", {}, "argument text is required"),
    ("add_memory", {"text": "hi", "kind": "observaton"}, "argument kind: must be 'observation', 'reflection'"),
    ("add_memory", {"text": "hi", "ttl": 5}, "unknown argument ttl (this tool takes text, user_id, metadata"),
    ("list_memories", {"limit": "ten"}, "argument limit: must be a valid integer"),
]


def test_a_bad_argument_is_one_line_naming_it(tmp_path, tiny_model_dir):
    """Through the real `memnets serve mcp` over stdio: the answer to a bad argument was pydantic's dump (several
    lines, the model's internal name, a link to pydantic's docs); it is one line naming the argument."""

    async def run():
        async with stdio_session(tmp_path / "memory", tiny_model_dir) as session:
            return [await error_of(session, tool, user_id="ann", **arguments) for tool, arguments, _ in BAD_ARGUMENTS]

    for message, (tool, _, answer) in zip(anyio.run(run), BAD_ARGUMENTS, strict=True):
        assert message.startswith(f"Error executing tool {tool}: {answer}"), message
        assert "\n" not in message and "pydantic" not in message and "Arguments" not in message


TOKEN = "s3cret-token-for-the-test"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_streamable_http_round_trip_with_a_pack_behind_a_bearer_token(tmp_path, tiny_model_dir):
    """Streamable HTTP on 127.0.0.1, the memory opened with ``--pack`` (its encoder and learned scorer),
    every request gated by the token named with ``--token-env``: without it or with another, 401."""
    import httpx

    from memnets.nn.encoder import MemoryEncoder
    from memnets.pack import export_pack
    from memnets.scoring import ScorerWeights

    pack = export_pack(
        tmp_path / "pack",
        MemoryEncoder.from_pretrained(tiny_model_dir),
        scorer_weights=ScorerWeights(recency=0.0, relevance=1.0, importance=0.0, bias=5.0),
    )
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("w") as stderr:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memnets",
                "serve",
                "mcp",
                str(tmp_path / "memory"),
                "--pack",
                str(pack),
                "--transport",
                "http",
                "--port",
                str(port),
                "--token-env",
                "MEMNETS_TEST_MCP_TOKEN",
                "--set",
                "search=dense",  # the learned score alone, not its fusion with the lexical one
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=dict(os.environ, MEMNETS_TEST_MCP_TOKEN=TOKEN),
        )
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert server.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start listening"
                time.sleep(0.5)

        url = f"http://127.0.0.1:{port}/mcp"
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        accept = {"Accept": "application/json, text/event-stream"}
        for headers in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": TOKEN}):
            refused = httpx.post(url, json=hello, headers=accept | headers, timeout=10)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"

        async def run():
            async with (
                streamablehttp_client(url, headers={"Authorization": f"Bearer {TOKEN}"}) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                added = await call(session, "add_memory", text="Carol collects stamps", user_id="carol")
                found = await call(session, "search_memory", query="Carol collects stamps", user_id="carol")
                return added, found

        added, found = anyio.run(run)
        assert found["results"][0]["id"] == added["id"]
    finally:
        server.terminate()
        server.wait(timeout=30)
    # the score is the pack's learned score (its bias of 5 puts it above any cosine)
    with memnets.open(tmp_path / "memory", pack=pack, search="dense") as memory:
        expected = memory.search("Carol collects stamps", user="carol", k=1)[0].score
    assert found["results"][0]["score"] == pytest.approx(expected)
    assert found["results"][0]["score"] > 4.0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pack", "p", "--encoder", "e"], "not both"),
        (["--user", " "], "--user must be a non-empty"),
        (["--port", "0"], "--port must be in 1..65535"),
        (["--key-env", "MEMNETS_TEST_UNSET_KEY"], "MEMNETS_TEST_UNSET_KEY is not set"),
        (["--transport", "sse"], "invalid choice"),
        (["--transport", "http", "--host", "0.0.0.0"], "reachable from other machines"),
        (["--transport", "http", "--host", "memory.example.org"], "reachable from other machines"),
        (["--transport", "http", "--token-env", "MEMNETS_TEST_UNSET_KEY"], "MEMNETS_TEST_UNSET_KEY is not set"),
        (["--token-env", "PATH"], "http transport only"),
    ],
)
def test_serve_command_refuses_bad_arguments(tmp_path, capsys, monkeypatch, extra, message):
    from memnets.cli import main

    monkeypatch.delenv("MEMNETS_TEST_UNSET_KEY", raising=False)
    assert main(["serve", "mcp", str(tmp_path / "memory"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "memory").exists()  # nothing opened or created


def test_serve_mcp_takes_location_as_serve_http_does_and_memory_as_a_deprecated_alias(tmp_path, capsys):
    from memnets.cli import main

    folder = str(tmp_path / "memory")
    assert main(["serve", "mcp", "--memory", folder, "--token-env", "PATH"]) == 2  # parsed up to the stdio check
    err = capsys.readouterr().err
    assert "--memory DIR is deprecated, give LOCATION as the first argument" in err and "http transport only" in err
    assert main(["serve", "mcp", folder, "--memory", folder]) == 2
    assert "give LOCATION once" in capsys.readouterr().err
    assert main(["serve", "mcp"]) == 2
    assert "LOCATION is required" in capsys.readouterr().err
    assert not (tmp_path / "memory").exists()


def test_serve_command_reports_an_unopenable_memory(tmp_path, tiny_model_dir, capsys):
    from memnets.cli import main

    with memnets.open(tmp_path / "memory", encoder=tiny_model_dir):
        pass  # a 32-d memory
    assert main(["serve", "mcp", str(tmp_path / "memory"), "--encoder", str(tmp_path / "missing")]) == 1
    assert "cannot open the memory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
        ("::", False),
        ("localhost.example.org", False),
    ],
)
def test_only_loopback_hosts_may_serve_http_without_a_token(host, loopback):
    from memnets.integrations.mcp_server import check_exposure
    from memnets.netutil import is_loopback

    assert is_loopback(host) is loopback
    if loopback:
        check_exposure("http", host, None)
    else:
        with pytest.raises(ValueError, match="reachable from other machines"):
            check_exposure("http", host, None)
    check_exposure("http", host, "a token")  # with a token any host is allowed


def test_the_schemas_in_the_docs_are_the_servers(tmp_path, tiny_model_dir):
    """docs/integrations.md shows every tool's input schema as tools/list returns it."""
    import re
    from pathlib import Path

    from memnets.integrations.mcp_server import build_server, filters_schema
    from memnets.store.filters import OPERATORS

    page = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    shown = json.loads(re.search(r"<!-- mcp-schemas -->\n```json\n(.*?)```", page, re.S).group(1))
    with memnets.open(tmp_path / "memory", encoder=tiny_model_dir) as memory:
        tools = anyio.run(build_server(memory).list_tools)
    assert shown == {tool.name: tool.inputSchema for tool in tools}
    assert set(shown) == TOOLS
    condition = filters_schema()["properties"]["metadata"]["additionalProperties"]["anyOf"][1]
    assert set(condition["properties"]) == set(OPERATORS)  # every operator of the API, no other
    assert all(schema["additionalProperties"] is False for schema in shown.values())
