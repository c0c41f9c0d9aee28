"""A LangGraph ``BaseStore`` on a memnets memory: ``MemnetsStore(memnets.open(...))``.

How LangGraph's model maps onto memnets (see docs/integrations.md):

- **Namespace -> owner.** A namespace tuple is one memnets user, its labels joined with ``"."``
  (``("memories", "alice")`` is the user ``"memories.alice"``). LangGraph forbids periods in
  labels, so the mapping is reversible, and a memnets user whose name holds no empty label reads
  back as a namespace: the same memory can be served to LangGraph, LangChain and MCP at once.
- **Key -> memory id** (ids are unique per owner). **Value -> text and metadata**, one view for
  every door: a value's ``"content"`` string is the memory's text (``Memory.content``, what
  ``AgentMemory.get``, LangChain and MCP show as the text) and the rest of the value is its
  metadata, so filters on value fields run in the store, before ranking. The other way round, a
  memory written through another door reads as the value ``{**metadata, "content": <its text>}`` (a
  metadata field named ``"content"``, which another door may write, gives way to the text).
  ``Item.created_at`` is the memory's creation time (``Memory.t``, kept by every new version),
  ``Item.updated_at`` its ``updated_at``; no key of memnets' own appears in a value or in the
  memory's metadata.
- **Another indexed text.** A put that embeds something else (``put(..., index=[...])``, the
  store's ``fields``, a value without ``"content"``: then its ``"text"`` field, else the whole value
  as JSON; several fields joined with newlines into one text, memnets keeps one text per memory)
  keeps the whole value as the metadata and the embedded text as the content, marked with the
  one reserved metadata key ``__memnets_value`` (``"whole"``), so that it reads back exactly.
- ``put(..., index=False)`` (or a value without the indexed fields) is the same with
  ``__memnets_value = "unindexed"``: a query search never ranks it, a search without a query, a
  filter search and ``get`` still find it.
- **Search with a query** goes through ``AgentMemory.search``: the memory's encoder, the store and,
  when the memory was opened with a pack, its learned scorer (``SearchItem.score`` is that score).
  Without a query, items come oldest first (by creation time). A filter on ``"content"`` is
  refused (it is the memory's text: search with ``query=``). Filters take LangGraph's
  ``$eq $ne $gt $gte $lt $lte`` (and memnets' ``$in``) on top-level value fields with memnets'
  semantics (:class:`memnets.store.filters.MemoryFilter`); a nested dict is a subset match as in
  LangGraph (``{"a": {"b": 1}}`` finds ``{"a": {"b": 1, "c": 2}}``; operators inside it apply one level
  down: ``{"a": {"b": {"$gt": 1}}}``), MemoryFilter's ``$fields``; a dotted name is a path into nested
  values as in LangGraph's SQL stores (``{"user.access-level": 1}``), or a top-level field of that name;
  ``inf``/``-inf``/NaN operands compare as LangGraph's stores compare them (:func:`_finite`);
  ``"$and"``/``"$or"`` take lists of such filters; ``"$as_of"``/``"$known_at"`` (a datetime or
  an ISO string, top level) read the versions valid / written by then (``AgentMemory.search``'s
  ``as_of``/``known_at``; an older version found so is answered under its item's key); any other
  ``$`` key is an error naming it. A query search ranks at most 10,000 items (the API's ``k``):
  ``offset`` + ``limit`` past that pages through those.
- **The root label "langgraph"** is LangGraph's own: as in its stores (``InMemoryStore``,
  ``PostgresStore``), the public ``put``/``aput`` refuse it (BaseStore's check), while a ``PutOp``
  given to ``batch``/``abatch``, the way LangGraph writes its own namespaces, is stored; reads of
  such a namespace work either way.
- ``put`` is ``AgentMemory.add`` with ``id=key``: over an existing key with another value it
  writes a new version (the old value stays in the memory's history until the item is deleted;
  the same value again writes nothing; keys may not contain ``"~"``, which memnets reserves for
  older versions). ``put(value=None)``/``delete`` is
  ``AgentMemory.delete`` (the item and its history, for good).

- **TTL** (``supports_ttl = True``): LangGraph's ``TTLConfig`` (``MemnetsStore(memory, ttl={...})``):
  ``default_ttl`` (minutes) for puts that give none, ``refresh_on_read`` (default True, as in
  LangGraph) for gets and searches that do not say ``refresh_ttl``, and ``sweep_interval_minutes``
  for the background sweep (:meth:`MemnetsStore.start_ttl_sweeper`, started and stopped by
  ``with MemnetsStore(...)``). A put's ``ttl`` is ``AgentMemory.add(..., ttl=minutes * 60)``; an
  expired item is gone from every read at once (the memory hides it) and deleted for good by the
  sweep (``AgentMemory.sweep_expired``, the deletion path of ``delete``).

- **A graph's conversation** (``MessagesState``): :func:`remember_messages` writes its messages into a
  memory, one memory per user message (``roles=`` for the assistant's too; ``AgentMemory.add(messages=...)``, the messages
  mapped by :func:`memnets.integrations.chat.message_dicts`). LangGraph's ``add_messages`` gives every
  message an id, which becomes the memory's: a node may write the whole history after every turn and
  only the new messages are added. A later turn, in any thread, recalls them with ``memory.search``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memnets.extras import needs_extra
from memnets.memory.arguments import MAX_K
from memnets.memory.texts import check_text
from memnets.records import Memory
from memnets.store.filters import MemoryFilter
from memnets.store.rows import VERSION_SEPARATOR, memory_of_version
from memnets.timeutil import as_utc, now

with needs_extra("memnets.integrations.langgraph", "langgraph"):
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        tokenize_path,
    )

    from memnets.integrations.chat import message_dicts

log = logging.getLogger(__name__)
RESERVED_PREFIX = "__memnets_"
LAYOUT = RESERVED_PREFIX + "value"  # "whole" / "unindexed": the metadata is the whole value (see the docstring)
LEGACY = (RESERVED_PREFIX + "created_at", RESERVED_PREFIX + "unindexed")  # keys of stores written before LAYOUT
TEXT_FIELD = "content"  # a value's text: the memory's content
DEFAULT_FIELDS = (TEXT_FIELD, "text")  # the first of these present in a value is embedded


def namespace_to_owner(namespace: Sequence[str]) -> str:
    """The memnets user of a LangGraph namespace (labels joined with ``"."``); checks LangGraph's label rules."""
    _check_labels(namespace, "namespace")
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    return ".".join(namespace)


def owner_to_namespace(owner: str) -> tuple[str, ...] | None:
    """The namespace a memnets user reads as, or None when it is no valid namespace (an empty label)."""
    labels = tuple(owner.split("."))
    if any(not label or "\x00" in label for label in labels):
        return None
    return labels


class MemnetsStore(BaseStore):
    """LangGraph long-term memory store backed by one memnets memory (``memnets.open``).

    Args:
        memory: the :class:`memnets.api.AgentMemory` to read and write; the store does not close it.
        fields: value fields (LangGraph JSON paths, e.g. ``["content", "tags[*]"]``) whose text is
            embedded when a ``put`` names none; default: ``"content"``, else ``"text"``, else the whole value.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes``); None: items expire only when a put gives a ``ttl``.
    """

    supports_ttl = True
    __slots__ = ("_sweeper", "_sweeper_stop", "fields", "memory", "ttl_config")

    def __init__(self, memory, *, fields: Sequence[str] | None = None, ttl: TTLConfig | None = None):
        if isinstance(fields, str) or (fields is not None and not all(isinstance(f, str) and f for f in fields)):
            raise TypeError(f"MemnetsStore: fields must be a list of non-empty field paths or None, got {fields!r}")
        self.memory = memory
        self.fields = tuple(fields) if fields is not None else None
        self.ttl_config = _check_ttl_config(ttl)
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()

    # ------------------------------------------------------------------ TTL sweeping
    def sweep_ttl(self) -> int:
        """Delete every expired memory for good now (``AgentMemory.sweep_expired``); returns how many rows went."""
        return self.memory.sweep_expired()

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> bool:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the TTLConfig's) in a daemon thread.

        Returns False, doing nothing, when no interval is given or configured or a sweeper already
        runs. Stop it with :meth:`stop_ttl_sweeper` (``with MemnetsStore(...)`` does both).
        """
        interval = sweep_interval_minutes
        if interval is None:
            interval = (self.ttl_config or {}).get("sweep_interval_minutes")
        if interval is None or (self._sweeper is not None and self._sweeper.is_alive()):
            return False
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0:
            raise ValueError(f"MemnetsStore: sweep_interval_minutes must be a positive number, got {interval!r}")
        self._sweeper_stop.clear()
        self._sweeper = threading.Thread(
            target=self._sweep_every, args=(float(interval) * 60,), name="memnets-ttl-sweeper", daemon=True
        )
        self._sweeper.start()
        return True

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper (a sweep under way finishes first); True once it has stopped."""
        self._sweeper_stop.set()
        if self._sweeper is None:
            return True
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    def _sweep_every(self, seconds: float) -> None:
        while not self._sweeper_stop.wait(seconds):
            try:
                swept = self.sweep_ttl()
            except RuntimeError as error:  # the memory was closed under the sweeper
                log.warning("MemnetsStore TTL sweeper stops: %s", error)
                return
            if swept:
                log.info("MemnetsStore TTL sweep deleted %d expired rows", swept)

    def __enter__(self) -> MemnetsStore:
        self.start_ttl_sweeper()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_ttl_sweeper()

    # ------------------------------------------------------------------ BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order (a read after a write in the same batch sees the write)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"MemnetsStore: unknown operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread, so encoding and store I/O do not block the event loop."""
        return await asyncio.to_thread(self.batch, list(ops))

    # ------------------------------------------------------------------ operations
    def _get(self, op: GetOp) -> Item | None:
        memory = self.memory.get(str(op.key), user=namespace_to_owner(op.namespace), refresh_ttl=op.refresh_ttl)
        if memory is None or memory.superseded_by is not None:  # an older version is no item
            return None
        return _item(memory, op.namespace)

    def _put(self, op: PutOp) -> None:
        owner = namespace_to_owner(op.namespace)  # "langgraph" roots pass here, as in LangGraph's stores
        key = str(op.key)
        if not key:
            raise ValueError("MemnetsStore.put: key must be a non-empty string")
        ttl = _ttl_seconds(op.ttl)
        if op.value is None:
            if VERSION_SEPARATOR not in key:  # "x~1" names an older version of "x", never an item: nothing to delete
                self.memory.delete(key, user=owner)
            return
        value = _check_value(op.value)
        paths = self._paths(value, op.index)
        if paths == [TEXT_FIELD] and isinstance(value.get(TEXT_FIELD), str) and value[TEXT_FIELD].strip():
            text = value[TEXT_FIELD]
            metadata = {name: field for name, field in value.items() if name != TEXT_FIELD}
        else:
            text = _indexed_text(value, paths)
            metadata = {**value, LAYOUT: "whole" if text is not None else "unindexed"}
            if text is None:
                text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        # keyed by the key: a new version over an existing item (the old value goes to its history)
        self.memory.add(text, user=owner, id=key, metadata=metadata, t=now(), ttl=ttl)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        _check_labels(op.namespace_prefix, "namespace_prefix")
        if op.limit < 0 or op.offset < 0:
            raise ValueError(f"MemnetsStore.search: limit and offset must be >= 0, got {op.limit}, {op.offset}")
        owners = self._owners_under(op.namespace_prefix)
        if not owners or op.limit == 0:
            return []
        travel = _time_travel(op.filter)
        given = op.filter
        conditions = _metadata_conditions(
            {k: v for k, v in given.items() if k not in TIME_KEYS} if isinstance(given, Mapping) else given
        )
        wanted = op.offset + op.limit
        if op.query:
            if op.offset >= MAX_K:  # a query ranks at most MAX_K items: none lies past them
                return []
            wanted = min(wanted, MAX_K)
            indexed = {**conditions, LAYOUT: {"$ne": "unindexed"}, LEGACY[1]: {"$ne": True}}
            filters = MemoryFilter(metadata=indexed, **travel)
            by_owner = self.memory.search_many(
                op.query, users=[owner for owner, _ in owners], k=wanted, filters=filters, refresh_ttl=op.refresh_ttl
            )
            hits = [(float(hit.score), namespace, hit.memory) for owner, namespace in owners for hit in by_owner[owner]]
            hits.sort(key=lambda hit: -hit[0])
            return [
                _item(memory, namespace, SearchItem, score=score)
                for score, namespace, memory in hits[op.offset : wanted]
            ]
        filters = MemoryFilter(metadata=conditions or None, **travel) if conditions or travel else None
        if len(owners) == 1:
            owner, namespace = owners[0]
            listed = self.memory.list_memories(
                user=owner, limit=op.limit, offset=op.offset, filters=filters, refresh_ttl=op.refresh_ttl
            )
            return [_item(memory, namespace, SearchItem) for memory in listed]
        rows = [
            (memory, namespace)
            for owner, namespace in owners
            for memory in self.memory.list_memories(user=owner, limit=wanted, offset=0, filters=filters)
        ]
        rows.sort(key=lambda row: (row[0].t, row[0].owner, row[0].id))
        page = rows[op.offset : wanted]
        if op.refresh_ttl:
            page = [(self.memory.get(m.id, user=m.owner, refresh_ttl=True) or m, ns) for m, ns in page]
        return [_item(memory, namespace, SearchItem) for memory, namespace in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError(
                f"MemnetsStore.list_namespaces: limit and offset must be >= 0, got {op.limit}, {op.offset}"
            )
        if op.max_depth is not None and op.max_depth < 1:
            raise ValueError(f"MemnetsStore.list_namespaces: max_depth must be >= 1 or None, got {op.max_depth}")
        namespaces = [ns for ns in map(owner_to_namespace, self.memory.users()) if ns is not None]
        for condition in op.match_conditions or ():
            _check_labels(tuple(label for label in condition.path if label != "*"), "match path")
            namespaces = [ns for ns in namespaces if _matches(condition, ns)]
        if op.max_depth is not None:
            namespaces = [ns[: op.max_depth] for ns in namespaces]
        return sorted(set(namespaces))[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ helpers
    def _owners_under(self, prefix: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        """(owner, namespace) of every user whose namespace starts with ``prefix``, sorted."""
        pairs = ((owner, owner_to_namespace(owner)) for owner in self.memory.users())
        return sorted((owner, ns) for owner, ns in pairs if ns is not None and ns[: len(prefix)] == tuple(prefix))

    def _paths(self, value: dict, index) -> list[str] | None:
        """The value paths whose text a put embeds (None: store unindexed)."""
        if index is False:
            return None
        if index is not None and (isinstance(index, str) or not isinstance(index, (list, tuple))):
            raise TypeError(f"MemnetsStore.put: index must be False, None or a list of field paths, got {index!r}")
        paths = index if index is not None else self.fields
        if paths is None:
            paths = [next((field for field in DEFAULT_FIELDS if value.get(field) is not None), "$")]
        return list(paths)


def remember_messages(memory, state, *, user: str, session: str | None = None, **options) -> list:
    """Write a graph's conversation into ``memory`` (an ``AgentMemory`` or a ``memnets.Client``).

    ``state``: a ``MessagesState`` (its ``"messages"``) or a list of messages (LangChain messages
    and/or mappings); ``session``: the conversation's session scope (e.g. the thread id);
    ``options``: further arguments of ``AgentMemory.add`` (``keep``, ``roles``, ``metadata``, ...).
    Returns ``add(messages=...)``'s outcomes, one per message.
    """
    messages = state["messages"] if isinstance(state, Mapping) else state
    return memory.add(messages=message_dicts(messages), user=user, session=session, **options)


def _indexed_text(value: dict, paths: list[str] | None) -> str | None:
    """The text to embed for ``value``: its texts at ``paths`` joined by newlines (None: store unindexed)."""
    if paths is None:
        return None
    texts = [text for path in paths for text in get_text_at_path(value, path if path == "$" else tokenize_path(path))]
    texts = [text for text in texts if text.strip()]
    return "\n".join(texts) if texts else None


def memory_value(memory: Memory) -> dict:
    """The LangGraph value of a memory, written through any door (see the module docstring)."""
    metadata = memory.metadata or {}
    value = {name: field for name, field in metadata.items() if not name.startswith(RESERVED_PREFIX)}
    if LAYOUT in metadata or any(key in metadata for key in LEGACY):
        return value  # the whole value was kept as the metadata
    return {**value, TEXT_FIELD: memory.content}  # the text, even over a metadata field of that name


def _item(memory: Memory, namespace: tuple[str, ...], kind: type[Item] = Item, **extra) -> Item:
    """The LangGraph item (``kind`` Item or SearchItem) of a memory."""
    return kind(
        namespace=tuple(namespace),
        key=memory_of_version(memory.id),  # an older version ($as_of) is its item's version
        value=memory_value(memory),
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        **extra,
    )


def _check_labels(namespace, what: str) -> None:
    """LangGraph's label rules: strings, not empty, no periods, no NUL bytes."""
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(f"{what} must be a tuple of strings, got {type(namespace).__name__} {namespace!r}")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid {what} label {label!r} in {namespace}: labels are non-empty strings without periods or NUL bytes"
            )


def _check_value(value) -> dict:
    if not isinstance(value, Mapping):
        raise TypeError(f"MemnetsStore.put: value must be a dict or None, got {type(value).__name__}")
    bad = [name for name in value if not isinstance(name, str) or name.startswith(RESERVED_PREFIX)]
    if bad:
        raise ValueError(
            f"MemnetsStore.put: value keys must be strings not starting with {RESERVED_PREFIX!r}, got {bad!r}"
        )
    content = value.get(TEXT_FIELD)
    if isinstance(content, str):  # the memory's text: refused where every other door refuses it
        check_text(content, f"MemnetsStore.put: value[{TEXT_FIELD!r}]")
    elif TEXT_FIELD in value and not isinstance(content, (Mapping, list)):  # structured content (langmem's) is kept
        raise TypeError(
            f"MemnetsStore.put: value[{TEXT_FIELD!r}] must be text (or a dict or list of structured content), "
            f"got {type(content).__name__}"
        )
    return dict(value)


def _check_ttl_config(config: TTLConfig | None) -> TTLConfig | None:
    """LangGraph's TTLConfig, checked: ValueError naming the key that is unknown or of the wrong kind."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise TypeError(f"MemnetsStore: ttl must be a TTLConfig dict or None, got {type(config).__name__}")
    known = set(TTLConfig.__annotations__)
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"MemnetsStore: unknown TTLConfig keys {unknown}; known: {sorted(known)}")
    for name in ("default_ttl", "sweep_interval_minutes"):
        value = config.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise ValueError(f"MemnetsStore: TTLConfig {name} must be a positive number of minutes, got {value!r}")
    for name in ("refresh_on_read", "omit_expired"):
        if name in config and not isinstance(config[name], bool):
            raise ValueError(f"MemnetsStore: TTLConfig {name} must be a bool, got {config[name]!r}")
    return dict(config)


def _ttl_seconds(minutes: float | None) -> float | None:
    """A put's ttl (LangGraph counts minutes) in seconds, for AgentMemory.add."""
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not minutes > 0:
        raise ValueError(f"MemnetsStore.put: ttl must be a positive number of minutes or None, got {minutes!r}")
    return float(minutes) * 60


TIME_KEYS = {"$as_of": "as_of", "$known_at": "known_at"}  # filter keys of an as-of read


def _time_travel(filter: Mapping[str, Any] | None) -> dict[str, datetime]:
    """The ``$as_of``/``$known_at`` of LangGraph's filter as MemoryFilter fields (an ISO string is parsed)."""
    if not isinstance(filter, Mapping):
        return {}
    out = {}
    for key, name in TIME_KEYS.items():
        value = filter.get(key)
        if value is not None:
            out[name] = as_utc(value, f"MemnetsStore.search: filter {key}")
    return out


def _metadata_conditions(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """LangGraph's value filter as MemoryFilter metadata conditions (a nested dict is a subset match;
    ``$and``/``$or`` lists of filters are converted part by part)."""
    if not filter:
        return {}
    if not isinstance(filter, Mapping):
        raise TypeError(
            f"MemnetsStore.search: filter must be a dict of field -> condition, got {type(filter).__name__}"
        )
    conditions: dict[str, Any] = {}
    paths: list[dict[str, Any]] = []  # the conditions of dotted names, each a nested subset match
    for name, condition in filter.items():
        if name in ("$and", "$or") and isinstance(condition, (list, tuple)):
            conditions[name] = [_metadata_conditions(part) or {} for part in condition]
            continue
        if not isinstance(name, str) or name.startswith(RESERVED_PREFIX):
            raise ValueError(f"MemnetsStore.search: filter field {name!r} is not a value field")
        if name == TEXT_FIELD:
            raise ValueError(
                f"MemnetsStore.search: filter field {TEXT_FIELD!r} is the memory's text; search it with query=..."
            )
        if "." in name and all(name.split(".")):
            paths.append(_dotted(name, _condition(condition)))
        else:
            conditions[name] = _condition(condition)
    if paths:
        conditions["$and"] = [*conditions.get("$and", []), *paths]
    return conditions


def _dotted(name: str, condition: dict[str, Any]) -> dict[str, Any]:
    """The condition on a dotted field name: on the path into nested dicts (``"user.access-level"``: the
    field "access-level" of the dict "user", as LangGraph's SqliteStore and PostgresStore read it), or on a
    top-level field of that very name (as its InMemoryStore reads it). Either holding is a match; a
    condition only of ``$ne``/``$nin`` (which a missing field passes) must hold on both."""
    head, *rest = name.split(".")
    nested = condition
    for part in reversed(rest):
        nested = {"$fields": {part: nested}}
    negative = set(condition) <= {"$ne", "$nin"}
    return {"$and" if negative else "$or": [{name: condition}, {head: nested}]}


def _condition(condition: Any) -> dict[str, Any]:
    """One field's condition as LangGraph's stores read it: a dict with a ``$`` key holds operators
    (any other key of it is an unknown operator), another dict a subset match of the field's dict
    (``$fields``, each of its fields read the same way, nested as deep as given), anything else equality."""
    if not isinstance(condition, Mapping):
        return _finite({"$eq": condition})
    if any(str(key).startswith("$") for key in condition):
        return _finite(condition)
    return {"$fields": {name: _condition(inner) for name, inner in condition.items()}}


def _finite(operators: Mapping[str, Any]) -> dict[str, Any]:
    """``operators`` with their non-finite operands (inf, -inf, NaN: never a stored value, which is JSON) put
    as finite conditions that select the same values, as LangGraph's SqliteStore answers them: below +inf
    (``$lt``/``$lte``) is every number (``$gte`` -max), above -inf every number, beyond them and any
    comparison with NaN nothing (``$in []``), ``$ne`` of one everything (``$nin []``); in a ``$in``/``$nin``
    list one matches nothing. Other operands stay as they are."""
    out = {op: operand for op, operand in operators.items() if not _non_finite(operand)}
    for op in ("$in", "$nin"):
        if isinstance(out.get(op), (list, tuple)):
            out[op] = [value for value in out[op] if not _non_finite(value)]
    for op, operand in operators.items():
        if not _non_finite(operand) or op == "$ne":  # $ne inf/NaN: every value, so no condition of its own
            continue
        if (op in ("$lt", "$lte") and operand > 0) or (op in ("$gt", "$gte") and operand < 0):
            bound = ("$gte", -sys.float_info.max) if operand > 0 else ("$lte", sys.float_info.max)
            out.setdefault(*bound)  # a number; another comparison of the field's says so already
        else:
            return {"$in": []}  # beyond infinity, equal to it or compared with NaN: nothing
    return out or {"$nin": []}


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix/suffix match with ``"*"`` wildcards."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        part = namespace[: len(path)]
    elif condition.match_type == "suffix":
        part = namespace[len(namespace) - len(path) :]
    else:
        raise ValueError(f"MemnetsStore.list_namespaces: unknown match_type {condition.match_type!r}")
    return all(want == "*" or want == got for want, got in zip(path, part))
