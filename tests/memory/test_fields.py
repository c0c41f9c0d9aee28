"""The one model of a write's and a search's arguments (memnets/memory/fields.py) is what every door says:
the API's signatures take the arguments it lists, the OpenAPI document's bodies are made of them (types,
meanings, bounds, required ones), the MCP tools describe them in its words, and add_messages is a call of
its own with its own return type."""

from __future__ import annotations

import inspect

import anyio
import pytest
from starlette.testclient import TestClient

import memnets
from memnets.api import AgentMemory
from memnets.memory.fields import ARGUMENTS, CALLS, MEMORY_FIELDS, MemoryFields
from memnets.memory.manager import MemoryManager
from memnets.memory.messages import MessageOutcome
from memnets.records import MEMORY_KINDS


def _takes(function, renamed: dict[str, str], left_out: set[str] = frozenset()) -> set[str]:
    names = [name for name in inspect.signature(function).parameters if name != "self"]
    return {renamed.get(name, name) for name in names} - set(left_out)


@pytest.mark.parametrize(
    ("call", "function", "renamed", "left_out"),
    [
        ("add", AgentMemory.add, {"text_or_record": "text"}, {"messages", "keep", "roles"}),  # add(messages=...)
        ("add_many", AgentMemory.add_many, {}, {"keep", "roles"}),  # add_many of messages
        ("add_messages", AgentMemory.add_messages, {}, set()),
        ("update", AgentMemory.update, {}, {"id"}),  # the id is the route's path
        ("observe", MemoryManager.observe, {"content": "text"}, set()),
        ("context", MemoryManager.context_for, {}, set()),
    ],
)
def test_each_call_takes_the_arguments_the_model_lists(call, function, renamed, left_out):
    assert _takes(function, renamed, left_out) == set(CALLS[call].takes)
    assert set(CALLS[call].takes) <= set(ARGUMENTS)


def test_a_memory_s_fields_are_add_s_and_add_many_s_keyword_arguments():
    assert MEMORY_FIELDS == tuple(name for name in inspect.signature(MemoryFields).parameters)
    for method in (AgentMemory.add, AgentMemory.add_many):
        parameters = inspect.signature(method).parameters
        assert {name: parameters[name].default for name in MEMORY_FIELDS} == MemoryFields().as_dict()


@pytest.fixture(scope="module")
def document() -> dict:
    from memnets.server.app import create_app

    return TestClient(create_app(lambda wrap: None)).get("/openapi.json").json()  # the memory is never opened


@pytest.mark.parametrize(
    ("body", "call"),
    [
        ("AddText", "add"),
        ("AddRecord", "add_record"),
        ("AddItems", "add_many"),
        ("AddMessages", "add_messages"),
        ("Search", "search"),
        ("SearchMany", "search_many"),
        ("Update", "update"),
        ("Observe", "observe"),
        ("Context", "context"),
    ],
)
def test_the_openapi_bodies_are_made_from_the_model(document, body, call):
    schema = document["components"]["schemas"][body]
    assert list(schema["properties"]) == list(CALLS[call].takes)
    assert schema.get("required", []) == list(CALLS[call].needs)
    assert schema["additionalProperties"] is False
    for name, field in schema["properties"].items():
        assert field["description"] == ARGUMENTS[name].description
        assert "default" not in field  # the API's default, not restated
        for keyword, bound in (ARGUMENTS[name].bounds or {}).items():
            assert field[keyword] == bound


def test_the_openapi_document_types_the_values(document):
    schemas = document["components"]["schemas"]
    text = schemas["AddText"]["properties"]
    assert text["t"] == {**text["t"], "type": "string", "format": "date-time"}
    assert text["kind"]["enum"] == list(MEMORY_KINDS)
    assert text["importance"]["type"] == "number" and (
        text["importance"]["minimum"],
        text["importance"]["maximum"],
    ) == (0, 1)
    record = schemas["AddRecord"]["properties"][
        "record"
    ]  # Memory's schema (inlined by pydantic beside the description)
    assert (
        set(record["properties"]) == set(schemas["Memory-Output"]["properties"]) and not record["additionalProperties"]
    )
    assert schemas["AddItems"]["properties"]["items"]["items"]["anyOf"][1] == {
        "$ref": "#/components/schemas/Memory-Input"
    }
    assert schemas["AddMessages"]["properties"]["messages"]["items"]["$ref"] == "#/components/schemas/ChatMessage"
    assert set(schemas["Search"]["properties"]["filters"]["properties"]) >= {"kind", "metadata", "since", "$and"}
    add = document["paths"]["/v1/memories"]["post"]
    assert add["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/AddBody"}
    assert [ref["$ref"].rsplit("/", 1)[1] for ref in schemas["AddBody"]["oneOf"]] == [
        "AddText",
        "AddRecord",
        "AddItems",
        "AddMessages",
    ]
    answers = add["responses"]["200"]["content"]["application/json"]["schema"]["oneOf"]
    assert [ref["$ref"].rsplit("/", 1)[1] for ref in answers] == ["MemoryAnswer", "MemoriesAnswer", "OutcomesAnswer"]
    memory = schemas["Memory-Output"]
    assert set(memory["required"]) == set(memory["properties"])  # every field of an answered memory is sent
    assert schemas["MessageOutcome"]["properties"]["outcome"]["enum"] == ["added", "updated", "unchanged", "skipped"]


def test_the_mcp_tools_describe_the_arguments_in_the_model_s_words():
    pytest.importorskip("mcp")
    from memnets.integrations.mcp_server import build_server

    tools = {tool.name: tool.inputSchema for tool in anyio.run(build_server(object()).list_tools)}
    for tool, argument in (("add_messages", "keep"), ("add_messages", "roles"), ("search_memory", "filters")):
        assert tools[tool]["properties"][argument]["description"] == ARGUMENTS[argument].description
    assert tools["add_memory"]["properties"]["kind"]["enum"] == list(MEMORY_KINDS)


CHAT = [
    {"role": "system", "content": "be kind"},
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Rex"},
]


def test_add_messages_is_a_call_of_its_own_and_add_of_messages_is_it(tmp_path, tiny_model_dir):
    with memnets.open(tmp_path / "memory", encoder=tiny_model_dir) as memory:
        first = memory.add_messages(CHAT, user="ann", session="s1", metadata={"topic": "pets"})
        assert all(isinstance(outcome, MessageOutcome) for outcome in first)
        assert [(o.outcome, o.reason) for o in first] == [("skipped", "role"), ("added", None)]
        added = first[1].memory
        assert (added.content, added.session, added.metadata) == (
            "Ann: I adopted a beagle named Rex",
            "s1",
            {"topic": "pets", "role": "user", "speaker": "Ann"},
        )
        again = memory.add(messages=CHAT, user="ann", session="s1", metadata={"topic": "pets"})
        assert [o.outcome for o in again] == ["skipped", "unchanged"] and again[1].memory.id == added.id
        with pytest.raises(TypeError, match="action"):
            memory.add_messages(CHAT, user="ann", action="adopted")  # a message has no structured view
        with pytest.raises(ValueError, match=r"go without \['id', 'action'\]"):
            memory.add(messages=CHAT, user="ann", id="x", action="adopted")
