"""Every prompt of the optional LLM extraction (:mod:`memnets.memory.extraction`), in one place.

Two calls, mem0's scheme with provenance kept: the facts of a conversation, each with the numbers
of the messages it came from (:func:`facts_prompt`), then one decision per fact against the user's
nearest memories (:func:`decision_prompt`; not asked with ``decide="rules"``). Both answers are
JSON objects; their shapes are written in the system prompts and checked by the extraction. Old
memories are shown under short numbers, not their ids, so a model cannot invent an id that exists.
"""

from __future__ import annotations

from collections.abc import Sequence

FACTS_SYSTEM = """You extract the facts worth remembering from a conversation, for the memory of an assistant.
A fact is one short self-contained statement about the user or the world that a later conversation may need:
preferences, plans, personal details, relationships, events with their dates, decisions. Leave out greetings,
questions without information, and what the assistant only suggested. Write each fact in the language of the
conversation, in the third person ("Likes sci-fi movies").
The messages are numbered [n]. Answer with one JSON object and nothing else:
{"facts": [{"text": "<the fact>", "messages": [<the numbers of the messages it comes from>]}]}
Answer {"facts": []} when there is nothing worth remembering."""

DECISION_SYSTEM = """You keep an assistant's memory consistent. For each new fact, decide against the existing memories:
- "ADD": it is new information;
- "UPDATE": it changes or completes an existing memory; give that memory's number as "memory" and the merged text
  as "text";
- "DELETE": it contradicts an existing memory that must go; give that memory's number as "memory";
- "NONE": an existing memory says this already.
Answer with one JSON object and nothing else, one decision per fact, in the facts' order:
{"decisions": [{"fact": <fact number>, "event": "ADD" | "UPDATE" | "DELETE" | "NONE", "memory": <number>,
"text": "<text>"}]}
("memory" only for UPDATE and DELETE, "text" only for UPDATE)."""


def facts_prompt(messages: Sequence[tuple[str, str]]) -> str:
    """The user prompt of the fact call: each (speaker, text) message as a numbered line."""
    lines = "\n".join(f"[{n}] {speaker}: {text}" for n, (speaker, text) in enumerate(messages))
    return f"Conversation:\n{lines}\n\nThe facts, as JSON:"


def decision_prompt(facts: Sequence[str], memories: Sequence[str]) -> str:
    """The user prompt of the decision call: the existing memories and the new facts, each numbered."""
    existing = "\n".join(f"[{n}] {text}" for n, text in enumerate(memories)) or "(none)"
    new = "\n".join(f"[{n}] {text}" for n, text in enumerate(facts))
    return f"Existing memories:\n{existing}\n\nNew facts:\n{new}\n\nThe decisions, as JSON:"
