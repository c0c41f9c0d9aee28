"""The one typed model of what a write and a search take, from which every door's arguments are made.

- :class:`MemoryFields`: the fields of a memory to write besides its text, its user and its id (when it
  happened, its kind, metadata, importance, scope, structured view and expiry). ``AgentMemory.add``,
  ``add_many`` and ``add_messages`` gather their keyword arguments into one, and the record of each
  memory is built from it (:func:`memnets.memory.intake.new_record`); it validates nothing itself: the
  record does, naming the field, whichever door built it.
- :data:`ARGUMENTS`: every argument of the calls a door makes (add, add_many, add_messages, search,
  update, the manager's observe and context) as it travels on the wire: its type (times as ISO 8601
  strings, seconds as numbers), what it means, and the JSON schema bounds the API checks.
- :data:`CALLS`: the arguments of each call, in order, and which of them it needs.

The REST bodies and so the server's OpenAPI document (:mod:`memnets.server.routes.bodies`), the
TypeScript client's types generated from that document (clients/typescript/src/schema.ts) and the MCP
tools' argument schemas (:mod:`memnets.integrations.mcp_server`) are built from these tables, so a
field is described once. tests/memory/test_fields.py checks that the API's signatures take what
:data:`CALLS` says they take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Literal

from memnets.records import MEMORY_KINDS, Memory
from memnets.store.filters import COMBINATORS, OPERATORS, SCOPES


class _MemoryScope:
    """The default of ``add``'s ``agent``/``session``: the memory's scope (``memnets.open(agent=...)``).

    A sentinel, so that an explicit None says "no agent" (or no session) rather than "the default"."""

    def __repr__(self) -> str:
        return "<the memory's scope>"


MEMORY_SCOPE = _MemoryScope()


@dataclass(frozen=True)
class MemoryFields:
    """The fields of a memory to write besides its text, its user and its id (``AgentMemory.add``'s
    keyword arguments of the same names; their meaning: :data:`ARGUMENTS`).

    ``agent``/``session`` left at :data:`MEMORY_SCOPE` are the memory's default
    scope (:meth:`scoped`); an explicit None is no agent (no session)."""

    t: datetime | None = None
    kind: str = "observation"
    metadata: dict | None = None
    importance: float | None = None
    agent: str | None = MEMORY_SCOPE  # type: ignore[assignment]
    action: str | None = None
    objects: Sequence[str] | None = None
    location: str | None = None
    session: str | None = MEMORY_SCOPE  # type: ignore[assignment]
    ttl: timedelta | float | None = None

    def scoped(self, scope: Mapping[str, str | None]) -> MemoryFields:
        """These fields with an ``agent``/``session`` left out filled from ``scope`` (the memory's
        ``{"agent": ..., "session": ...}``)."""
        changes = {name: scope[name] for name in ("agent", "session") if getattr(self, name) is MEMORY_SCOPE}
        return self.replace(**changes) if changes else self

    def replace(self, **changes) -> MemoryFields:
        """A copy with some fields changed."""
        return MemoryFields(**{**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, Any]:
        """The fields by name (the keyword arguments they came from)."""
        return {name: getattr(self, name) for name in MEMORY_FIELDS}


MEMORY_FIELDS = tuple(f.name for f in fields(MemoryFields))
MESSAGE_FIELDS = ("t", "kind", "metadata", "importance", "agent", "session", "ttl")  # what a message's memory takes
STRUCTURED_FIELDS = tuple(name for name in MEMORY_FIELDS if name not in MESSAGE_FIELDS)  # action, objects, location


@dataclass(frozen=True)
class ChatMessage:
    """One chat message (OpenAI's and mem0's shape); other fields (tool_calls, ...) are ignored."""

    # what JSON schemas made from it say (the server's, the MCP tool's): other keys pass; each field's docstring
    __pydantic_config__ = {"extra": "allow", "use_attribute_docstrings": True}

    role: str
    """user, assistant, system, tool, ..."""
    content: str | list[str | dict[str, Any]] | None
    """the text, or a list of parts whose text parts ({"type": "text", "text": ...}) are kept"""
    name: str | None = None
    """the speaker (default: the role)"""
    time: datetime | None = None
    """when it was said (ISO 8601)"""
    id: str | None = None
    """the message's id: adding it again changes nothing (a whole history may be written again)"""


@dataclass(frozen=True)
class Argument:
    """One argument of a call as it travels on the wire.

    Attributes:
        type: its type in the terms of the wire (a datetime is an ISO 8601 string, a Memory its object
            of fields), from which a JSON schema is made.
        description: what it means, in a line.
        bounds: JSON schema keywords the API checks beyond the type (``minimum``, ``minLength``, ...).
        schema: a JSON schema that replaces the type's (the filters, whose type is a mapping).
    """

    type: Any
    description: str
    bounds: Mapping[str, Any] | None = None
    schema: Mapping[str, Any] | None = None


JSON_SCALARS = ["string", "number", "boolean", "null"]
ORDER_OPERATORS = ("$gt", "$gte", "$lt", "$lte")  # numbers with numbers, strings with strings
LIST_OPERATORS = {op: {"type": "array", "items": {"type": JSON_SCALARS}} for op in ("$in", "$nin")}
OPERATOR_WORDS = {
    "$eq": "equal to",
    "$ne": "not equal to (or the field is missing)",
    "$gt": "greater than (numbers, or strings in order)",
    "$gte": "greater than or equal to",
    "$lt": "less than",
    "$lte": "less than or equal to",
    "$in": "equal to one of",
    "$nin": "equal to none of (or the field is missing)",
    "$fields": "a dict whose own fields pass these conditions (field -> condition, as in metadata)",
}


def filters_schema() -> dict[str, Any]:
    """The JSON schema of a ``filters`` argument, built from the API's own definitions
    (:data:`memnets.store.filters.OPERATORS`, :data:`memnets.records.MEMORY_KINDS`): what
    ``AgentMemory.search(..., filters=...)`` and ``list_memories`` accept."""
    scalar = {"type": JSON_SCALARS}
    ordered = {"type": ["string", "number"]}
    nested = {"type": "object"}  # $fields: a metadata mapping one level down
    operand = {
        op: nested if op == "$fields" else LIST_OPERATORS.get(op, ordered if op in ORDER_OPERATORS else scalar)
        for op in OPERATORS
    }
    condition = {
        "type": "object",
        "description": "operators on one metadata field, all of which must hold",
        "properties": {op: {**schema, "description": OPERATOR_WORDS.get(op, op)} for op, schema in operand.items()},
        "additionalProperties": False,
        "minProperties": 1,
    }
    kind = {"type": "string", "enum": list(MEMORY_KINDS)}
    return {
        "type": "object",
        "description": "only memories passing every condition given (checked before ranking, so k results "
        "come back whenever k memories match)",
        "properties": {
            "kind": {"description": "a kind or a list of kinds", "anyOf": [kind, {"type": "array", "items": kind}]},
            "metadata": {
                "type": "object",
                "description": "metadata field -> a value (equality) or operators; a missing field fails "
                "every operator except $ne",
                "additionalProperties": {"anyOf": [scalar, condition]},
            },
            "since": {"type": "string", "format": "date-time", "description": "t >= since (ISO 8601; naive is UTC)"},
            "until": {"type": "string", "format": "date-time", "description": "t < until (ISO 8601; naive is UTC)"},
            **{
                scope: {"description": f"the memory's {scope} scope: a value, or operators (null: unscoped)"}
                for scope in SCOPES
            },
            **{
                word: {
                    "type": "array",
                    "items": {"type": "object"},
                    "description": f"filters of this same form, {'all' if word == '$and' else 'any'} of which must hold",
                }
                for word in COMBINATORS
            },
        },
        "additionalProperties": False,
    }


NON_EMPTY = {"minLength": 1}
TIME = "(ISO 8601; a time without a zone is UTC)"

ARGUMENTS: dict[str, Argument] = {
    # who and which
    "user": Argument(str, "whose memories: every call is scoped to one user", NON_EMPTY),
    "users": Argument(list[str], "several users, searched with the query encoded once", {"minItems": 1}),
    "id": Argument(
        str,
        "the memory's id (default: a new one); an id the user has already makes this add its new version",
        NON_EMPTY,
    ),
    "ids": Argument(list[str | None], "the items' ids, aligned with them (null: a new id)"),
    "replaces": Argument(str, "the id of a memory this one supersedes (it becomes this one's history)", NON_EMPTY),
    # what is written
    "text": Argument(str, "the memory's text", NON_EMPTY),
    "record": Argument(Memory, "a whole memory record of this user, stored as it is"),
    "items": Argument(list[str | Memory], "a batch: texts and/or memory records, written with one encoder batch"),
    "messages": Argument(
        list[ChatMessage], "a chat transcript, oldest first: one memory per kept message, '{speaker}: {text}'"
    ),
    # a memory's fields (MemoryFields)
    "t": Argument(datetime, f"when it happened {TIME}; default now"),
    "kind": Argument(Literal[MEMORY_KINDS], "what the memory is (default observation)"),
    "metadata": Argument(dict[str, Any], "free JSON fields kept with the memory, searchable with filters"),
    "importance": Argument(
        float, "its long-term value in [0, 1] (default: the importance decision's score)", {"minimum": 0, "maximum": 1}
    ),
    "agent": Argument(str | None, "the agent or speaker it is from, a scope (default: the memory's; null: none)"),
    "action": Argument(str, "what was done (an observation's structured view)"),
    "objects": Argument(list[str], "what it was done to (an observation's structured view)"),
    "location": Argument(str, "where (an observation's structured view)"),
    "session": Argument(str | None, "the session or thread it came from, a scope (default: the memory's; null: none)"),
    "ttl": Argument(
        float, "forget it that many seconds from now (default: keep it until deleted)", {"exclusiveMinimum": 0}
    ),
    # of messages
    "keep": Argument(
        Literal["all", "important"],
        "all messages, or only those the importance decision says a later question may need",
    ),
    "roles": Argument(list[str], "the roles whose messages are stored (default: the user's only)", {"minItems": 1}),
    # of a search
    "query": Argument(str, "the question or text to find memories for", NON_EMPTY),
    "k": Argument(int, "how many memories to return", {"minimum": 1}),
    "filters": Argument(
        dict[str, Any], "conditions a memory must pass (docs/memory.md, Filters)", schema=filters_schema()
    ),
    "refresh_ttl": Argument(bool, "move the hits' expiry forward, as a read of them"),
    "as_of": Argument(datetime, f"read the versions valid at this time {TIME}, older versions included"),
    "known_at": Argument(datetime, f"read the memories as they had been written by this time {TIME}"),
    # of an update
    "merge_metadata": Argument(
        bool, "merge the given metadata into the old (keys not given are kept) instead of replacing it"
    ),
    "valid_from": Argument(datetime, f"when the new version's fact began to hold {TIME}; default t"),
    "valid_to": Argument(
        datetime | None, f"when its fact stopped holding {TIME}; null reopens one a supersession closed"
    ),
    # of the manager
    "speaker": Argument(str, "who said it"),
    "now": Argument(datetime, f"the time of the question {TIME}; default now"),
}


@dataclass(frozen=True)
class Call:
    """The wire arguments of one call: ``takes`` in order, ``needs`` those it cannot go without."""

    takes: tuple[str, ...]
    needs: tuple[str, ...] = ()


CALLS: dict[str, Call] = {
    "add": Call(("user", "text", "id", "replaces", *MEMORY_FIELDS), ("user", "text")),
    "add_record": Call(("user", "record", "replaces"), ("user", "record")),
    "add_many": Call(("user", "items", "ids", *MEMORY_FIELDS), ("user", "items")),
    "add_messages": Call(("user", "messages", *MESSAGE_FIELDS, "keep", "roles"), ("user", "messages")),
    "search": Call(("user", "query", "k", "filters", "refresh_ttl", "as_of", "known_at"), ("user", "query")),
    "search_many": Call(("users", "query", "k", "filters", "refresh_ttl", "as_of", "known_at"), ("users", "query")),
    "update": Call(("user", "text", "metadata", "merge_metadata", "t", "ttl", "valid_from", "valid_to"), ("user",)),
    "observe": Call(
        ("text", "t", "id", "kind", "speaker", "importance", "metadata", "action", "objects", "location"), ("text",)
    ),
    "context": Call(("query", "k", "now"), ("query",)),
}

__all__ = [
    "ARGUMENTS",
    "CALLS",
    "MEMORY_FIELDS",
    "MEMORY_SCOPE",
    "MESSAGE_FIELDS",
    "Argument",
    "Call",
    "ChatMessage",
    "MemoryFields",
    "filters_schema",
]
