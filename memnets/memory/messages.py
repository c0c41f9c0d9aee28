"""A chat transcript as memories: ``AgentMemory.add(messages=[...])`` and ``add_many([...messages])``.

A message is a mapping ``{"role": ..., "content": ...}`` (OpenAI's and mem0's shape) with optional
``"name"`` (the speaker; default: the role), ``"time"`` (a datetime or an ISO 8601 string) and
``"id"`` (the memory's id, which keys the write as ``add(..., id=...)`` does: adding the same message
again is "unchanged", so a whole history may be written again after every turn). Other keys (``tool_calls``, ``tool_call_id``, ...) are ignored.
``content`` None is refused (the whole call, naming the message's index and role: a caller's bug, as a
message cut off, must not pass as a transcript stored), except in a message that calls tools
(``tool_calls``/``function_call``, OpenAI's shape for it), which is skipped as having no text.
``content`` is a string or a list of parts: its text parts (plain strings and ``{"type": "text",
"text": ...}``) are kept, joined by newlines; other parts (images, audio) are left out.

Each kept message becomes one memory of the user:

- its text is ``"{speaker}: {text}"`` (:func:`memnets.text.turn_text`), the form the encoder and the
  heads were trained on, so a pack sees what it learned from;
- its role and speaker are metadata (``{"role": "user", "speaker": "Ann"}``, filterable with
  ``filters={"metadata": {"role": "user"}}``), beside the call's own ``metadata``; the ``agent``
  and ``session`` fields stay the write's scope, as for a text;
- its time ``t`` is the message's ``time``, else the call's ``t`` (default now) plus the message's
  position in microseconds, so that a listing (by ``t``) keeps the transcript's order.

Which messages are kept: those whose role is in ``roles`` (default :data:`DEFAULT_ROLES`, the user's
only: an assistant's replies, "Fun!", "Got it, I'll remember that", restate or acknowledge what the user
said and came back in recall above the user's own words; system prompts and tool output are skipped
too; ask for them with e.g. ``roles=("user", "assistant")``, where the assistant states facts of its
own, bookings, recommendations) and that have text; with ``keep="important"``, only those the
importance decision scores at or above the memory's ``write_through_threshold`` (with a pack: its
importance head and its threshold, the head's verdict that a later question is likely to need the
message; without one, the length-and-specificity heuristic), the manager's observation filter
(:func:`~memnets.memory.signals.keeps`). ``keep="all"`` (the default) keeps every one. Nothing
calls an LLM.

The kept messages go through the one write path (:class:`~memnets.memory.writes.WritePath`) as one
``add_many`` batch: each is checked against the stored memories and the earlier messages of the
call (consistency per message), and the call returns one :class:`MessageOutcome` per message, in
order. Every message is checked before anything is encoded or written: a malformed one raises
TypeError/ValueError naming ``messages[i].field``, and nothing of the call is stored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.memory.arguments import check_user
from memnets.memory.fields import STRUCTURED_FIELDS, MemoryFields
from memnets.memory.ids import check_new_id
from memnets.memory.intake import check_item, new_record
from memnets.memory.signals import keeps
from memnets.records import Memory
from memnets.text import turn_text
from memnets.timeutil import as_utc, as_utc_or_now

DEFAULT_ROLES = ("user",)  # what a transcript stores unless asked: what the user said (see the module docstring)
CONVERSATION_ROLES = ("user", "assistant")  # the turns of a conversation, as an LLM extraction reads them
TOOL_CALL_KEYS = ("tool_calls", "function_call")  # an assistant message that only calls tools has content None
KEEPS = ("all", "important")


@dataclass(frozen=True)
class Message:
    """One message as read: its role, speaker, text (its text parts joined; may be empty), time and id."""

    role: str
    speaker: str
    text: str
    time: datetime | None = None
    id: str | None = None

    @property
    def content(self) -> str:
        """The memory text: ``"{speaker}: {text}"``."""
        return turn_text(self.speaker, self.text)


@dataclass(frozen=True)
class MessageOutcome:
    """What adding one message did.

    Attributes:
        index: the message's position in the list given.
        role: its role.
        outcome: "added", "updated" or "unchanged" (the write path's, see ``AgentMemory.add``), or
            "skipped" (nothing written for it).
        memory: the memory as stored when the call returns (for "unchanged": the one that says it
            already; a later message of the call may have made it a new version), None when skipped.
        reason: why it was skipped ("role", "no text" or "unimportant"), else None.
    """

    index: int
    role: str
    outcome: Literal["added", "updated", "unchanged", "skipped"]
    memory: Memory | None = None
    reason: str | None = None


def parse_message(message, where: str) -> Message:
    """``message`` (a mapping, or a LangChain message object: :func:`memnets.integrations.chat.message_dict`)
    read as a :class:`Message`; TypeError/ValueError naming ``where`` and the field."""
    message = as_mapping(message)
    if not isinstance(message, Mapping):
        raise ArgumentTypeError(
            f"{where} must be a mapping with 'role' and 'content', got {type(message).__name__}", field="messages"
        )
    for field in ("role", "content"):
        if field not in message:
            raise ArgumentValueError(
                f"{where}.{field} is missing (a message is {{'role': ..., 'content': ...}})", field="messages"
            )
    role = _name(message["role"], f"{where}.role")
    if message["content"] is None and not any(message.get(key) for key in TOOL_CALL_KEYS):
        raise ArgumentValueError(
            f"{where} (role {role!r}) has content None: a message without text cannot be stored; give its text, or "
            "leave the message out (nothing of this call was stored)",
            field="messages",
        )
    speaker = _name(message["name"], f"{where}.name") if message.get("name") is not None else role
    time = message.get("time")
    if time is not None:
        time = as_utc(time, f"{where}.time")
    id = message.get("id")
    if id is not None:
        check_new_id(id, f"{where}.id")
    return Message(role, speaker, text_of(message["content"], f"{where}.content"), time, id)


def text_of(content, where: str) -> str:
    """The text of a message's content: a str, or the text parts of a list of parts joined by newlines."""
    if content is None or isinstance(content, str):
        return (content or "").strip()
    if not isinstance(content, list):
        raise ArgumentTypeError(
            f"{where} must be a str or a list of parts, got {type(content).__name__}", field="messages"
        )
    texts = []
    for n, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and isinstance(part.get("type"), str):
            if part["type"] == "text":
                if not isinstance(part.get("text"), str):
                    raise ArgumentTypeError(
                        f"{where}[{n}].text must be a str, got {type(part.get('text')).__name__}", field="messages"
                    )
                texts.append(part["text"])
        else:
            raise ArgumentTypeError(
                f"{where}[{n}] must be a str or a part {{'type': ..., ...}}, got {part!r:.60}", field="messages"
            )
    return "\n".join(text.strip() for text in texts if text.strip())


def _name(value, where: str) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{where} must be a str, got {type(value).__name__}", field="messages")
    if not value.strip():
        raise ArgumentValueError(f"{where} must be non-empty text, got {value!r}", field="messages")
    return value.strip()


def is_message(item) -> bool:
    """Whether ``item`` is a chat message: a mapping, or a LangChain message object (``add_many`` reads a
    list holding one as a transcript)."""
    return isinstance(item, Mapping) or _is_langchain_message(item)


LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}


def as_mapping(message):
    """A LangChain message object (``HumanMessage``, ``AIMessage``, ...) as a message mapping: the role from
    its type (``human`` -> ``user``, ``ai`` -> ``assistant``, ``tool``/``function`` -> ``tool``, a
    ``ChatMessage``'s own role), its ``content`` as it is, ``name`` and ``id`` when set. Anything else is
    returned as it is. Read by its attributes, so langchain_core is never imported here."""
    if not _is_langchain_message(message):
        return message
    kind = message.type.removesuffix("MessageChunk").lower()  # a streamed chunk's type: "AIMessageChunk", ...
    role = getattr(message, "role", None) if kind == "chat" else LANGCHAIN_ROLES.get(kind, kind)
    out: dict = {"role": role, "content": message.content}
    if message.name:
        out["name"] = message.name
    if message.id:
        out["id"] = message.id
    return out


def _is_langchain_message(message) -> bool:
    """Whether ``message`` is a LangChain ``BaseMessage``, told by the names of its classes (memnets.memory
    imports nothing of langchain_core, an optional extra)."""
    return any(
        cls.__name__ == "BaseMessage" and cls.__module__.startswith("langchain_core.") for cls in type(message).__mro__
    )


def check_options(keep, roles) -> tuple[str, ...]:
    """``roles`` as a tuple (None: :data:`DEFAULT_ROLES`) once ``keep`` and ``roles`` are valid."""
    if keep not in KEEPS:
        raise ArgumentValueError(f"keep must be one of {KEEPS}, got {keep!r}", field="messages")
    if roles is None:
        return DEFAULT_ROLES
    if isinstance(roles, str) or not isinstance(roles, Sequence) or not roles:
        raise ArgumentTypeError(f"roles must be a non-empty list of role names, got {roles!r:.60}", field="messages")
    return tuple(_name(role, f"roles[{n}]") for n, role in enumerate(roles))


def parse_messages(messages, where: str = "messages") -> list[Message]:
    """Every message of ``messages`` read (:func:`parse_message`); ids repeated within the list refused."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise ArgumentTypeError(f"{where} must be a list of messages, got {type(messages).__name__}", field="messages")
    parsed = [parse_message(message, f"{where}[{n}]") for n, message in enumerate(messages)]
    repeated = sorted(id for id, count in Counter(m.id for m in parsed if m.id is not None).items() if count > 1)
    if repeated:
        raise ArgumentValueError(f"{where}: ids repeated within the call: {repeated[:5]}", field="messages")
    return parsed


def unwritten(message: Message, roles: Sequence[str]) -> str | None:
    """Why ``message`` is skipped before encoding: "role" (not in ``roles``), "no text", or None (it is written)."""
    if message.role not in roles:
        return "role"
    return None if message.text else "no text"


def message_time(base: datetime, n: int) -> datetime:
    """The time of message ``n`` that has none of its own: the call's ``t`` (``base``) plus ``n``
    microseconds, so that a listing by ``t`` keeps the transcript's order. ArgumentValueError naming ``t``
    (and the message) when that passes the last datetime: a bare OverflowError ("date value out of
    range") had named neither, and was no ValueError."""
    try:
        return base + timedelta(microseconds=n)
    except OverflowError:
        raise ArgumentValueError(
            f"t {base.isoformat()} leaves no room for messages[{n}]: a message without its own time is t plus its "
            "position in microseconds, which passes the year 9999; give an earlier t or the message a time",
            field="t",
        ) from None


class MessageWriter:
    """Writes a transcript through an ``AgentMemory``'s write path (its :meth:`add` is the memory's).

    Args:
        writes: the memory's :class:`~memnets.memory.writes.WritePath` (it holds the user's write lock and
            refuses a write once the memory closed).
        store: the memory's store (whether it keeps a ``ttl``).
        scope: the memory's default ``{"agent": ..., "session": ...}`` of writes.
    """

    def __init__(self, writes, store, scope: Mapping[str, str | None]):
        self.writes, self.store, self.scope = writes, store, scope

    def add(
        self,
        messages,
        *,
        user: str,
        fields: MemoryFields,
        keep: str = "all",
        roles: Sequence[str] | None = None,
        refused: Mapping[str, object] | None = None,
    ) -> list[MessageOutcome]:
        """Store the kept ``messages`` of ``user`` (see the module docstring); one outcome per message, in order.

        ``fields``: every message's memory's fields (:data:`~memnets.memory.fields.MESSAGE_FIELDS`; a message has
        no structured view, and its own time and id replace ``t`` and an id). ``refused``: the caller's arguments
        that do not go with messages (a text, an id, ...), by name: ValueError naming those that are given.
        Everything is checked before the first write.
        """
        if messages is None:  # add() with neither a text nor messages: the text's own error
            check_item(None, "add")
        given = [name for name, value in (refused or {}).items() if value is not None]
        if given:
            raise ArgumentValueError(
                f"messages=[...] go without {given}: each message is one memory (its id in 'id')", field="messages"
            )
        check_user(user)
        roles = check_options(keep, roles)
        parsed = parse_messages(messages)
        metadata = fields.metadata
        if metadata is not None and not isinstance(metadata, dict):
            raise ArgumentTypeError(f"metadata must be a dict, got {type(metadata).__name__}", field="metadata")
        fields = fields.scoped(self.scope)
        base = as_utc_or_now(fields.t, "t")
        outcomes = [MessageOutcome(n, m.role, "skipped", reason=unwritten(m, roles)) for n, m in enumerate(parsed)]
        chosen = [n for n, outcome in enumerate(outcomes) if outcome.reason is None]  # the rest stay skipped
        records = [self._record(parsed[n], n, user, fields, parsed[n].time or message_time(base, n)) for n in chosen]
        if not records:
            return outcomes
        names = [f"messages[{n}].content" for n in chosen]
        scored = fields.importance is not None
        memories, vectors, chunks = self.writes.prepare(records, [scored] * len(records), names)
        threshold = self.writes.config.write_through_threshold
        kept = [i for i, m in enumerate(memories) if keep == "all" or keeps(m.importance, threshold)]
        for i in sorted(set(range(len(memories))) - set(kept)):
            outcomes[chosen[i]] = replace(outcomes[chosen[i]], reason="unimportant")
        if kept:
            explicit = [parsed[chosen[i]].id is not None for i in kept]
            written = self.writes.commit(
                [memories[i] for i in kept], vectors[kept], [chunks[i] for i in kept], explicit=explicit
            )
            for i, memory in zip(kept, written):
                outcomes[chosen[i]] = MessageOutcome(chosen[i], parsed[chosen[i]].role, memory.outcome, memory)
        return outcomes

    def _record(self, message: Message, n: int, user: str, fields: MemoryFields, t: datetime) -> Memory:
        """The memory of message ``n`` at ``t`` (validated by :func:`~memnets.memory.intake.new_record`): the call's
        fields with the message's role and speaker added to its metadata, no structured view."""
        metadata = {**(fields.metadata or {}), "role": message.role, "speaker": message.speaker}
        own = fields.replace(t=t, metadata=metadata, **dict.fromkeys(STRUCTURED_FIELDS))
        return new_record(message.content, user, f"messages[{n}]", self.store, id=message.id, fields=own)


__all__ = [
    "CONVERSATION_ROLES",
    "DEFAULT_ROLES",
    "KEEPS",
    "Message",
    "MessageOutcome",
    "MessageWriter",
    "is_message",
    "parse_message",
    "text_of",
]
