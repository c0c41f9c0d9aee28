"""A LangGraph chat agent whose message history is memnets memory, recalled in a later conversation.

    python examples/langgraph_messages.py [FOLDER]

The graph keeps its conversation in LangGraph's `MessagesState` (one thread per conversation, held
by a checkpointer). After each reply, `remember_messages` writes the thread's messages into memnets:
one memory per user message, as "{speaker}: {text}", in the thread's session (the assistant's replies
are skipped, memnets' default; `roles=("user", "assistant")` keeps them too). The
messages carry the ids LangGraph gave them, so writing the whole history again after every turn
adds only the new messages. Before each reply, the agent recalls the user's memories closest to
what they just said, from every earlier conversation. No LLM is called: the "model" is a fixed
rule that quotes what it recalled, which is where a model call would go. Needs the langgraph extra
(`pip install -e '.[langgraph]'`).
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

import memnets
from memnets.integrations.langgraph import remember_messages


class Chat(MessagesState):
    recalled: list[str]  # the memories of earlier messages found for the last one


def build(memory):
    def recall(state: Chat, config: RunnableConfig) -> dict:
        """The user's memories closest to their last message, from earlier conversations (other sessions)."""
        user, thread = config["configurable"]["user_id"], config["configurable"]["thread_id"]
        question = state["messages"][-1].content
        earlier = {"$or": [{"session": {"$ne": thread}}, {"session": None}]}
        hits = memory.search(question, user=user, k=1, filters=earlier)
        return {"recalled": [hit.memory.content for hit in hits]}

    def reply(state: Chat) -> dict:
        """A deterministic stand-in for the chat model: answer from what was recalled."""
        if not state["messages"][-1].content.endswith("?"):
            return {"messages": [AIMessage("Noted, I will remember that.")]}
        found = state["recalled"]
        return {"messages": [AIMessage(f"From our earlier chat: {found[0]}" if found else "I don't know yet.")]}

    def remember(state: Chat, config: RunnableConfig) -> dict:
        """Write the thread's whole history into memnets: only messages it does not hold yet are added."""
        user, thread = config["configurable"]["user_id"], config["configurable"]["thread_id"]
        outcomes = remember_messages(memory, state, user=user, session=thread)
        print("   stored:", dict(sorted(Counter(o.outcome for o in outcomes).items())))
        return {}

    graph = StateGraph(Chat)
    graph.add_node("recall", recall)
    graph.add_node("reply", reply)
    graph.add_node("remember", remember)
    graph.add_edge(START, "recall")  # recall before writing, so a message does not find itself
    graph.add_edge("recall", "reply")
    graph.add_edge("reply", "remember")
    graph.add_edge("remember", END)
    return graph.compile(checkpointer=InMemorySaver())


def main(folder: str) -> None:
    with memnets.open(folder) as memory:
        agent = build(memory)
        conversations = [
            ("monday", "I moved to Lisbon in March"),
            ("monday", "My sister Ana plays the cello in the city orchestra"),
            ("friday", "Which instrument does my sister play?"),
        ]
        for thread, text in conversations:
            config = {"configurable": {"user_id": "alice", "thread_id": thread}}
            print(f"[{thread}] alice: {text}")
            out = agent.invoke({"messages": [HumanMessage(text, name="Alice")]}, config)
            print(f"[{thread}] agent: {out['messages'][-1].content}")
        print("memories:", [m.content for m in memory.list_memories(user="alice")])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="memnets-langgraph-messages-"))
