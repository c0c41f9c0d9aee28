"""mem0's current documentation, run with only the import changed (tests/integrations/mem0_docs.py holds the snippets).

mem0's ``Memory()`` takes its LLM from ``$OPENAI_API_KEY`` and ``$OPENAI_BASE_URL``; here the base URL is a
local OpenAI-compatible fake (memnets.training.fake_llm) that extracts each user message as a fact, and ``$MEM0_DIR``
a temporary folder (memnets stores in ``$MEM0_DIR/memnets``, beside where mem0 keeps its files). The encoder
is memnets' default, the bundled all-MiniLM-L6-v2, as ``Memory()`` gets it.
"""

from __future__ import annotations

import json
import re

import mem0_docs
import pytest

from memnets.compat.mem0 import Memory
from memnets.memory import extraction_prompts as prompts
from memnets.training.fake_llm import FakeChatServer

LINE = re.compile(r"^\[(\d+)\] (.+)$", re.M)


def every_user_message_is_a_fact(messages: list[dict]) -> str:
    """A scripted model: each user line of the conversation is a fact; a fact the memories hold is NONE, else ADD."""
    prompt = messages[1]["content"]
    if messages[0]["content"] == prompts.FACTS_SYSTEM:
        lines = LINE.findall(prompt.split("\n\n")[0])
        facts = [
            {"text": text.removeprefix("user: "), "messages": [int(n)]}
            for n, text in lines
            if text.startswith("user: ")
        ]
        return json.dumps({"facts": facts})
    existing, new = prompt.split("New facts:")
    held = {text for _, text in LINE.findall(existing)}
    decisions = [{"fact": int(n), "event": "NONE" if text in held else "ADD"} for n, text in LINE.findall(new)]
    return json.dumps({"decisions": decisions})


def run(snippet: str, namespace: dict) -> dict:
    """``snippet`` with only mem0's import changed, in ``namespace`` (the earlier snippets' names)."""
    changed = snippet.replace("from mem0 import Memory", "from memnets.compat.mem0 import Memory")
    assert changed.count("memnets.compat.mem0") == snippet.count("from mem0 import Memory")
    if "Memory()" in snippet:  # an earlier snippet's Memory() lets go of the folder before this one opens it
        for memory in [value for value in namespace.values() if isinstance(value, Memory)]:
            memory.close()
    exec(compile(changed, "<mem0 docs>", "exec"), namespace)
    return namespace


@pytest.fixture()
def mem0_environment(tmp_path, monkeypatch):
    """mem0's environment: ``$OPENAI_API_KEY`` and ``$OPENAI_BASE_URL`` (the fake server), ``$MEM0_DIR``."""
    with FakeChatServer(respond=every_user_message_is_a_fact) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")  # as OpenAI's client takes it, with /v1
        monkeypatch.setenv("MEM0_DIR", str(tmp_path))
        yield server


def test_mem0s_quickstart_and_memory_operations_run_with_only_the_import_changed(mem0_environment, capsys):
    server = mem0_environment
    names: dict = {}
    for step in mem0_docs.QUICKSTART:
        run(step, names)
    [hit] = names["results"]["results"]
    assert hit["memory"] == "Hi, I'm Alex. I love basketball and gaming." and hit["user_id"] == "alex"
    assert {"id", "memory", "user_id", "created_at", "score"} <= set(hit) and "Alex" in capsys.readouterr().out
    assert server.requests[0]["model"] == "gpt-5-mini"  # mem0's default model

    run(mem0_docs.ADD, names)
    m = names["m"]
    items = m.get_all(filters={"user_id": "alice"})["results"]
    facts = [
        "I'm planning to watch a movie tonight. Any recommendations?",
        "I'm not a big fan of thriller movies but I love sci-fi movies.",
    ]
    assert sorted(i["memory"] for i in items if "role" not in i) == sorted(facts)  # inferred (the third add: NONE)
    assert len([i for i in items if "role" in i]) == 4  # infer=False: each message
    expiring = m.add("I drink tea", user_id="alice", expiration_date="2030-01-31")["results"]
    assert m.get(expiring[0]["id"])["expiration_date"] == "2030-01-31"

    m.memory.add("Alex prefers coffee", user="alex", id="mem_123")  # the id mem0's update and delete snippets name
    run(mem0_docs.UPDATE, names)
    updated = names["memory"].get("mem_123")
    assert updated["memory"] == "Alex now prefers decaf coffee" and updated["metadata"] == {"category": "preferences"}
    assert updated["expiration_date"] == "2030-01-31"
    assert [h["event"] for h in names["memory"].history("mem_123")] == ["ADD", "UPDATE", "UPDATE"]

    run(mem0_docs.SEARCH, names)
    assert names["related_memories"]["results"] and all(
        r["user_id"] == "alice" for r in names["related_memories"]["results"]
    )
    with pytest.raises(ValueError, match=r"operators \['contains'\] are not supported"):  # docs/integrations.md
        run(mem0_docs.SEARCH_CONTAINS, names)
    run(mem0_docs.EXPLAIN, names)
    details = names["results"]["results"][0]["score_details"]
    assert {"semantic_score", "recency", "importance"} <= set(details) and "semantic_score" in capsys.readouterr().out

    run(mem0_docs.DELETE, names)
    memory = names["memory"]
    assert memory.get("mem_123") is None and memory.get_all(filters={"user_id": "alice"}) == {"results": []}
    memory.close()


def test_no_llm_in_config_or_environment_names_both(tmp_path, monkeypatch, encoder):
    from memnets.compat.mem0 import LLMNotConfiguredError

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with Memory.from_config({"memnets": {"location": str(tmp_path / "m"), "encoder": encoder}}) as m:
        with pytest.raises(LLMNotConfiguredError, match=r"\$OPENAI_API_KEY / \$OPENAI_BASE_URL"):
            m.add("I love tea", user_id="a")


def test_expiration_and_update_arguments_are_checked(tmp_path, encoder):
    with Memory.from_config({"memnets": {"location": str(tmp_path / "m"), "encoder": encoder}}) as m:
        with pytest.raises(ValueError, match="expiration_date must be a date in YYYY-MM-DD format"):
            m.add("I love tea", user_id="a", infer=False, expiration_date="next week")
        with pytest.raises(ValueError, match="expiration_date 2001-01-01 has passed"):
            m.add("I love tea", user_id="a", infer=False, expiration_date="2001-01-01")
        [written] = m.add("I love tea", user_id="a", infer=False, expiration_date="2030-01-31")["results"]
        with pytest.raises(ValueError, match="at least one of text, metadata or expiration_date"):
            m.update(written["id"])
        m.update(written["id"], data="I love green tea")  # mem0's deprecated name of text still works
        m.update(written["id"], expiration_date=None)  # None clears the expiry
        item = m.get(written["id"])
        assert item["memory"] == "I love green tea" and "expiration_date" not in item
        assert m.memory.get(written["id"], user="a").expires_at is None
        with pytest.raises(ValueError, match="show_expired=True is not supported"):
            m.search("tea", filters={"user_id": "a"}, show_expired=True)
