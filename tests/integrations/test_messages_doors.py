"""Messages through every door: the REST route (memnets.Client against a real server process), the MCP
tool add_messages (the SDK's client), LangChain message objects and LangGraph's MessagesState all take
the same transcript, write the same memories and give the same outcomes as ``AgentMemory.add(messages=...)``."""

from __future__ import annotations

import json

import anyio
import pytest

import memnets
from memnets.server.testing import ServerProcess

pytest.importorskip("mcp")
pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, AIMessageChunk, ChatMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph.message import add_messages
from mcp.shared.memory import create_connected_server_and_client_session

from memnets.integrations.chat import message_dicts
from memnets.integrations.langgraph import remember_messages
from memnets.integrations.mcp_server import build_server

EXACT = 0.9999  # the tiny random encoder puts every text near every other: merge identical texts only
ADMIN = "admin-token-for-message-tests"
CAROL = "carol-token-for-message-tests"  # reaches user carol only
CAROL_S1 = "carol-s1-token-for-message-tests"  # reaches carol's session s1 only
TRANSCRIPT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Rex", "time": "2024-03-01T12:00:00+00:00"},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "Rex is a fine name"}],
        "id": "a1",
        "time": "2024-03-01T12:01:00Z",
    },
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Rex", "time": "2024-03-01T12:02:00+00:00"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function"}]},
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Max", "time": "2024-03-01T12:03:00+00:00"},
]
EXPECTED = [  # (role, outcome, reason, content) per message; a memory as stored when the call returns
    ("system", "skipped", "role", None),
    ("user", "added", None, "Ann: I adopted a beagle named Max"),  # added, then changed by message 5
    ("assistant", "skipped", "role", None),  # the default stores what the user said (docs/memory.md)
    ("user", "unchanged", None, "Ann: I adopted a beagle named Max"),  # the same as message 1
    ("assistant", "skipped", "role", None),
    ("user", "updated", None, "Ann: I adopted a beagle named Max"),  # a changed name: message 1's new version
]
BAD = [{"role": "user", "content": "fine"}, {"content": "no role"}]


def summary(outcomes: list[dict]) -> list[tuple]:
    """(index, role, outcome, reason, content, metadata, t) of each outcome, from its JSON object."""
    out = []
    for o in outcomes:
        m = o["memory"]
        fields = (m["content"], m["metadata"], m["t"]) if m is not None else (None, None, None)
        out.append((o["index"], o["role"], o["outcome"], o["reason"], *fields))
    return out


def embedded_summary(outcomes) -> list[tuple]:
    return summary(
        [
            {
                "index": o.index,
                "role": o.role,
                "outcome": o.outcome,
                "reason": o.reason,
                "memory": None
                if o.memory is None
                else {"content": o.memory.content, "metadata": o.memory.metadata, "t": o.memory.t.isoformat()},
            }
            for o in outcomes
        ]
    )


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("messages-server")
    (folder / "tokens.json").write_text(json.dumps({CAROL: "carol", CAROL_S1: {"user": "carol", "session": "s1"}}))
    args = ["--encoder", str(tiny_model_dir), "--set", f"duplicate_threshold={EXACT}", "--token-env", "MEMNETS_ADMIN"]
    args += ["--tokens", str(folder / "tokens.json")]
    with ServerProcess(folder / "memory", *args, env={"MEMNETS_ADMIN": ADMIN}) as process:
        yield process.wait_ready(token=ADMIN)


def test_rest_and_mcp_take_the_same_messages_and_give_the_same_outcomes(server, tiny_model_dir, tmp_path):
    with memnets.open(tmp_path / "embedded", encoder=tiny_model_dir, duplicate_threshold=EXACT) as memory:
        embedded = embedded_summary(memory.add(messages=TRANSCRIPT, user="ann", session="s1"))
        with pytest.raises(ValueError) as embedded_error:
            memory.add(messages=BAD, user="bob")
    assert [(role, outcome, reason, content) for _, role, outcome, reason, content, *_ in embedded] == EXPECTED

    with memnets.Client(server.url, token=ADMIN) as client:
        rest = embedded_summary(client.add(messages=TRANSCRIPT, user="ann", session="s1"))
        again = client.add_many(TRANSCRIPT, user="ann", session="s1")  # add_many of messages: the same call
        with pytest.raises(ValueError) as rest_error:
            client.add(messages=BAD, user="bob")
        rest_stored = [(m.content, m.session) for m in client.list_memories(user="ann")]
        assert client.list_memories(user="bob") == []

    with memnets.open(tmp_path / "mcp", encoder=tiny_model_dir, duplicate_threshold=EXACT) as memory:

        async def run():
            async with create_connected_server_and_client_session(build_server(memory)) as session:
                first = await session.call_tool(
                    "add_messages", {"messages": TRANSCRIPT, "user_id": "ann", "session_id": "s1"}
                )
                second = await session.call_tool(
                    "add_messages", {"messages": TRANSCRIPT, "user_id": "ann", "session_id": "s1"}
                )
                bad = await session.call_tool("add_messages", {"messages": BAD, "user_id": "bob"})
                return first, second, bad

        first, second, bad = anyio.run(run)
        mcp_stored = [(m.content, m.session) for m in memory.list_memories(user="ann")]
        assert memory.list_memories(user="bob") == []
    assert not first.isError and first.structuredContent == json.loads(first.content[0].text)
    mcp = summary(first.structuredContent["outcomes"])

    assert rest == embedded and mcp == embedded
    assert [o.outcome for o in again] == [o["outcome"] for o in second.structuredContent["outcomes"]]
    # again, without ids: nothing changes. Rex was said before Max held, and the history says Rex held then
    # (before, Rex was made current again, then Max again: two new versions of every re-read transcript)
    assert [o.outcome for o in again] == ["skipped", "unchanged", "skipped", "unchanged", "skipped", "unchanged"]
    assert rest_stored == mcp_stored == [("Ann: I adopted a beagle named Max", "s1")]
    message = "messages[1].role is missing"
    assert message in str(embedded_error.value) and message in str(rest_error.value)
    assert bad.isError and message in bad.content[0].text


def test_a_token_of_one_user_cannot_add_messages_for_another(server):
    with memnets.Client(server.url, token=CAROL) as carol, pytest.raises(PermissionError):
        carol.add(messages=TRANSCRIPT, user="dave")
    with memnets.Client(server.url, token=CAROL) as carol:
        assert [o.outcome for o in carol.add(messages=TRANSCRIPT[1:3], user="carol")] == ["added", "skipped"]
    with memnets.Client(server.url, token=ADMIN) as admin:
        assert admin.list_memories(user="dave") == []


def test_a_token_narrowed_to_a_session_writes_messages_there_and_cannot_overwrite_another(server):
    with memnets.Client(server.url, token=ADMIN) as admin:
        admin.add(messages=[{"role": "user", "content": "kept in s2", "id": "x1"}], user="carol", session="s2")
    with memnets.Client(server.url, token=CAROL_S1) as narrowed:
        with pytest.raises(PermissionError, match="x1"):
            narrowed.add(messages=[{"role": "user", "content": "overwritten", "id": "x1"}], user="carol")
        [outcome] = narrowed.add(messages=[{"role": "user", "content": "said in s1"}], user="carol")
        assert outcome.outcome == "added" and outcome.memory.session == "s1"  # the token's scope, filled in
    with memnets.Client(server.url, token=ADMIN) as admin:
        assert admin.get("x1", user="carol").content == "user: kept in s2"


def test_langchain_messages_map_to_role_content_name_and_id():
    messages = [
        SystemMessage("Be brief."),
        HumanMessage("I live in Porto", name="Ann", id="h1"),
        AIMessage([{"type": "text", "text": "Porto is lovely"}], id="a1"),
        AIMessageChunk(content="streamed"),
        ToolMessage("42", tool_call_id="call_1"),
        ChatMessage(role="critic", content="Fine."),
        {"role": "user", "content": "a mapping passes through"},
    ]
    assert message_dicts(messages) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "I live in Porto", "name": "Ann", "id": "h1"},
        {"role": "assistant", "content": [{"type": "text", "text": "Porto is lovely"}], "id": "a1"},
        {"role": "assistant", "content": "streamed"},
        {"role": "tool", "content": "42"},
        {"role": "critic", "content": "Fine."},
        {"role": "user", "content": "a mapping passes through"},
    ]
    with pytest.raises(TypeError, match=r"messages\[1\] must be a LangChain BaseMessage or a mapping"):
        message_dicts([HumanMessage("ok"), "not a message"])
    with pytest.raises(TypeError, match="messages must be a list"):
        message_dicts(HumanMessage("one message, not a list"))


def test_add_takes_langchain_message_objects_as_they_are(tiny_model_dir, tmp_path):
    """``add(messages=[HumanMessage(...), ...])`` maps them as message_dicts does, mixed with mappings
    (before: "messages[0] must be a mapping ..., got HumanMessage"); a bad item still writes nothing."""
    messages = [
        HumanMessage("I adopted a beagle named Rex", name="Ann", id="h1"),
        {"role": "assistant", "content": "Nice"},
    ]
    with memnets.open(tmp_path / "memory", encoder=tiny_model_dir, duplicate_threshold=EXACT) as memory:
        with pytest.raises(TypeError, match=r"messages\[1\] must be a mapping"):
            memory.add(messages=[HumanMessage("He is two"), 42], user="ann")
        outcomes = memory.add(messages=messages, user="ann")
        assert [(o.outcome, o.role) for o in outcomes] == [("added", "user"), ("skipped", "assistant")]
        assert [(m.id, m.content) for m in memory.list_memories(user="ann")][0] == (
            "h1",
            "Ann: I adopted a beagle named Rex",
        )
        assert [o.outcome for o in memory.add_many(messages, user="ann")] == ["unchanged", "skipped"]
        assert [o.outcome for o in memory.add_many([HumanMessage("He is two", id="h2")], user="ann")] == ["added"]


def test_the_client_sends_langchain_message_objects_as_the_embedded_api_takes_them(server):
    """memnets.Client.add / add_many with LangChain message objects: sent as their mappings (before: the
    objects were not JSON), with the outcomes the embedded API gives."""
    with memnets.Client(server.url, token=ADMIN) as client:
        outcomes = client.add(messages=[HumanMessage("Dana keeps bees", name="Dana", id="lc-1")], user="dana")
        assert [(o.outcome, o.role, o.memory.id) for o in outcomes] == [("added", "user", "lc-1")]
        again = client.add_many(
            [HumanMessage("Dana keeps bees", name="Dana", id="lc-1"), AIMessage("Lovely")], user="dana"
        )
        assert [o.outcome for o in again] == ["unchanged", "skipped"]


def test_remember_messages_writes_a_messages_state_and_again_only_what_is_new(tiny_model_dir, tmp_path):
    state = {"messages": add_messages([], [HumanMessage("I adopted a beagle named Rex", name="Ann")])}
    state["messages"] = add_messages(state["messages"], [AIMessage("What a good name")])  # ids given by LangGraph
    with memnets.open(tmp_path / "memory", encoder=tiny_model_dir, duplicate_threshold=EXACT) as memory:
        first = remember_messages(memory, state, user="ann", session="thread-1")
        state["messages"] = add_messages(state["messages"], [HumanMessage("He is two", name="Ann")])
        second = remember_messages(memory, state, user="ann", session="thread-1")
        assert [o.outcome for o in first] == ["added", "skipped"]  # the assistant's reply: not by default
        assert [o.outcome for o in second] == ["unchanged", "skipped", "added"]
        stored = memory.list_memories(user="ann")
        assert [m.id for m in stored] == [message.id for message in state["messages"] if message.type == "human"]
        assert [(m.content, m.session, m.metadata["role"]) for m in stored] == [
            ("Ann: I adopted a beagle named Rex", "thread-1", "user"),
            ("Ann: He is two", "thread-1", "user"),
        ]
