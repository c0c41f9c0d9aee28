"""Search and list filters of the store contract, with their reference semantics.

A :class:`MemoryFilter` narrows the memories a search ranks or a listing returns. Stores apply
it *before* ranking and paging (so a search returns k results whenever k memories match);
:meth:`MemoryFilter.matches` is the one definition of what "match" means, and every store's
query (SQL, a scan of decrypted rows) is tested to agree with it.

The mapping form (:meth:`MemoryFilter.parse`), every given part must hold:

- ``kind``: the memory's kind is this one, or one of this list.
- ``since`` / ``until``: ``since <= t < until``; naive datetimes (given or stored) are read as UTC.
- ``agent`` / ``session``: a condition on the memory's scope fields (a plain value means equality;
  a memory without the scope has the value None, so ``{"agent": {"$eq": None}}`` finds unscoped ones).
- ``metadata``: conditions on top-level fields of ``Memory.metadata``, ``{field: condition}``, all
  of which must hold, plus ``"$and": [conditions, ...]`` / ``"$or": [conditions, ...]`` for
  boolean combinations of such mappings.
- ``"$and": [filter, ...]`` / ``"$or": [filter, ...]``: boolean combinations of whole filters
  (mixing scopes, metadata, kinds and times).
- ``as_of`` / ``known_at`` (top level only; they choose *which versions* are read, not a condition
  on one): ``as_of=T`` reads the versions valid at T (``valid_from <= T < valid_to``, older versions
  included), ``known_at=T`` what had been written by T (each memory as its latest version with
  ``updated_at <= T``); both together, the versions valid at ``as_of`` as known at ``known_at``. The
  rule is :func:`memnets.store.as_of.visible`; a store reads them by an exact scan of the user's
  rows, so k results come back whenever k versions match.

A condition is a plain value (equality) or a dict of operators, all of which must hold:

========= ==========================================================================
``$eq``   equal (JSON equality: ``True`` equals neither ``1`` nor ``1.0``)
``$ne``   not equal; a missing field passes
``$gt``   greater than (``$gte``, ``$lt``, ``$lte`` alike); only between two numbers or two strings
``$in``   equal to one of a list of scalars (strings, numbers, booleans, None)
``$nin``  equal to none of a list of scalars; a missing field passes
``$fields`` the field is a dict whose own fields pass these conditions (a mapping like
          ``metadata``'s, nested as deep as needed): ``{"a": {"$fields": {"b": 1}}}`` holds
          for ``{"a": {"b": 1, "c": 2}}``, a subset match (LangGraph's nested-dict filter)
========= ==========================================================================

A missing metadata field fails every condition except ``$ne`` and ``$nin``. Any other key that
starts with ``$``, anywhere (``{"metadata": {"$regex": ...}}``, ``{"$xor": ...}``), is an error
naming it, never a field name that matches nothing; so metadata field names cannot start with ``$``.
Operands are finite JSON (NaN or Infinity is an error, as in metadata).

Cost is bounded, since a store evaluates a filter on every candidate row of the user (while its
other users wait: a ``$in`` of 200,000 values held a store's lock for seconds):

- at most :data:`MAX_FILTER_CLAUSES` clauses in all: each operator of a condition, ``kind``,
  ``since`` and ``until`` count one;
- at most :data:`MAX_FILTER_VALUES` values in one operand (a ``$in``/``$nin`` list's items, a
  list's or dict's values for ``$eq``/``$ne``, counted to the leaves); a ``$in``/``$nin`` list
  holds strings, numbers, booleans or None, matched through a hash set: one lookup per row;
- ``$and``/``$or`` nested at most :data:`MAX_FILTER_DEPTH` deep (whole filters and metadata
  conditions each).

Beyond a bound, building the filter is a ValueError naming the bound (a 4xx at the server).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.records import MEMORY_KINDS, Memory, check_json_value
from memnets.timeutil import as_utc

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$fields")
COMBINATORS = ("$and", "$or")
SCOPES = ("agent", "session")  # scope fields of a memory beside its owner (the user)
_ORDER = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
_LISTS = ("$in", "$nin")
_SCALARS = (str, int, float, bool, type(None))  # what a $in / $nin list holds
TIME_TRAVEL = ("as_of", "known_at")  # which versions a read sees (top level only)
_KEYS = ("kind", "metadata", "since", "until", *SCOPES, *COMBINATORS, *TIME_TRAVEL)
_KNOWN_KEYS = frozenset(_KEYS)
MAX_FILTER_CLAUSES = 128  # conditions of one filter, all nested parts included
MAX_FILTER_VALUES = 1_000  # values of one operand (a $in / $nin list, a list or dict to compare with)
MAX_FILTER_DEPTH = 8  # nesting of $and / $or


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a search or listing considers (all given conditions must hold).

    Build one directly or with :meth:`parse` from a plain mapping (see the module docstring).
    ``all_of``/``any_of`` hold the filters of ``"$and"``/``"$or"``. Invalid conditions raise
    ValueError/TypeError naming the field and what was wrong, at construction.
    """

    kinds: tuple[str, ...] | None = None
    metadata: Mapping[str, Any] | None = None
    since: datetime | None = None
    until: datetime | None = None
    agent: Any = None
    session: Any = None
    all_of: tuple[MemoryFilter, ...] = ()
    any_of: tuple[MemoryFilter, ...] = ()
    as_of: datetime | None = None
    known_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.kinds is not None:
            kinds = (self.kinds,) if isinstance(self.kinds, str) else self.kinds
            if not isinstance(kinds, (tuple, list, set, frozenset)) or not kinds:
                raise ArgumentValueError(
                    f"MemoryFilter: kinds must be a kind or a non-empty list of kinds, got {self.kinds!r}",
                    field="filters",
                )
            unknown = [k for k in kinds if k not in MEMORY_KINDS]
            if unknown:
                raise ArgumentValueError(
                    f"MemoryFilter: unknown kinds {unknown!r}; known kinds are {MEMORY_KINDS}", field="filters"
                )
            object.__setattr__(self, "kinds", tuple(dict.fromkeys(kinds)))
        if self.metadata is not None:
            object.__setattr__(self, "metadata", _check_metadata(self.metadata, "metadata"))
        for name in ("since", "until", *TIME_TRAVEL):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, as_utc(value, f"MemoryFilter: {name}"))
        for name in SCOPES:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, MappingProxyType(_check_condition(value, name)))
        if self.all_of != () or self.any_of != ():  # most filters have no $and / $or: nothing to check
            depth, clauses = self._check_parts()
        else:
            depth, clauses = 1, _own_clauses(self)
        if clauses > MAX_FILTER_CLAUSES:
            raise ArgumentValueError(
                f"MemoryFilter: {clauses} clauses, over the limit of {MAX_FILTER_CLAUSES}", field="filters"
            )
        object.__setattr__(self, "_depth", depth)  # not fields: no part of equality, repr or the JSON form
        object.__setattr__(self, "_clauses", clauses)

    def _check_parts(self) -> tuple[int, int]:
        """Checks ``all_of``/``any_of`` (tuples of filters, no time travel inside, not nested too deep);
        returns this filter's depth and its clauses, the parts' included."""
        for name, word in (("all_of", "$and"), ("any_of", "$or")):
            object.__setattr__(self, name, _check_filters(getattr(self, name), word))
        parts = (*self.all_of, *self.any_of)
        if any(part.time_travel for part in parts):
            raise ArgumentValueError(
                "MemoryFilter: as_of and known_at choose the versions of a whole read; give them at the top level, not inside $and/$or",
                field="filters",
            )
        depth = 1 + max((part._depth for part in parts), default=0)
        if depth > MAX_FILTER_DEPTH:
            raise ArgumentValueError(
                f"MemoryFilter: $and/$or nest {depth} deep, over the limit of {MAX_FILTER_DEPTH}", field="filters"
            )
        return depth, sum(part._clauses for part in parts) + _own_clauses(self)

    @property
    def time_travel(self) -> bool:
        """Whether ``as_of`` or ``known_at`` is set: the read sees versions, not the current memories."""
        return self.as_of is not None or self.known_at is not None

    @property
    def needs_payload(self) -> bool:
        """Whether matching needs the decoded record (metadata and scopes may be sealed), not only clear columns.

        When False, the clear-column conditions (kinds, since, until) are the whole filter and a
        store may evaluate it in SQL alone; when True, a store evaluates those columns in SQL and
        then :meth:`matches` on each decoded row.
        """
        return bool(self.metadata is not None or self.agent is not None or self.session is not None) or bool(
            self.all_of or self.any_of or self.time_travel
        )

    def matches(self, memory: Memory) -> bool:
        """Whether ``memory`` passes every condition: the reference semantics all stores follow.

        ``as_of``/``known_at`` are no condition here: they choose the versions a read ranks
        (:func:`memnets.store.as_of.visible`), before these conditions apply to each.
        """
        if self.kinds is not None and memory.kind not in self.kinds:
            return False
        if self.since is not None or self.until is not None:
            t = as_utc(memory.t)
            if (self.since is not None and t < self.since) or (self.until is not None and t >= self.until):
                return False
        for name in SCOPES:
            condition = getattr(self, name)
            if condition is not None and not _all_hold(condition, True, getattr(memory, name)):
                return False
        if self.metadata is not None and not _metadata_holds(self.metadata, memory.metadata or {}):
            return False
        if not all(part.matches(memory) for part in self.all_of):
            return False
        return not self.any_of or any(part.matches(memory) for part in self.any_of)

    @classmethod
    def parse(cls, filters: MemoryFilter | Mapping | None) -> MemoryFilter | None:
        """A MemoryFilter from a filter, a mapping (keys: see the module docstring) or None.

        ``kind`` is one kind or a list of kinds. An empty mapping (or one whose values are all None)
        means no filter and gives None. Unknown keys (and unknown ``$`` operators) raise ValueError naming them.
        """
        return cls._parse(filters, 1)

    @classmethod
    def _parse(cls, filters: MemoryFilter | Mapping | None, depth: int) -> MemoryFilter | None:
        """:meth:`parse` of a filter ``depth`` levels of ``$and``/``$or`` down (deeper is refused before recursing)."""
        if depth > MAX_FILTER_DEPTH:
            raise ArgumentValueError(f"filters: $and/$or nest over {MAX_FILTER_DEPTH} deep, the limit", field="filters")
        if filters is None or isinstance(filters, MemoryFilter):
            return filters
        if not isinstance(filters, Mapping):
            raise ArgumentTypeError(
                f"filters must be a MemoryFilter, a mapping or None, got {type(filters).__name__}", field="filters"
            )
        if not _KNOWN_KEYS.issuperset(filters):
            _refuse_keys(filters)
        if all(value is None for value in filters.values()):  # every key is known by now
            return None
        return cls(
            kinds=filters.get("kind"),
            metadata=filters.get("metadata"),
            since=filters.get("since"),
            until=filters.get("until"),
            agent=filters.get("agent"),
            session=filters.get("session"),
            all_of=_parse_list(filters.get("$and"), "$and", depth),
            any_of=_parse_list(filters.get("$or"), "$or", depth),
            as_of=filters.get("as_of"),
            known_at=filters.get("known_at"),
        )

    @classmethod
    def combine(cls, *filters: MemoryFilter | Mapping | None) -> MemoryFilter | None:
        """One filter that holds where every given one holds (None: no filter); each is parsed first.

        The first given filter stays at the top level (so a store can still run its kind/time
        conditions in SQL); the others join it as ``all_of``. ``as_of``/``known_at`` stay at the top
        level (ValueError when two filters give different ones).
        """
        parsed = [f for f in map(cls.parse, filters) if f is not None]
        if len(parsed) <= 1:
            return parsed[0] if parsed else None
        travel = {}
        for name in TIME_TRAVEL:
            given = {getattr(f, name) for f in parsed} - {None}
            if len(given) > 1:
                raise ArgumentValueError(f"filters: {name} given twice, as {sorted(given)}", field="filters")
            travel[name] = given.pop() if given else None
        first, *rest = [replace(f, as_of=None, known_at=None) if f.time_travel else f for f in parsed]
        rest = [f for f in rest if f != cls()]
        return cls(
            kinds=first.kinds,
            metadata=first.metadata,
            since=first.since,
            until=first.until,
            agent=first.agent,
            session=first.session,
            all_of=(*first.all_of, *rest),
            any_of=first.any_of,
            **travel,
        )


def _refuse_keys(filters: Mapping) -> None:
    """Raises ValueError naming a filter mapping's unknown ``$`` operators, else its unknown keys."""
    operators = [key for key in filters if isinstance(key, str) and key.startswith("$") and key not in _KNOWN_KEYS]
    if operators:
        raise ArgumentValueError(
            f"filters: unknown operators {operators!r}; the operators of a filter are {COMBINATORS}", field="filters"
        )
    unknown = [key for key in filters if key not in _KNOWN_KEYS]
    raise ArgumentValueError(f"filters: unknown keys {unknown!r}; allowed keys are {list(_KEYS)}", field="filters")


def _parse_list(items: Any, word: str, depth: int) -> tuple[MemoryFilter, ...]:
    """The filters of a ``$and``/``$or`` list of mappings (or MemoryFilters) at ``depth``."""
    if items is None:
        return ()
    return tuple(MemoryFilter._parse(item, depth + 1) or MemoryFilter() for item in _check_list(items, word, "filters"))


def _own_clauses(memory_filter: MemoryFilter) -> int:
    """The clauses of a filter's own conditions (its ``$and``/``$or`` parts not included)."""
    f = memory_filter
    count = (f.kinds is not None) + (f.since is not None) + (f.until is not None)
    count += len(f.agent or ()) + len(f.session or ())
    return count + (_metadata_clauses(f.metadata) if f.metadata is not None else 0)


def _metadata_clauses(conditions: Mapping[str, Any]) -> int:
    return sum(
        sum(_metadata_clauses(part) for part in condition) if name in COMBINATORS else _condition_clauses(condition)
        for name, condition in conditions.items()
    )


def _condition_clauses(condition: Mapping[str, Any]) -> int:
    """One clause per operator, and those of a ``$fields`` operand's conditions."""
    nested = condition.get("$fields")
    return len(condition) + (_metadata_clauses(nested) if nested is not None else 0)


def _check_filters(items: Any, word: str) -> tuple[MemoryFilter, ...]:
    """``all_of``/``any_of`` as a tuple of MemoryFilters."""
    items = tuple(_check_list(items, word, "filters")) if items else ()
    bad = [item for item in items if not isinstance(item, MemoryFilter)]
    if bad:
        raise ArgumentTypeError(
            f"MemoryFilter: {word} takes MemoryFilters (or, in parse, mappings), got {bad[0]!r:.60}", field="filters"
        )
    return items


def _check_list(items: Any, word: str, what: str) -> list:
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, (list, tuple)) or not items:
        raise ArgumentValueError(
            f"MemoryFilter: {word} needs a non-empty list of {what}, got {items!r:.80}", field="filters"
        )
    return list(items)


def _check_metadata(conditions: Any, where: str, depth: int = 1) -> Mapping[str, Any]:
    """The checked, normalised metadata conditions: ``{field: {op: operand}}`` and ``$and``/``$or`` lists of such."""
    if depth > MAX_FILTER_DEPTH:
        raise ArgumentValueError(
            f"MemoryFilter: $and/$or/$fields in {where} nest over {MAX_FILTER_DEPTH} deep, the limit", field="filters"
        )
    if not isinstance(conditions, Mapping):
        raise ArgumentTypeError(
            f"MemoryFilter: {where} must be a mapping of field -> condition, got {type(conditions).__name__}",
            field="filters",
        )
    checked: dict[str, Any] = {}
    for name, condition in conditions.items():
        if not isinstance(name, str) or not name:
            raise ArgumentValueError(
                f"MemoryFilter: {where} field names must be non-empty strings, got {name!r}", field="filters"
            )
        if name in COMBINATORS:
            checked[name] = tuple(
                _check_metadata(part, f"{where} {name}[{n}]", depth + 1)
                for n, part in enumerate(_check_list(condition, f"{where} {name}", "metadata conditions"))
            )
        elif name.startswith("$"):
            raise ArgumentValueError(
                f"MemoryFilter: unknown operator {name!r} in {where}; a metadata mapping takes field names "
                f"and {COMBINATORS}, a field's condition takes {OPERATORS}",
                field="filters",
            )
        else:
            checked[name] = _check_condition(condition, f"{where} field {name!r}", depth)
    return MappingProxyType(checked)


def _check_condition(condition: Any, what: str, depth: int = 1) -> dict[str, Any]:
    """The operator dict of one condition (a plain value becomes ``{"$eq": value}``); ``depth``: how deep
    in ``$and``/``$or``/``$fields`` it stands (a ``$fields`` operand is checked one level deeper)."""
    if not isinstance(condition, Mapping):
        condition = {"$eq": condition}
    if not condition:
        raise ArgumentValueError(
            f"MemoryFilter: the condition for {what} is an empty dict; give a value or operators {OPERATORS}",
            field="filters",
        )
    unknown = [op for op in condition if op not in OPERATORS]
    if unknown:
        raise ArgumentValueError(
            f"MemoryFilter: unknown operators {unknown!r} for {what}; allowed: {OPERATORS} "
            "(to compare with a dict, give {'$eq': {...}})",
            field="filters",
        )
    checked = dict(condition)
    for op, operand in condition.items():
        size = _operand_size(operand)
        if size > MAX_FILTER_VALUES:
            raise ArgumentValueError(
                f"MemoryFilter: {op} on {what} has {size:,} values, over the limit of {MAX_FILTER_VALUES:,}",
                field="filters",
            )
        if op in _ORDER and not (_is_number(operand) or isinstance(operand, str)):
            raise ArgumentValueError(
                f"MemoryFilter: {op} on {what} needs a number or a string, got {operand!r}", field="filters"
            )
        if op in _LISTS:
            if isinstance(operand, (str, bytes, Mapping)) or not isinstance(operand, (list, tuple, set, frozenset)):
                raise ArgumentValueError(
                    f"MemoryFilter: {op} on {what} needs a list of values, got {operand!r:.80}", field="filters"
                )
            not_scalar = [value for value in operand if not isinstance(value, _SCALARS)]
            if not_scalar:
                raise ArgumentValueError(
                    f"MemoryFilter: {op} on {what} takes strings, numbers, booleans and None, got {not_scalar[0]!r:.60}"
                    " (to compare with a list or a dict, give {'$eq': ...})",
                    field="filters",
                )
            checked[op] = _Options(operand)
        if op == "$fields":
            checked[op] = _check_metadata(operand, f"{what} $fields", depth + 1)
        check_json_value(operand, f"MemoryFilter: {op} on {what}")
    return checked


def _operand_size(operand: Any) -> int:
    """How many values an operand holds: 1 for a scalar, a list's or dict's values counted to the leaves
    (what comparing it with a row may cost: ``$eq`` with a 200,000-item list walks it for every row)."""
    size, stack = 0, [operand]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        else:
            size += 1
    return size


class _Options(tuple):
    """The values of a ``$in``/``$nin`` list (a tuple: equal to the list, and its JSON form), plus a
    hash set of them, so that membership under JSON equality (:func:`_equal`) is one lookup per row."""

    def __new__(cls, values) -> _Options:
        options = super().__new__(cls, values)
        options.keys = {_json_key(value) for value in options}
        return options

    def holds(self, value: Any) -> bool:
        """Whether ``value`` equals one of the options (a list or dict value equals none: they are scalars)."""
        return isinstance(value, _SCALARS) and _json_key(value) in self.keys


def _json_key(value: Any) -> tuple:
    """The key under which JSON-equal scalars meet: booleans apart from numbers, ``1`` with ``1.0``."""
    return ("bool" if isinstance(value, bool) else "value", value)


def _metadata_holds(conditions: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    for name, condition in conditions.items():
        if name == "$and":
            if not all(_metadata_holds(part, fields) for part in condition):
                return False
        elif name == "$or":
            if not any(_metadata_holds(part, fields) for part in condition):
                return False
        elif not _all_hold(condition, name in fields, fields.get(name)):
            return False
    return True


def _all_hold(condition: Mapping[str, Any], present: bool, value: Any) -> bool:
    return all(_holds(op, present, value, operand) for op, operand in condition.items())


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
    if op == "$nin":
        return not present or not operand.holds(value)
    if not present:
        return False
    if op == "$eq":
        return _equal(value, operand)
    if op == "$in":
        return operand.holds(value)
    if op == "$fields":
        return isinstance(value, Mapping) and _metadata_holds(operand, value)
    comparable = (_is_number(value) and _is_number(operand)) or (isinstance(value, str) and isinstance(operand, str))
    return comparable and _ORDER[op](value, operand)
