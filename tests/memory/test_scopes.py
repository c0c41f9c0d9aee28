"""Scopes beside the user: ``agent`` and ``session`` (mem0's agent_id / run_id) on both stores.

Stored with every memory, filterable (with ``$and``/``$or``/``$in``/``$nin``), a default scope in
``memnets.open(..., agent=..., session=...)`` for writes, and ``delete_all`` by any of them; checked
through AgentMemory, the LangGraph store and LangChain's vector store.
"""

from __future__ import annotations

import pytest

import memnets


def fill(memory):
    """Two users, two agents, three sessions; returns {content: memory}."""
    rows = [
        ("ann", "planner", "s1", "Ann's trip to Porto is in May"),
        ("ann", "planner", "s2", "Ann wants a window seat"),
        ("ann", "critic", "s1", "Ann found the hotel too loud"),
        ("ann", None, None, "Ann's birthday is 3 March"),
        ("bob", "planner", "s1", "Bob's trip to Oslo is in June"),
        ("bob", "critic", "s3", "Bob dislikes early flights"),
    ]
    return {
        text: memory.add(text, user=user, **({"agent": agent} if agent else {}), session=session)
        for user, agent, session, text in rows
    }


def contents(memories) -> list[str]:
    return sorted(m.content for m in memories)


def test_default_scope_fills_writes_and_reads_are_filtered_only_when_asked(location, encoder):
    with memnets.open(location[0], encoder=encoder, agent="planner", session="s9", **location[1]) as memory:
        plain = memory.add("Ann likes olives", user="ann")
        assert (plain.agent, plain.session) == ("planner", "s9")
        other = memory.add("Ann's critic note", user="ann", agent="critic", session="s1")
        assert (other.agent, other.session) == ("critic", "s1")
        many = memory.add_many(["one fact", "another fact"], user="ann", session="s2")
        assert {(m.agent, m.session) for m in many} == {("planner", "s2")}
        assert memory.get(plain.id, user="ann").session == "s9"  # stored, not only returned
        assert len(memory.list_memories(user="ann")) == 4  # the default scope does not narrow reads
        assert contents(memory.list_memories(user="ann", filters={"session": "s9"})) == ["Ann likes olives"]
        updated = memory.update(plain.id, "Ann loves olives", user="ann")
        assert (updated.agent, updated.session) == ("planner", "s9")  # an update keeps the scope
    with pytest.raises(TypeError, match="agent"):
        memnets.open(location[0], encoder=encoder, agent=3, **location[1])


def test_an_explicit_none_writes_no_agent_or_session_under_a_default_scope(location, encoder):
    with memnets.open(location[0], encoder=encoder, agent="planner", session="s9", **location[1]) as memory:
        loose = memory.add("Ann's birthday is 3 March", user="ann", agent=None)
        assert (loose.agent, loose.session) == (None, "s9")
        assert memory.get(loose.id, user="ann").agent is None  # stored so, not only returned
        many = memory.add_many(["Ann reads at night", "Ann swims"], user="ann", agent=None, session=None)
        assert {(m.agent, m.session) for m in many} == {(None, None)}
        assert memory.add("Ann likes figs", user="ann").agent == "planner"  # left out: the default scope


def test_scope_filters_on_search_and_list(location, encoder):
    with memnets.open(location[0], encoder=encoder, duplicate_threshold=None, **location[1]) as memory:
        fill(memory)
        assert contents(memory.list_memories(user="ann", filters={"agent": "planner"})) == [
            "Ann wants a window seat",
            "Ann's trip to Porto is in May",
        ]
        assert contents(memory.list_memories(user="ann", filters={"agent": {"$eq": None}})) == [
            "Ann's birthday is 3 March"
        ]
        either = {"$or": [{"agent": "critic"}, {"session": "s2"}]}
        assert contents(memory.list_memories(user="ann", filters=either)) == [
            "Ann found the hotel too loud",
            "Ann wants a window seat",
        ]
        hits = memory.search("trip", user="ann", k=10, filters={"session": {"$in": ["s1", "s3"]}, "agent": "planner"})
        assert [h.memory.content for h in hits] == ["Ann's trip to Porto is in May"]  # one match: k=10 gives 1
        hits = memory.search("trip", user="ann", k=2, filters={"session": {"$nin": ["s1"]}})
        assert contents(h.memory for h in hits) == ["Ann wants a window seat", "Ann's birthday is 3 March"]


def test_delete_all_by_any_scope(location, encoder):
    with memnets.open(location[0], encoder=encoder, duplicate_threshold=None, **location[1]) as memory:
        fill(memory)
        manager = memory.manager("ann")
        porto = next(m for m in memory.list_memories(user="ann") if "Porto" in m.content)
        assert porto.id in manager.context_for(porto.content).ids()
        assert memory.delete_all(session="s1") == 3  # of every user: Ann's two, Bob's one
        assert porto.id not in manager._held()  # gone from the live manager too
        assert contents(memory.list_memories(user="ann")) == ["Ann wants a window seat", "Ann's birthday is 3 March"]
        assert contents(memory.list_memories(user="bob")) == ["Bob dislikes early flights"]
        assert memory.delete_all(user="bob", agent="planner") == 0
        assert memory.delete_all(user="ann", agent="planner") == 1
        assert contents(memory.list_memories(user="ann")) == ["Ann's birthday is 3 March"]
        assert memory.delete_all(agent="critic") == 1 and memory.users() == ["ann"]
        with pytest.raises(ValueError, match="give user, agent and/or session"):
            memory.delete_all()
        with pytest.raises(TypeError, match="session"):
            memory.delete_all(session=7)
        assert memory.delete_all(user="ann") == 1 and memory.users() == []


def test_a_statement_of_one_scope_never_merges_into_another(location, encoder):
    """The same words said by another agent or in another session are that scope's own memory, so
    deleting one scope never takes what another scope said (the consistency rule's candidates)."""
    with memnets.open(location[0], encoder=encoder, **location[1]) as memory:
        text = "Ann's trip to Porto is in May"
        planner = memory.add(text, user="ann", agent="planner", session="s1")
        critic = memory.add(text, user="ann", agent="critic", session="s1")
        later = memory.add(text, user="ann", agent="planner", session="s2")
        assert [m.outcome for m in (planner, critic, later)] == ["added", "added", "added"]
        assert len({planner.id, critic.id, later.id}) == 3
        assert memory.add(text, user="ann", agent="planner", session="s1").id == planner.id  # its own repeat
        assert memory.delete_all(user="ann", agent="planner", session="s1") == 1
        assert {(m.agent, m.session) for m in memory.list_memories(user="ann")} == {("critic", "s1"), ("planner", "s2")}


def test_scopes_through_the_langgraph_and_langchain_doors(tmp_path, encoder):
    pytest.importorskip("langgraph")
    pytest.importorskip("langchain_core")
    from memnets.integrations.langchain import MemnetsVectorStore
    from memnets.integrations.langgraph import MemnetsStore

    with memnets.open(tmp_path / "memory", encoder=encoder, duplicate_threshold=None) as memory:
        store = MemnetsStore(memory)
        for key, tag, n in [("a", "red", 1), ("b", "blue", 2), ("c", "green", 3)]:
            store.put(("notes", "ann"), key, {"content": f"note {key}", "tag": tag, "n": n})
        found = store.search(("notes",), filter={"$or": [{"tag": "red"}, {"n": {"$gte": 3}}]})
        assert sorted(i.key for i in found) == ["a", "c"]
        assert sorted(i.key for i in store.search(("notes",), filter={"tag": {"$nin": ["red"]}})) == ["b", "c"]
        with pytest.raises(ValueError, match=r"\$regex"):
            store.search(("notes",), filter={"tag": {"$regex": "r"}})

        vectors = MemnetsVectorStore(memory, "bob")
        vectors.add_texts(["tea in the morning", "coffee at noon", "water all day"], metadatas=[{"n": 1}, {"n": 2}, {}])
        docs = vectors.similarity_search("drinks", k=5, filter={"$or": [{"n": 1}, {"n": {"$gt": 1}}]})
        assert sorted(d.page_content for d in docs) == ["coffee at noon", "tea in the morning"]
        with pytest.raises(ValueError, match=r"\$exists"):
            vectors.similarity_search("drinks", k=5, filter={"n": {"$exists": True}})
