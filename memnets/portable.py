"""One user's memories as JSON lines and back: the export and import of ``memnets memories``.

A line is one current memory: every field of :class:`~memnets.records.Memory` (times as ISO 8601,
tuples as lists) and ``"versions"``, its older versions oldest first (what ``history(id)`` returns
before it), each without ``id``/``owner``/``superseded_by``. Vectors are not exported: import
encodes the texts with the receiving memory's encoder, so a user moves between memories with
different encoders.

Import goes through the one write path (``AgentMemory.add`` with the record): the oldest version
is written under the line's id, then each later one at its ``updated_at``, so the receiving memory
keeps the history
(versions under ``id~1``, ``id~2``, ...) and ``export`` of it gives the same lines back. Every line
is checked before anything is written.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Iterable, Iterator
from datetime import datetime

import memnets.timeutil as timeutil
from memnets.records import Memory
from memnets.store.rows import VERSION_SEPARATOR

VERSIONS = "versions"
_VERSION_OMITS = ("id", "owner", "superseded_by")  # a version gets them from its line when imported
TRANSIENT = ("outcome",)  # what a write did, not part of the memory: never exported


def _datetime_fields() -> frozenset[str]:
    hints = typing.get_type_hints(Memory)
    return frozenset(name for name, hint in hints.items() if datetime in (hint, *typing.get_args(hint)))


def memory_to_json(memory: Memory) -> dict:
    """Every field of a memory as JSON values (datetimes as ISO 8601, tuples as lists)."""
    out = {}
    for field in dataclasses.fields(Memory):
        if field.name in TRANSIENT:
            continue
        value = getattr(memory, field.name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, tuple):
            value = list(value)
        out[field.name] = value
    return out


def memory_from_json(record: dict, *, owner: str, id: str | None = None, where: str = "record") -> Memory:
    """The Memory of a :func:`memory_to_json` dict, owned by ``owner`` (and with ``id`` when given).

    Raises ValueError naming ``where`` and the field for an unknown field, a missing one or a bad value.
    """
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    names = {field.name for field in dataclasses.fields(Memory)} - set(TRANSIENT)
    unknown = sorted(set(record) - names - {VERSIONS})
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}; a memory has {sorted(names)}")
    values = {name: value for name, value in record.items() if name in names}
    values["owner"] = owner
    if id is not None:
        values["id"] = id
    for name in _datetime_fields() & set(values):
        if isinstance(values[name], str):
            try:
                values[name] = timeutil.as_utc(values[name], name)
            except ValueError as error:
                raise ValueError(f"{where}: {str(error).split(' (like')[0]}") from None
    for name in ("id", "t", "content"):
        if values.get(name) is None:
            raise ValueError(f"{where}: the field {name!r} is missing")
    if not isinstance(values["content"], str):  # a memory's text; a number or a list would fail deep in the encoder
        raise ValueError(f"{where}: content must be a string (the memory's text), got {values['content']!r:.60}")
    try:
        return Memory(**values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None


def export_lines(memory, user: str) -> Iterator[str]:
    """JSON lines of every current memory of ``user`` (oldest first), each with its older versions.

    All of it comes from one snapshot: the store's ``export`` (every row of the user, read at once), so
    deletes and adds running meanwhile neither skip a memory nor repeat one; each memory current
    when the export starts is written once, with the history it had then. (The listing paged by
    offset did both, and ``import`` then refused the file.) The user's rows are held in memory
    while the lines are written.
    """
    rows = memory.store.export(user)
    now = timeutil.now()
    older: dict[str, list[Memory]] = {}
    for row in rows:
        if row.superseded_by is not None:
            older.setdefault(row.superseded_by, []).append(row)
    for current in rows:  # by (t, id), as list_memories
        if current.superseded_by is not None or current.expired(now):
            continue
        line = memory_to_json(current)
        line[VERSIONS] = [
            {k: v for k, v in memory_to_json(version).items() if k not in _VERSION_OMITS}
            for version in _history(current.id, older)
            if not version.expired(now)
        ]
        yield json.dumps(line, ensure_ascii=False, sort_keys=True)


def _history(memory_id: str, older: dict[str, list[Memory]], seen: frozenset[str] = frozenset()) -> list[Memory]:
    """The older versions of ``memory_id`` among ``older`` (rows by the id that superseded them), oldest
    first, as ``AgentMemory.history`` lists them: a memory it replaced (``add(replaces=...)``, written
    before any version), after that one's own history, then its versions ``{id}~n`` by n (their
    write order). ``seen``: the ids on the way here, so that a cycle of replacements ends."""

    def write_order(version: Memory) -> tuple:
        prefix, _, n = version.id.rpartition(VERSION_SEPARATOR)
        numbered = prefix == memory_id and n.isdigit()
        return (numbered, int(n) if numbered else 0, version.t, version.id)

    out: list[Memory] = []
    for version in sorted(older.get(memory_id, []), key=write_order):
        replaced = not version.id.startswith(f"{memory_id}{VERSION_SEPARATOR}")
        if replaced and version.id not in seen:
            out.extend(_history(version.id, older, seen | {memory_id}))
        out.append(version)
    return out


def parse_lines(lines: Iterable[str], user: str, source: str = "input") -> list[list[Memory]]:
    """Each line's versions, oldest first, ending with the current memory, all owned by ``user``.

    Raises ValueError naming ``source`` and the line for a line that is not a memory.
    """
    parsed, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not JSON ({error.msg})") from None
        current = memory_from_json(record, owner=user, where=where)
        if current.superseded_by is not None:
            raise ValueError(f"{where}: superseded_by is set: a line is a current memory, older ones go in versions")
        if current.id in seen:
            raise ValueError(f"{where}: id {current.id!r} appears on an earlier line")
        seen.add(current.id)
        versions = record.get(VERSIONS) or []
        if not isinstance(versions, list):
            raise ValueError(f"{where}: {VERSIONS} must be a list of older versions")
        older = [
            memory_from_json({**version, "id": current.id}, owner=user, where=f"{where} {VERSIONS}[{n}]")
            for n, version in enumerate(versions)
        ]
        parsed.append([*older, current])
    return parsed


def import_memories(memory, user: str, memories: list[list[Memory]]) -> tuple[int, int]:
    """Write what :func:`parse_lines` returned; returns (memories, older versions) written.

    A line whose id the user already has becomes newer versions of that memory (nothing is lost).
    """
    longest = max((len(chain) for chain in memories), default=0)
    for position in range(longest):  # each round one encoder batch; a chain's versions stay in order
        # a later version is written at its updated_at (the write path keeps the first one's t)
        batch = [chain[position] for chain in memories if position < len(chain)]
        if position:
            batch = [version.replace(t=version.updated_at or version.t) for version in batch]
        memory.add_many(batch, user=user)
    return len(memories), sum(len(chain) - 1 for chain in memories)
