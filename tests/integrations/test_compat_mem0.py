"""The mem0-compatible facade (memnets.compat.mem0): mem0's documented calls run unchanged after the import.

The calls below are copied from mem0's own documentation (docs.mem0.ai, the open-source Python
quickstart: add / get_all / get / search / update / history / delete / delete_all / reset, and its
config examples); only the config points at a memnets store, the tiny encoder and a local fake
OpenAI-compatible server (memnets.training.fake_llm) instead of OpenAI. Both stores: a folder and PostgreSQL.
"""

from __future__ import annotations

import json

import pytest

from memnets.compat.mem0 import SHARED_USER, ExtractionError, LLMNotConfiguredError, Memory
from memnets.memory import extraction_prompts as prompts
from memnets.training.fake_llm import FakeChatServer

MOVIE_MESSAGES = [
    {"role": "user", "content": "I'm planning to watch a movie tonight. Any recommendations?"},
    {"role": "assistant", "content": "How about a thriller movies? They can be quite engaging."},
    {"role": "user", "content": "I'm not a big fan of thriller movies but I love sci-fi movies."},
    {
        "role": "assistant",
        "content": "Got it! I'll avoid thriller recommendations and suggest sci-fi movies in the future.",
    },
]
MOVIE_FACTS = ["Is not a big fan of thriller movies", "Loves sci-fi movies"]
EXACT = 0.9999  # the tiny random encoder puts every text near every other: merge identical texts only
ITEM_KEYS = {"id", "memory", "hash", "metadata", "created_at", "updated_at", "user_id"}


def movie_model(messages: list[dict]) -> str:
    """A scripted model: the movie facts from message 2; ADD what no shown memory says, else NONE."""
    if messages[0]["content"] == prompts.FACTS_SYSTEM:
        return json.dumps({"facts": [{"text": fact, "messages": [2]} for fact in MOVIE_FACTS]})
    shown = messages[1]["content"].split("New facts:")[0]
    return json.dumps(
        {
            "decisions": [
                {"fact": n, "event": "NONE" if f"] {fact}\n" in shown else "ADD"} for n, fact in enumerate(MOVIE_FACTS)
            ]
        }
    )


@pytest.fixture(autouse=True)
def no_llm_in_the_environment(monkeypatch):
    """Without an ``llm`` in the config, mem0's environment variables would choose one (tests/integrations/test_compat_mem0_docs.py)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def model():
    with FakeChatServer(respond=movie_model) as server:
        yield server


def config(where: str, encoder, server=None, **memnets_options) -> dict:
    """A mem0 config dict: mem0's LLM section (Ollama's example shape) on the fake server, memnets' store."""
    settings = {"memnets": {"location": where, "encoder": encoder, "duplicate_threshold": EXACT, **memnets_options}}
    if server is not None:
        settings["llm"] = {
            "provider": "ollama",
            "config": {"model": "mixtral:8x7b", "temperature": 0.1, "max_tokens": 2000, "ollama_base_url": server.url},
        }
    return settings


def test_the_open_source_quickstart_runs_unchanged(location, encoder, model):
    where, options = location
    m = Memory.from_config(config(where, encoder, model, **options))

    # Store inferred memories (default behavior)
    result = m.add(MOVIE_MESSAGES, user_id="alice", metadata={"category": "movie_recommendations"})
    assert [(r["memory"], r["event"]) for r in result["results"]] == [(fact, "ADD") for fact in MOVIE_FACTS]
    # Store memories with agent and run context
    result = m.add(
        MOVIE_MESSAGES,
        user_id="alice",
        agent_id="movie-assistant",
        run_id="session-001",
        metadata={"category": "movie_recommendations"},
    )
    assert [r["event"] for r in result["results"]] == ["ADD", "ADD"]  # another scope keeps its own statements
    # Store raw messages without inference
    result = m.add(MOVIE_MESSAGES, user_id="alice", metadata={"category": "movie_recommendations"}, infer=False)
    # each message as memnets stores one (memnets.memory.messages): "{speaker}: {text}", its role shown
    expected = [(f"{x['role']}: {x['content']}", x["role"]) for x in MOVIE_MESSAGES]
    assert [(r["memory"], r["role"]) for r in result["results"]] == expected
    assert len(model.requests) == 4  # two calls per inferred add, none for infer=False

    # Get all memories
    all_memories = m.get_all(user_id="alice")
    items = all_memories["results"]
    assert len(items) == 8 and all(ITEM_KEYS <= set(item) for item in items)
    assert all(item["user_id"] == "alice" and item["metadata"]["category"] == "movie_recommendations" for item in items)
    scoped = [item for item in items if "agent_id" in item]
    assert [(i["memory"], i["agent_id"], i["run_id"]) for i in scoped] == [
        (fact, "movie-assistant", "session-001") for fact in MOVIE_FACTS
    ]
    assert items[0]["metadata"]["source_messages"] == ["2"]
    memory_id = items[1]["id"]
    # Get a single memory by ID
    specific_memory = m.get(memory_id)
    assert specific_memory == items[1]

    # Search memories
    related_memories = m.search(query="What do you know about me?", user_id="alice")
    scores = [r["score"] for r in related_memories["results"]]
    assert len(scores) == 8 and scores == sorted(scores, reverse=True)

    # Update a memory
    result = m.update(memory_id=memory_id, data="I love India, it is my favorite country.")
    assert result == {"message": "Memory updated successfully!"}
    assert m.get(memory_id)["memory"] == "I love India, it is my favorite country."
    # Memory history
    history = m.history(memory_id=memory_id)
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
        ("ADD", None, specific_memory["memory"]),
        ("UPDATE", specific_memory["memory"], "I love India, it is my favorite country."),
    ]
    assert all(h["memory_id"] == memory_id for h in history)

    # Delete a memory by id
    assert m.delete(memory_id=memory_id) == {"message": "Memory deleted successfully!"}
    assert m.get(memory_id) is None and m.history(memory_id) == []
    # Delete all memories for a user
    assert m.delete_all(user_id="alice") == {"message": "Memories deleted successfully!"}
    assert m.get_all(user_id="alice") == {"results": []}
    m.add("I love sci-fi movies", user_id="bob", infer=False)
    # Reset all memories
    m.reset()
    assert m.get_all(user_id="bob") == {"results": []}
    m.close()


def test_the_v1_quickstart_search_by_filters(tmp_path, encoder, model):
    m = Memory.from_config(config(str(tmp_path / "m"), encoder, model))
    messages = [
        {"role": "user", "content": "Hi, I'm Alex. I love basketball and gaming."},
        {"role": "assistant", "content": "Hey Alex! I'll remember your interests."},
    ]
    model.script(json.dumps({"facts": [{"text": "Name is Alex. Enjoys basketball and gaming.", "messages": [0]}]}))
    model.script(json.dumps({"decisions": [{"fact": 0, "event": "ADD"}]}))
    m.add(messages, user_id="alex")
    results = m.search("What do you know about me?", filters={"user_id": "alex"})
    [hit] = results["results"]
    assert hit["memory"] == "Name is Alex. Enjoys basketball and gaming." and hit["user_id"] == "alex"
    assert {"id", "memory", "user_id", "created_at", "score"} <= set(hit)
    assert m.search("What do you know about me?", filters={"user_id": "alex"}, threshold=1.01) == {"results": []}
    m.close()


def test_without_an_llm_infer_names_the_setting_and_infer_false_works_offline(tmp_path, encoder):
    m = Memory.from_config(config(str(tmp_path / "m"), encoder))
    with pytest.raises(LLMNotConfiguredError, match=r"config's 'llm'.*infer=False"):
        m.add(MOVIE_MESSAGES, user_id="alice")
    assert m.get_all(user_id="alice") == {"results": []}
    result = m.add("Likes to play cricket on weekends", user_id="alice", metadata={"category": "hobbies"}, infer=False)
    assert [r["memory"] for r in result["results"]] == ["user: Likes to play cricket on weekends"]
    m.close()


def test_messages_as_a_string_a_dict_or_a_list(tmp_path, encoder):
    m = Memory.from_config(config(str(tmp_path / "m"), encoder))
    m.add("I love pizza", user_id="a", infer=False)
    m.add({"role": "assistant", "content": "Noted: thin crust.", "name": "chef"}, user_id="a", infer=False)
    m.add(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "I live in Oslo"}],
        user_id="a",
        infer=False,
    )
    items = m.get_all(user_id="a")["results"]
    assert [(i["memory"], i["role"], i.get("actor_id")) for i in items] == [
        ("user: I love pizza", "user", None),
        ("chef: Noted: thin crust.", "assistant", "chef"),  # mem0's actor_id: the message's name
        ("user: I live in Oslo", "user", None),  # the system message is not stored
    ]
    again = m.add("I love pizza", user_id="a", infer=False)
    assert again == {"results": []}  # memnets' consistency rule: said already, nothing new
    with pytest.raises(TypeError, match="messages must be a str"):
        m.add(42, user_id="a", infer=False)
    with pytest.raises(ValueError, match="at least one of user_id, agent_id or run_id"):
        m.add("I love pizza", infer=False)
    m.close()


def test_users_stay_apart_and_agent_reads_span_users(tmp_path, encoder):
    m = Memory.from_config(config(str(tmp_path / "m"), encoder))
    m.add("Alice's secret is 42", user_id="alice", agent_id="helper", infer=False)
    m.add("Bob likes jazz", user_id="bob", agent_id="helper", infer=False)
    m.add("The helper speaks French", agent_id="helper", infer=False)
    assert [r["memory"] for r in m.search("secret", user_id="bob")["results"]] == ["user: Bob likes jazz"]
    assert [r["memory"] for r in m.get_all(user_id="bob")["results"]] == ["user: Bob likes jazz"]
    spanning = m.get_all(agent_id="helper")["results"]
    assert sorted(r["memory"] for r in spanning) == [
        "user: Alice's secret is 42",
        "user: Bob likes jazz",
        "user: The helper speaks French",
    ]
    shared = next(r for r in spanning if r["memory"] == "user: The helper speaks French")
    assert "user_id" not in shared and shared["agent_id"] == "helper"
    assert m.memory.get(shared["id"], user=SHARED_USER) is not None
    m.delete_all(agent_id="helper")
    assert m.get_all(agent_id="helper") == {"results": []}
    m.close()


def test_a_scope_in_filters_never_overrides_or_widens_the_explicit_one(tmp_path, encoder):
    m = Memory.from_config(config(str(tmp_path / "m"), encoder))
    m.add("Alice's secret is 42", user_id="alice", agent_id="helper", run_id="r1", infer=False)
    m.add("Bob's secret is 7", user_id="bob", agent_id="helper", run_id="r2", infer=False)
    for name, given, other in (("user_id", "alice", "bob"), ("agent_id", "helper", "spy"), ("run_id", "r1", "r2")):
        scope = {"user_id": "alice", name: given}
        for read in (lambda **kw: m.search("secret", **kw), m.get_all):
            with pytest.raises(ValueError, match=rf"{name}='{given}' and filters\['{name}'\]='{other}'"):
                read(**scope, filters={name: other})
            with pytest.raises(ValueError, match=rf"filters\['{name}'\] is None"):
                read(**scope, filters={name: None})
    with pytest.raises(ValueError, match=r"filters\['user_id'\] is None"):
        m.get_all(agent_id="helper", filters={"user_id": None})  # refused with no user_id given too
    alices = ["user: Alice's secret is 42"]
    assert [r["memory"] for r in m.search("secret", user_id="alice", filters={"user_id": "alice"})["results"]] == alices
    assert [r["memory"] for r in m.get_all(agent_id="helper", filters={"user_id": "alice"})["results"]] == alices
    assert [r["memory"] for r in m.get_all(user_id="alice", filters={"run_id": "r1"})["results"]] == alices
    assert m.get_all(user_id="alice", filters={"run_id": "r2"}) == {"results": []}  # a filter narrows the user
    m.close()


def test_metadata_filters_take_mem0s_forms(tmp_path, encoder):
    m = Memory.from_config(config(str(tmp_path / "m"), encoder))
    for text, rating in (("Dune", 5), ("Alien", 4), ("Cats", 1)):
        m.add(f"Watched {text}", user_id="a", metadata={"category": "movies", "rating": rating}, infer=False)
    m.add("Read Emma", user_id="a", metadata={"category": "books", "rating": 5}, infer=False)

    def texts(filters):
        return sorted(r["memory"].removeprefix("user: ") for r in m.get_all(user_id="a", filters=filters)["results"])

    assert texts({"category": "books"}) == ["Read Emma"]
    assert texts({"category": "movies", "rating": {"gte": 4}}) == ["Watched Alien", "Watched Dune"]
    assert texts({"OR": [{"rating": {"lt": 2}}, {"category": "books"}]}) == ["Read Emma", "Watched Cats"]
    assert [r["memory"] for r in m.search("film", filters={"user_id": "a", "rating": {"in": [1]}})["results"]] == [
        "user: Watched Cats"
    ]
    with pytest.raises(ValueError, match=r"operators \['icontains'\] are not supported"):
        m.get_all(user_id="a", filters={"category": {"icontains": "mov"}})
    with pytest.raises(ValueError, match=r"filters\['NOT'\]: mem0's NOT is not supported"):
        m.get_all(user_id="a", filters={"NOT": [{"category": "books"}]})
    with pytest.raises(ValueError, match=r"filters\['category'\]: mem0's wildcard \* is not supported"):
        m.get_all(user_id="a", filters={"category": "*"})
    m.close()


def test_the_vector_store_path_of_a_mem0_config_is_where_memnets_stores(tmp_path, encoder):
    folder = tmp_path / "qdrant-was-here"
    mem0_config = {
        "vector_store": {"provider": "qdrant", "config": {"path": str(folder)}},
        "memnets": {"encoder": encoder},
    }
    with Memory.from_config(mem0_config) as m:
        m.add("I love sci-fi movies", user_id="alice", infer=False)
    assert folder.is_dir()
    with Memory.from_config(mem0_config) as again:
        assert [r["memory"] for r in again.get_all(user_id="alice")["results"]] == ["user: I love sci-fi movies"]


def test_an_llm_memnets_does_not_speak_is_named(tmp_path, encoder):
    with pytest.raises(ValueError, match="llm provider 'anthropic' is not one memnets speaks"):
        Memory.from_config({"llm": {"provider": "anthropic", "config": {}}, "memnets": {"location": str(tmp_path)}})


def test_a_malformed_llm_answer_stores_nothing(tmp_path, encoder):
    with FakeChatServer(["Alice loves sci-fi, I think."]) as server:
        m = Memory.from_config(config(str(tmp_path / "m"), encoder, server))
        with pytest.raises(ExtractionError, match="not JSON.*nothing of this call was stored"):
            m.add(MOVIE_MESSAGES, user_id="alice")
    assert m.get_all(user_id="alice") == {"results": []}
    m.close()


def test_decide_rules_calls_the_llm_once_per_add(tmp_path, encoder, model):
    m = Memory.from_config(config(str(tmp_path / "m"), encoder, model, decide="rules"))
    first = m.add(MOVIE_MESSAGES, user_id="alice")
    second = m.add(MOVIE_MESSAGES, user_id="alice")
    assert [r["event"] for r in first["results"]] == ["ADD", "ADD"]
    assert second == {"results": []}  # memnets' own rule: both facts are said already
    assert len(model.requests) == 2
    m.close()


def test_add_reports_updates_with_the_previous_text_and_deletions(tmp_path, encoder):
    shown = {}  # memory text -> its number in the decision prompt

    def respond(messages):
        if messages[0]["content"] == prompts.FACTS_SYSTEM:
            return json.dumps(
                {"facts": [{"text": "Drinks coffee", "messages": [0]}, {"text": "Left", "messages": [0]}]}
            )
        listed = messages[1]["content"].split("Existing memories:\n")[1].split("\n\nNew facts:")[0]
        shown.update({line.split("] ", 1)[1]: int(line[1:].split("]")[0]) for line in listed.splitlines()})
        update = {"fact": 0, "event": "UPDATE", "memory": shown["user: Drinks green tea"], "text": "Drinks coffee"}
        return json.dumps(
            {"decisions": [update, {"fact": 1, "event": "DELETE", "memory": shown["user: Lives in Lyon"]}]}
        )

    with FakeChatServer(respond=respond) as server:
        m = Memory.from_config(config(str(tmp_path / "m"), encoder, server))
        m.add("Lives in Lyon", user_id="ann", infer=False)
        m.add("Drinks green tea", user_id="ann", infer=False)
        result = m.add("I switched to coffee and left Lyon", user_id="ann")
    events = sorted(result["results"], key=lambda r: r["event"])
    assert [{k: r[k] for k in ("memory", "event")} for r in events] == [
        {"memory": "user: Lives in Lyon", "event": "DELETE"},
        {"memory": "Drinks coffee", "event": "UPDATE"},
    ]
    assert events[1]["previous_memory"] == "user: Drinks green tea"
    assert [r["memory"] for r in m.get_all(user_id="ann")["results"]] == ["Drinks coffee"]
    assert [h["event"] for h in m.history(events[1]["id"])] == ["ADD", "UPDATE"]
    m.close()
