"""As-of reads and the validity fields through the other doors: the LangGraph store's ``$as_of`` /
``$known_at`` filter keys, the MCP tools' ``as_of`` / ``known_at`` and memory fields, the CLI's
``--as-of`` / ``--known-at`` and its JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import anyio
import pytest

import memnets
from memnets.cli import EXIT_USAGE, main
from memnets.integrations.langgraph import MemnetsStore
from memnets.integrations.mcp_server import build_server

JAN, JUN, DEC = (datetime(2024, month, 1, tzinfo=UTC) for month in (1, 6, 12))
DATES = {"2024-03-01": "Paris", "2024-09-01": "Berlin", "2025-03-01": "Rome"}


@pytest.fixture
def folder(tmp_path, tiny_model_dir):
    """A memory where Ann's city changed twice (the memory "city" of user "people.ann")."""
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=tiny_model_dir, duplicate_threshold=None) as memory:
        memory.add("Ann lives in Paris", user="people.ann", id="city", t=JAN)
        memory.update("city", "Ann lives in Berlin", user="people.ann", t=JUN)
        memory.update("city", "Ann lives in Rome", user="people.ann", t=DEC)
    return folder


def test_the_langgraph_store_reads_as_of_by_filter_key(folder, tiny_model_dir):
    with memnets.open(folder, encoder=tiny_model_dir) as memory:
        store = MemnetsStore(memory)
        for when, city in DATES.items():
            found = store.search(("people", "ann"), query="Where does Ann live?", filter={"$as_of": when})
            assert [item.value["content"] for item in found] == [f"Ann lives in {city}"]
            listed = store.search(("people", "ann"), filter={"$as_of": datetime.fromisoformat(when)})
            assert [item.value["content"] for item in listed] == [f"Ann lives in {city}"]
        known = store.search(("people", "ann"), filter={"$known_at": "2024-09-01"})
        assert [item.value["content"] for item in known] == ["Ann lives in Berlin"]
        with pytest.raises(ValueError, match=r"filter \$as_of 'last spring' is not an ISO 8601 time"):
            store.search(("people", "ann"), filter={"$as_of": "last spring"})


def test_the_mcp_tools_read_as_of_and_show_validity(folder, tiny_model_dir):
    with memnets.open(folder, encoder=tiny_model_dir) as memory:
        server = build_server(memory)

        def tool(name: str, **arguments) -> dict:
            result = anyio.run(server.call_tool, name, arguments)
            content = result[0] if isinstance(result, tuple) else result
            return json.loads(content[0].text)

        for when, city in DATES.items():
            found = tool("search_memory", query="Where?", user_id="people.ann", as_of=when)
            [hit] = found["results"]
            assert hit["content"] == f"Ann lives in {city}" and "valid_from" in hit and "valid_to" in hit
        listed = tool("list_memories", user_id="people.ann", known_at="2024-09-01")
        assert [(m["content"], m["valid_to"]) for m in listed["memories"]] == [("Ann lives in Berlin", None)]
        now = tool("get_memory", memory_id="city", user_id="people.ann")
        assert (now["valid_from"], now["valid_to"]) == (DEC.isoformat(), None)


def test_the_cli_lists_and_searches_as_of(folder, tiny_model_dir, capsys):
    at = ["memories", str(folder), "--encoder", str(tiny_model_dir)]
    for when, city in DATES.items():
        assert main([*at, "list", "--user", "people.ann", "--as-of", when, "--json"]) == 0
        [listed] = json.loads(capsys.readouterr().out)
        assert listed["content"] == f"Ann lives in {city}" and "valid_from" in listed
        assert main([*at, "search", "Where?", "--user", "people.ann", "--as-of", when, "--json"]) == 0
        assert [m["content"] for m in json.loads(capsys.readouterr().out)] == [f"Ann lives in {city}"]
    assert main([*at, "list", "--user", "people.ann", "--known-at", "2024-09-01", "--json"]) == 0
    [known] = json.loads(capsys.readouterr().out)
    assert (known["content"], known["valid_to"]) == ("Ann lives in Berlin", None)
    assert main([*at, "list", "--user", "people.ann", "--as-of", "last spring"]) == EXIT_USAGE
    assert "not an ISO 8601 time" in capsys.readouterr().err
