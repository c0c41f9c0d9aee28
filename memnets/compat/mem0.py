"""mem0's ``Memory`` over memnets: a mem0 user switches by changing an import.

::

    from memnets.compat.mem0 import Memory      # was: from mem0 import Memory

    m = Memory.from_config({"vector_store": {"config": {"path": "memories/"}}})
    m.add("I love sci-fi movies", user_id="alice", infer=False)
    m.search("What does Alice like?", user_id="alice")["results"][0]["memory"]

mem0's calls (its current open-source ``Memory``) with its argument names and result shapes: ``add(messages,
user_id=, agent_id=, run_id=, metadata=, expiration_date=, infer=)`` -> ``{"results": [{"id", "memory",
"event"}]}``; ``search(query, top_k=20, filters=, threshold=, explain=)`` and ``get_all(filters=, top_k=20)``
-> ``{"results": [item]}`` (the ids also as arguments, mem0's older form, and ``limit`` for ``top_k``);
``get(memory_id)`` -> an item; ``update(memory_id, text=, metadata=, expiration_date=)`` (``data=``: mem0's
deprecated name of ``text``), ``delete``/``delete_all`` -> ``{"message": ...}``; ``history(memory_id)`` -> its
events. An item is ``{"id", "memory", "hash", "metadata", "created_at", "updated_at", "user_id", "agent_id",
"run_id", "expiration_date", "role", "actor_id", "score"}`` (each of the last seven when it has one).
``messages`` is a str, a ``{"role", "content"}`` dict or a list of them, as mem0 takes them.

How mem0's scopes map onto memnets': ``user_id`` is the memnets user (the owner: nothing of one
user is read or changed by a call for another); ``agent_id`` and ``run_id`` are the memory's agent
and session scopes. A write without ``user_id`` belongs to the user :data:`SHARED_USER`; a read
without it looks at every user's memories of the agent or run named. An id may be given in a read's
``filters`` instead (``filters={"user_id": "alice"}``, as mem0 allows); one there that is None or
another value than the argument's is a ValueError naming both, never a read of another scope.

``infer`` (default True, as in mem0): the messages go through the LLM extraction of
:mod:`memnets.memory.extraction` with the config's ``llm``, else mem0's default from ``$OPENAI_API_KEY`` /
``$OPENAI_BASE_URL`` (:mod:`memnets.compat.mem0_config`); with neither, :class:`LLMNotConfiguredError` names
them (memnets never calls a model it was not given). ``infer=False`` stores each
message as ``add(messages=...)`` does (:mod:`memnets.memory.messages`: the text ``"{speaker}: {text}"``,
the form memnets' encoder was trained on; system and tool messages left out), shown with its
``role`` (and its ``name`` as ``actor_id``).

Differences that remain: deletion is final in memnets (``history`` of a deleted memory is empty,
where mem0 keeps a DELETE event); the encoder is memnets' (bundled, or a pack's), not the config's
``embedder``; ``get``/``update``/``delete``/``history`` by id alone look the id up among the users; no
default ``threshold`` (mem0's 0.1 is on its own score scale); a past ``expiration_date`` and
``show_expired=True`` are refused (memnets deletes expired memories); ``contains``/``icontains``/``NOT``/``"*"``
filters are refused, naming them (docs/integrations.md, "Switching from mem0").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import memnets.timeutil as timeutil
from memnets.api import AgentMemory
from memnets.api import open as open_memory
from memnets.argerrors import ArgumentValueError
from memnets.compat.mem0_config import LLMNotConfiguredError, read_config
from memnets.memory.extraction import OUTCOME_EVENTS, Change, Extraction, ExtractionError
from memnets.memory.messages import CONVERSATION_ROLES
from memnets.records import Memory as Record

SHARED_USER = "mem0-shared"  # the owner of memories written without a user_id
MESSAGE_FIELDS = ("role", "speaker")  # metadata of a stored message (memnets.memory.messages), shown as mem0 does
FILTER_OPERATORS = {"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"}  # mem0's, memnets' with a "$"
ENTITY_KEYS = {"user_id": "user", "agent_id": "agent", "run_id": "session"}
EXPIRATION = "expiration_date"  # the metadata field of mem0's expiration date, shown as a field of the item
DEFAULT_TOP_K = 20  # mem0's top_k of search and get_all
_UNSET = object()  # update(expiration_date=...) left out: the expiry stays


class Memory:
    """mem0's ``Memory`` on a memnets store (see the module docstring).

    Args:
        config: a mem0 config dict (or mem0's ``MemoryConfig``); see :mod:`memnets.compat.mem0_config`.
        memory: an open :class:`~memnets.api.AgentMemory` to use instead of the config's store.
    """

    def __init__(self, config: Mapping | Any | None = None, *, memory: AgentMemory | None = None):
        settings = read_config(config)
        self.memory = memory if memory is not None else open_memory(settings.location, **settings.open_options)
        self._owns = memory is None
        self.llm = settings.llm
        self.extraction = Extraction(self.llm, **settings.extraction) if self.llm is not None else None

    @classmethod
    def from_config(cls, config_dict: Mapping) -> Memory:
        """mem0's constructor from a config dict."""
        return cls(config_dict)

    # ------------------------------------------------------------------ writing
    def add(
        self,
        messages: str | Mapping | list[Mapping],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping | None = None,
        timestamp: Any = None,
        expiration_date: Any = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
    ) -> dict:
        """Store ``messages`` (``infer``: the facts an LLM extracts; else each message); ``{"results": [...]}``.

        ``expiration_date`` (``YYYY-MM-DD``, a date): the memories written expire at the end of that day
        (UTC). ``timestamp`` is refused as mem0's open-source ``Memory`` refuses it (a platform feature);
        ``memory_type`` (procedural memories) and ``prompt`` (a custom extraction prompt) are not memnets'.
        """
        if timestamp is not None:
            raise ValueError("add: timestamp is a mem0 platform parameter, not supported here (as in mem0's Memory)")
        for name, value in (("memory_type", memory_type), ("prompt", prompt)):
            if value is not None:
                raise ValueError(f"add: {name} is not supported by memnets' mem0 facade; leave it out")
        messages = _messages(messages)
        user = _owner(user_id, agent_id, run_id, "add")
        scope = {"agent": agent_id, "session": run_id}
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"add: metadata must be a dict, got {type(metadata).__name__}")
        expiry, metadata = _expiry(expiration_date, "add"), dict(metadata or {})
        if expiry is not None:
            metadata[EXPIRATION] = expiry[0]
        ttl = expiry[1] if expiry is not None else None
        if infer:
            if self.extraction is None:
                raise LLMNotConfiguredError(
                    "add(infer=True) needs an LLM to extract facts: set the config's 'llm' "
                    "({'provider': 'openai', 'config': {'model': ..., 'openai_base_url': ...}}, any OpenAI-compatible "
                    "server) or $OPENAI_API_KEY / $OPENAI_BASE_URL, as mem0 reads them, or call add(..., infer=False) "
                    "to store the messages as they are"
                )
            changes = self.extraction.add(self.memory, messages, user=user, metadata=metadata, ttl=ttl, **scope)
            return {"results": [_event(c) for c in changes if c.event != "NONE"]}
        outcomes = self.memory.add(
            messages=messages, user=user, metadata=metadata, ttl=ttl, roles=CONVERSATION_ROLES, **scope
        )  # mem0 stores every message but system ones
        return {"results": [_written(o.memory) for o in outcomes if o.outcome in ("added", "updated")]}

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: Mapping | None = None,
        expiration_date: Any = _UNSET,
        data: str | None = None,
    ) -> dict:
        """Memory ``memory_id`` gets the text ``text`` (``data``: mem0's deprecated name of it), metadata merged in
        and/or an ``expiration_date`` (None clears it); its old text stays in ``history``."""
        text = text if text is not None else data
        if text is None and metadata is None and expiration_date is _UNSET:
            raise ValueError("update: give at least one of text, metadata or expiration_date")
        current = self._find(memory_id, "update")
        extra, expiry = dict(metadata or {}), {}
        if expiration_date is not _UNSET:
            found = _expiry(expiration_date, "update")
            extra[EXPIRATION] = found[0] if found is not None else None
            expiry["ttl"] = found[1] if found is not None else None
        self.memory.update(memory_id, text, user=current.owner, metadata=extra, merge_metadata=True, **expiry)
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str) -> dict:
        """Delete memory ``memory_id`` for good (with its older versions)."""
        current = self._find(memory_id, "delete")
        self.memory.delete(memory_id, user=current.owner)
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None):
        """Delete every memory of a scope (at least one of the three ids)."""
        _owner(user_id, agent_id, run_id, "delete_all")
        self.memory.delete_all(user=user_id, agent=agent_id, session=run_id)
        return {"message": "Memories deleted successfully!"}

    def reset(self) -> None:
        """Delete every memory of every user."""
        for user in self.memory.users():
            self.memory.delete_all(user=user)

    # ------------------------------------------------------------------ reading
    def get(self, memory_id: str) -> dict | None:
        """The item of memory ``memory_id``, or None."""
        found = self._lookup(memory_id)
        return _item(found) if found is not None else None

    def get_all(
        self,
        *,
        filters: Mapping | None = None,
        top_k: int = DEFAULT_TOP_K,
        show_expired: bool = False,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int | None = None,
    ) -> dict:
        """The memories of a scope, oldest first, at most ``top_k`` (``limit``: mem0's older name of it)."""
        _no_expired(show_expired, "get_all")
        user_id, agent_id, run_id, where = _scope(user_id, agent_id, run_id, filters, "get_all")
        limit = limit if limit is not None else top_k
        found = [
            m for user in self._users(user_id) for m in self.memory.list_memories(user=user, limit=limit, filters=where)
        ]
        return {"results": [_item(m) for m in sorted(found, key=lambda m: (m.t, m.id))[:limit]]}

    def search(
        self,
        query: str,
        *,
        top_k: int = DEFAULT_TOP_K,
        filters: Mapping | None = None,
        threshold: float | None = None,
        rerank: bool = False,
        explain: bool = False,
        reference_date: Any = None,
        show_expired: bool = False,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int | None = None,
    ) -> dict:
        """The memories of a scope best for ``query``, best first: ``{"results": [item with "score"]}``.

        ``explain``: each item also has ``score_details`` (memnets' parts: :mod:`memnets.memory.explain`).
        ``rerank`` changes nothing (a pack's scorer, when there is one, always re-ranks); ``reference_date``
        is refused as mem0's open-source ``Memory`` refuses it.
        """
        if reference_date is not None:
            raise ValueError("search: reference_date is a mem0 platform parameter, not supported (as in mem0's Memory)")
        _no_expired(show_expired, "search")
        user_id, agent_id, run_id, where = _scope(user_id, agent_id, run_id, filters, "search")
        k = limit if limit is not None else top_k
        users = self._users(user_id)
        if not users:
            return {"results": []}
        if explain:
            explained = self.memory.explain(query, users=users, k=k, filters=where)
            found = [
                (h, _details(h.parts, explained.ranker, threshold)) for hits in explained.by_user.values() for h in hits
            ]
        else:
            found = [
                (hit, None)
                for hits in self.memory.search_many(query, users=users, k=k, filters=where).values()
                for hit in hits
            ]
        ranked = sorted(found, key=lambda pair: -pair[0].score)[:k]
        return {
            "results": [
                {**_item(hit.memory), "score": hit.score, **({"score_details": details} if details else {})}
                for hit, details in ranked
                if threshold is None or hit.score >= threshold
            ]
        }

    def history(self, memory_id: str) -> list[dict]:
        """The events of memory ``memory_id``, oldest first: its first text (ADD), then each change (UPDATE)."""
        current = self._lookup(memory_id)
        if current is None:
            return []
        versions = self.memory.history(memory_id, user=current.owner)
        events = []
        for n, version in enumerate(versions):
            events.append(
                {
                    "id": version.id,
                    "memory_id": memory_id,
                    "old_memory": versions[n - 1].content if n else None,
                    "new_memory": version.content,
                    "event": "UPDATE" if n else "ADD",
                    "created_at": _iso(version.t),
                    "updated_at": _iso(version.updated_at),
                    "is_deleted": 0,
                    **_speaker(version),
                }
            )
        return events

    def close(self) -> None:
        if self._owns:
            self.memory.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers
    def _users(self, user_id: str | None) -> list[str]:
        return [user_id] if user_id is not None else self.memory.users()

    def _lookup(self, memory_id: str) -> Record | None:
        if not isinstance(memory_id, str) or not memory_id:
            raise ValueError(f"memory_id must be a non-empty string, got {memory_id!r}")
        for user in self.memory.users():
            found = self.memory.get(memory_id, user=user)
            if found is not None:
                return found
        return None

    def _find(self, memory_id: str, call: str) -> Record:
        found = self._lookup(memory_id)
        if found is None:
            raise ValueError(f"{call}: no memory with id {memory_id!r}")
        return found


def _expiry(value, call: str) -> tuple[str, float] | None:
    """(``YYYY-MM-DD``, seconds from now to the end of that day in UTC) of mem0's ``expiration_date``; None for None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        value = value.date()
    elif isinstance(value, str):
        try:
            value = date.fromisoformat(value)
        except ValueError:
            raise ArgumentValueError(
                f"{call}: expiration_date must be a date in YYYY-MM-DD format, got {value!r:.40}",
                field="expiration_date",
            ) from None
    if not isinstance(value, date):
        raise ArgumentValueError(
            f"{call}: expiration_date must be a YYYY-MM-DD string or a date, got {type(value).__name__}",
            field="expiration_date",
        )
    end = datetime.combine(value + timedelta(days=1), time(), tzinfo=UTC)
    seconds = (end - timeutil.now()).total_seconds()
    if seconds <= 0:
        raise ArgumentValueError(
            f"{call}: expiration_date {value.isoformat()} has passed; memnets deletes expired memories, so it would "
            "store nothing",
            field="expiration_date",
        )
    return value.isoformat(), seconds


def _no_expired(show_expired: bool, call: str) -> None:
    if show_expired:
        raise ValueError(
            f"{call}: show_expired=True is not supported: memnets hides an expired memory and then deletes it for good"
        )


def _details(parts, ranker: str, threshold: float | None) -> dict:
    """mem0's ``score_details`` of an explained hit, in memnets' terms (its relevance, recency, importance)."""
    return {
        "semantic_score": parts.relevance,
        "recency": parts.recency,
        "importance": parts.importance,
        "learned_score": parts.learned,
        "ranker": ranker,
        "threshold": threshold,
    }


def _messages(messages) -> list:
    """mem0's message forms as a list of message dicts: a str is one user message, a dict one message."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, list):
        raise TypeError(
            f"add: messages must be a str, a {{'role', 'content'}} dict or a list of them, got {messages!r:.80}"
        )
    return messages


def _owner(user_id, agent_id, run_id, call: str) -> str:
    """The memnets user of a write: ``user_id``, else :data:`SHARED_USER`; one of the three ids is required."""
    if user_id is None and agent_id is None and run_id is None:
        raise ValueError(f"{call}: give at least one of user_id, agent_id or run_id")
    for name, value in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"{call}: {name} must be a non-empty string, got {value!r}")
    return user_id if user_id is not None else SHARED_USER


def _scope(user_id, agent_id, run_id, filters, call: str) -> tuple:
    """(user_id, agent_id, run_id, memnets filter) of a read: the ids given (or, where only there, in
    ``filters``, as mem0 allows), the rest of ``filters`` as metadata conditions."""
    rest = dict(filters or {})
    given = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
    ids = {name: _scope_id(name, value, rest, call) for name, value in given.items()}
    _owner(*ids.values(), call)
    where: dict = {ENTITY_KEYS[name]: value for name, value in ids.items() if name != "user_id" and value is not None}
    if rest:
        where["metadata"] = _conditions(rest)
    return *ids.values(), where or None


def _scope_id(name: str, given, rest: dict, call: str):
    """The id ``name`` of a read: ``given``, else the value ``rest`` (the filters) holds for it, taken out.

    An explicit id bounds the read (mem0 gives it precedence over filters; nothing of one user is
    read by a call for another), so a filter that would move or widen it is refused, not applied:
    ``filters[name]`` None (every scope), or another value than ``given``. The same value in both is fine.
    """
    if name not in rest:
        return given
    found = rest.pop(name)
    if found is None:
        raise ArgumentValueError(
            f"{call}: filters[{name!r}] is None, which would read every {name}; leave it out, or give {name}=...",
            field="filters",
        )
    if given is not None and found != given:
        raise ArgumentValueError(
            f"{call}: {name}={given!r} and filters[{name!r}]={found!r} name different scopes; give one of them",
            field="filters",
        )
    return found


def _conditions(filters: Mapping) -> dict:
    """mem0's metadata filters (``{"field": value}``, ``{"field": {"gte": 3}}``, ``AND``/``OR``) in memnets' form."""
    out: dict = {}
    for key, condition in filters.items():
        if key in ("AND", "OR"):
            out["$" + key.lower()] = [_conditions(part) for part in condition]
        elif key == "NOT" or condition == "*":
            raise ValueError(f"filters[{key!r}]: mem0's {'NOT' if key == 'NOT' else 'wildcard *'} is not supported")
        elif isinstance(condition, Mapping):
            unknown = [op for op in condition if op.lstrip("$") not in FILTER_OPERATORS]
            if unknown:
                raise ValueError(
                    f"filters[{key!r}]: operators {unknown} are not supported; use {sorted(FILTER_OPERATORS)}"
                )
            out[key] = {"$" + op.lstrip("$"): value for op, value in condition.items()}
        else:
            out[key] = condition
    return out


def _iso(when) -> str | None:
    return when.isoformat() if when is not None else None


def _item(memory: Record) -> dict:
    """A memory as mem0 shows one."""
    item = {
        "id": memory.id,
        "memory": memory.content,
        "hash": hashlib.md5(memory.content.encode()).hexdigest(),
        "metadata": {k: v for k, v in memory.metadata.items() if k not in (*MESSAGE_FIELDS, EXPIRATION)} or None,
        "created_at": _iso(memory.t),
        "updated_at": _iso(memory.updated_at),
    }
    if memory.owner != SHARED_USER:
        item["user_id"] = memory.owner
    for key, value in (
        ("agent_id", memory.agent),
        ("run_id", memory.session),
        (EXPIRATION, memory.metadata.get(EXPIRATION)),
    ):
        if value is not None:
            item[key] = value
    return {**item, **_speaker(memory)}


def _speaker(memory: Record) -> dict:
    """mem0's ``role`` and ``actor_id`` (a message's ``name``) of a stored message; {} for other memories."""
    shown = {"role": memory.metadata["role"]} if "role" in memory.metadata else {}
    if memory.metadata.get("speaker", shown.get("role")) != shown.get("role"):
        shown["actor_id"] = memory.metadata["speaker"]
    return shown


def _written(memory: Record) -> dict:
    """An ``add`` result of a message stored as it is."""
    return {"id": memory.id, "memory": memory.content, "event": OUTCOME_EVENTS[memory.outcome], **_speaker(memory)}


def _event(change: Change) -> dict:
    """An ``add`` result of an extracted fact, as mem0 reports it."""
    result = {"id": change.memory.id, "memory": change.memory.content, "event": change.event}
    if change.previous is not None:
        result["previous_memory"] = change.previous
    return result


__all__ = ["ExtractionError", "LLMNotConfiguredError", "Memory", "SHARED_USER"]
