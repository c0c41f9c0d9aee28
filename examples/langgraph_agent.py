"""A LangGraph agent whose long-term memory is memnets: one node writes, one node recalls.

    python examples/langgraph_agent.py [FOLDER]

The graph gets memnets through LangGraph's own store interface (`graph.compile(store=...)`), so
its nodes read and write with `store.put` / `store.search` as with any LangGraph store. No LLM is
called: the "reply" is the recalled memories, which is where a model call would go. Needs the
langgraph extra (`pip install -e '.[langgraph]'`).
"""

from __future__ import annotations

import sys
import tempfile
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

import memnets
from memnets.integrations.langgraph import MemnetsStore


class Turn(TypedDict, total=False):
    user: str
    message: str
    recalled: list[str]


def remember(state: Turn, *, store: BaseStore) -> Turn:
    """Keep what the user said in their namespace (LangGraph injects the store)."""
    namespace = ("memories", state["user"])
    store.put(namespace, f"m{len(store.search(namespace, limit=1000))}", {"content": state["message"]})
    return {}


def recall(state: Turn, *, store: BaseStore) -> Turn:
    """The user's memories most relevant to what they just said, for the model's prompt."""
    hits = store.search(("memories", state["user"]), query=state["message"], limit=2)
    return {"recalled": [hit.value["content"] for hit in hits]}


def build(store: BaseStore):
    graph = StateGraph(Turn)
    graph.add_node("recall", recall)
    graph.add_node("remember", remember)
    graph.add_edge(START, "recall")  # recall before writing, so a message does not find itself
    graph.add_edge("recall", "remember")
    graph.add_edge("remember", END)
    return graph.compile(store=store)


def main(folder: str) -> None:
    with memnets.open(folder) as memory:
        agent = build(MemnetsStore(memory))
        for message in [
            "I moved to Lisbon in March",
            "My sister Ana plays the cello",
            "I am allergic to peanuts",
            "Can you suggest a dinner place near where I live?",
        ]:
            out = agent.invoke({"user": "alice", "message": message})
            print(f"{message!r} -> recalled {out['recalled']}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="memnets-langgraph-"))
