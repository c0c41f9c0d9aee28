"""Search and list filters of the store contract, with their reference semantics.

A :class:`MemoryFilter` narrows the memories a search ranks or a listing returns. Stores apply
it *before* ranking and paging (so a search returns k results whenever k memories match);
:meth:`MemoryFilter.matches` is the one definition of what "match" means, and every store's
query (SQL, a scan of decrypted rows) is tested to agree with it.

- ``kinds``: the memory's kind is one of these.
- ``metadata``: every named field of ``Memory.metadata`` (top-level keys) satisfies its condition:
  a plain value means equality; a dict of operators ``$eq $ne $gt $gte $lt $lte $in`` means all of
  them hold. A missing field fails every condition except ``$ne``. Order comparisons hold only
  between two numbers or two strings; ``True`` equals neither ``1`` nor ``1.0`` (JSON keeps them apart).
- ``since`` / ``until``: ``since <= t < until``; naive datetimes (given or stored) are read as UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from memnets.records import MEMORY_KINDS, Memory
from memnets.timeutil import as_utc

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in")
_ORDER = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
_KEYS = ("kind", "metadata", "since", "until")


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a search or listing considers (all given conditions must hold).

    Build one directly or with :meth:`parse` from a plain mapping. Invalid conditions raise
    ValueError/TypeError naming the field and what was wrong, at construction.
    """

    kinds: tuple[str, ...] | None = None
    metadata: Mapping[str, Any] | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.kinds is not None:
            kinds = (self.kinds,) if isinstance(self.kinds, str) else self.kinds
            if not isinstance(kinds, (tuple, list, set, frozenset)) or not kinds:
                raise ValueError(f"MemoryFilter: kinds must be a kind or a non-empty list of kinds, got {self.kinds!r}")
            unknown = [k for k in kinds if k not in MEMORY_KINDS]
            if unknown:
                raise ValueError(f"MemoryFilter: unknown kinds {unknown!r}; known kinds are {MEMORY_KINDS}")
            object.__setattr__(self, "kinds", tuple(dict.fromkeys(kinds)))
        if self.metadata is not None:
            if not isinstance(self.metadata, Mapping):
                raise TypeError(
                    f"MemoryFilter: metadata must be a mapping of field -> condition, "
                    f"got {type(self.metadata).__name__}"
                )
            conditions = {}
            for name, condition in self.metadata.items():
                if not isinstance(name, str) or not name:
                    raise ValueError(f"MemoryFilter: metadata field names must be non-empty strings, got {name!r}")
                conditions[name] = _check_condition(name, condition)
            object.__setattr__(self, "metadata", MappingProxyType(conditions) if conditions else None)
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, as_utc(value, f"MemoryFilter: {name}"))

    @property
    def needs_payload(self) -> bool:
        """Whether matching needs the memory's metadata (sealed on an encrypted store), not only clear columns."""
        return self.metadata is not None

    def matches(self, memory: Memory) -> bool:
        """Whether ``memory`` passes every condition: the reference semantics all stores follow."""
        if self.kinds is not None and memory.kind not in self.kinds:
            return False
        if self.since is not None or self.until is not None:
            t = as_utc(memory.t)
            if (self.since is not None and t < self.since) or (self.until is not None and t >= self.until):
                return False
        if self.metadata is not None:
            fields = memory.metadata or {}
            for name, condition in self.metadata.items():
                present = name in fields
                value = fields.get(name)
                for op, operand in condition.items():
                    if not _holds(op, present, value, operand):
                        return False
        return True

    @classmethod
    def parse(cls, filters: MemoryFilter | Mapping | None) -> MemoryFilter | None:
        """A MemoryFilter from a filter, a mapping ``{"kind", "metadata", "since", "until"}`` or None.

        ``kind`` is one kind or a list of kinds. An empty mapping (or one whose values are all None)
        means no filter and gives None. Unknown keys raise ValueError naming them.
        """
        if filters is None or isinstance(filters, MemoryFilter):
            return filters
        if not isinstance(filters, Mapping):
            raise TypeError(f"filters must be a MemoryFilter, a mapping or None, got {type(filters).__name__}")
        unknown = [key for key in filters if key not in _KEYS]
        if unknown:
            raise ValueError(f"filters: unknown keys {unknown!r}; allowed keys are {list(_KEYS)}")
        if all(filters.get(key) is None for key in _KEYS):
            return None
        return cls(
            kinds=filters.get("kind"),
            metadata=filters.get("metadata"),
            since=filters.get("since"),
            until=filters.get("until"),
        )


def _check_condition(name: str, condition: Any) -> dict[str, Any]:
    """The operator dict of one metadata condition (a plain value becomes ``{"$eq": value}``)."""
    if not isinstance(condition, Mapping):
        return {"$eq": condition}
    if not condition:
        raise ValueError(
            f"MemoryFilter: metadata condition for {name!r} is an empty dict; give a value or operators {OPERATORS}"
        )
    unknown = [op for op in condition if op not in OPERATORS]
    if unknown:
        raise ValueError(
            f"MemoryFilter: unknown operators {unknown!r} for metadata field {name!r}; allowed: {OPERATORS}"
        )
    for op, operand in condition.items():
        if op in _ORDER and not (_is_number(operand) or isinstance(operand, str)):
            raise ValueError(
                f"MemoryFilter: {op} on metadata field {name!r} needs a number or a string, got {operand!r}"
            )
        if op == "$in":
            if isinstance(operand, (str, bytes)) or not isinstance(operand, (list, tuple, set, frozenset)):
                raise ValueError(
                    f"MemoryFilter: $in on metadata field {name!r} needs a list of values, got {operand!r}"
                )
            condition = {**condition, "$in": tuple(operand)}
    return dict(condition)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans are not numbers, numbers compare by value, the rest by ==."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _holds(op: str, present: bool, value: Any, operand: Any) -> bool:
    if op == "$ne":
        return not present or not _equal(value, operand)
    if not present:
        return False
    if op == "$eq":
        return _equal(value, operand)
    if op == "$in":
        return any(_equal(value, option) for option in operand)
    comparable = (_is_number(value) and _is_number(operand)) or (isinstance(value, str) and isinstance(operand, str))
    return comparable and _ORDER[op](value, operand)
