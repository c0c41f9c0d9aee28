"""LangChain chat messages as memnets messages: ``BaseMessage`` -> ``{"role", "content", "name", "id"}``.

``AgentMemory.add(messages=...)`` takes OpenAI-style mappings (:mod:`memnets.memory.messages`); a
LangChain or LangGraph application holds ``BaseMessage`` objects (``HumanMessage``, ``AIMessage``,
...). :func:`message_dicts` maps them: the role from the message's type (``human`` -> ``user``,
``ai`` -> ``assistant``, ``system``, ``tool``/``function`` -> ``tool``, a ``ChatMessage``'s own
role), ``content`` as it is (a string or a list of parts, whose text parts memnets keeps), ``name``
(the speaker) and ``id`` (LangGraph's ``add_messages`` gives every message one, so writing a
graph's whole history again changes nothing) when set. Mappings pass through unchanged, so a list
may mix both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from memnets.memory.messages import LANGCHAIN_ROLES, as_mapping

ROLES = LANGCHAIN_ROLES  # LangChain message types -> memnets roles


def message_dict(message: BaseMessage | Mapping, where: str = "messages[0]") -> Mapping[str, Any]:
    """One message as a memnets message mapping (a mapping as it is); TypeError naming ``where`` for anything else."""
    if isinstance(message, Mapping):
        return message
    if not isinstance(message, BaseMessage):
        raise TypeError(f"{where} must be a LangChain BaseMessage or a mapping, got {type(message).__name__}")
    return as_mapping(message)


def message_dicts(messages: Sequence[BaseMessage | Mapping]) -> list[Mapping[str, Any]]:
    """:func:`message_dict` of each message, in order."""
    if isinstance(messages, (str, Mapping, BaseMessage)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
    return [message_dict(message, f"messages[{n}]") for n, message in enumerate(messages)]


__all__ = ["ROLES", "message_dict", "message_dicts"]
