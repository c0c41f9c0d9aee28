"""The server's JSON: memories and results to JSON and back, request values to API arguments, errors.

One definition shared by the server (:mod:`memnets.server.app`) and :class:`memnets.Client`, so
that a memory crosses the wire and comes back equal. Datetimes travel as ISO 8601 strings (aware,
UTC); tuples as lists; a :class:`~memnets.store.MemoryFilter` as the mapping ``MemoryFilter.parse``
reads. Any dataclass result of the API (a memory, an add outcome) becomes an object of its fields.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from memnets.records import Memory
from memnets.store.filters import MAX_FILTER_DEPTH, MemoryFilter
from memnets.timeutil import as_utc

TIME_ARGUMENTS = (  # ISO strings on the wire
    *("t", "since", "until", "now", "expires_at", "created_at", "updated_at"),
    *("valid_from", "valid_to", "as_of", "known_at"),
)


_PLAIN = frozenset({str, int, float, bool, type(None)})  # JSON values as they are (exact types: not enums)


def to_json(value: Any) -> Any:
    """A JSON-ready copy of an API value: dataclasses by field, datetimes ISO, tuples and sets as lists."""
    if type(value) in _PLAIN:  # most values of a response: answered before the checks below
        return value
    convert = _converter(type(value))
    if convert is not None:
        return convert(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    if hasattr(value, "value") and type(value).__module__.startswith("memnets"):  # enums of memnets
        return value.value
    return value


@functools.cache
def _converter(cls: type) -> Callable[[Any], Any] | None:
    """How :func:`to_json` converts a value of type ``cls`` when the type alone decides (dataclasses,
    NamedTuples, datetimes, mappings, sequences), or None: chosen once per type, not by the chain of
    checks for every value (a search's answer holds ~100 values: 238 -> 128 us for 5 hits)."""
    if dataclasses.is_dataclass(cls):
        names = tuple(f.name for f in dataclasses.fields(cls))
        return lambda value: {name: to_json(getattr(value, name)) for name in names}
    if hasattr(cls, "_asdict"):  # NamedTuple (SearchHit)
        return lambda value: {name: to_json(item) for name, item in value._asdict().items()}
    if issubclass(cls, datetime):
        return lambda value: as_utc(value, "datetime").isoformat()
    if issubclass(cls, Mapping):
        return lambda value: {str(k): to_json(v) for k, v in value.items()}
    if issubclass(cls, (list, tuple, set, frozenset)):
        return lambda value: [to_json(v) for v in value]
    return None


def _time_fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if "datetime" in str(f.type)}


def memory_from_json(data: Mapping, where: str = "memory") -> Memory:
    """A :class:`Memory` from :func:`to_json`'s object of one (fields it does not know are refused)."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{where} must be an object of Memory fields, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(Memory)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown Memory fields {unknown}; known: {sorted(known)}")
    values = dict(data)
    for name in _time_fields(Memory) & set(values):
        values[name] = parse_time(values[name], f"{where}.{name}")
    for name in ("links", "objects"):
        if isinstance(values.get(name), list):
            values[name] = tuple(values[name])
    return Memory(**values)


def parse_time(value: Any, name: str) -> datetime | None:
    """``value`` (None, or a time as :func:`memnets.timeutil.as_utc` reads one: on the wire an ISO 8601 string)
    as an aware UTC datetime; an error naming ``name`` else."""
    return None if value is None else as_utc(value, name)


_FILTER_KEYS = {"kinds": "kind", "all_of": "$and", "any_of": "$or"}  # MemoryFilter field -> its mapping key


def filters_to_json(filters: Any) -> Any:
    """The JSON form of a search/list ``filters`` argument (a MemoryFilter, a mapping or None): the
    mapping ``MemoryFilter.parse`` reads, with the conditions that are set only."""
    if isinstance(filters, MemoryFilter):
        out = {}
        for f in dataclasses.fields(filters):
            value = getattr(filters, f.name)
            if value is None or value == ():
                continue
            if f.name in ("all_of", "any_of"):
                value = [filters_to_json(inner) for inner in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            out[_FILTER_KEYS.get(f.name, f.name)] = to_json(value)
        return out
    if isinstance(filters, Mapping):
        return {
            key: filters_to_json(value) if isinstance(value, MemoryFilter) else to_json(value)
            for key, value in filters.items()
        }
    return to_json(filters)


def filters_from_json(filters: Any, depth: int = 1) -> Any:
    """A ``filters`` argument from its JSON form: the time bounds back to datetimes, the rest as given.

    ``$and``/``$or`` are walked :data:`~memnets.store.filters.MAX_FILTER_DEPTH` levels down at most
    (``depth`` is this filter's); deeper ones are passed as they are, for the API to refuse naming the
    bound. A request's filter as deep as the JSON parser allows (~480 levels) overflowed the stack here,
    a 500."""
    if not isinstance(filters, Mapping) or depth > MAX_FILTER_DEPTH:
        return filters  # the API names what is wrong with it
    out = dict(filters)
    for name in ("since", "until", "as_of", "known_at"):
        if isinstance(out.get(name), str):
            out[name] = parse_time(out[name], f"filters.{name}")
    for name in ("$and", "$or"):
        if isinstance(out.get(name), list):
            out[name] = [filters_from_json(inner, depth + 1) for inner in out[name]]
    return out


def arguments_from_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """API keyword arguments from a request's JSON: times parsed, a filter's bounds parsed, a record built."""
    out = dict(values)
    for name in TIME_ARGUMENTS:
        if isinstance(out.get(name), str):
            out[name] = parse_time(out[name], name)
    if "filters" in out:
        out["filters"] = filters_from_json(out["filters"])
    return out


# ---------------------------------------------------------------- errors
ERROR_STATUS = {
    "invalid_argument": 422,  # ValueError of the API (a value out of range, an unknown filter field)
    "invalid_type": 422,  # TypeError of the API (a wrong type)
    "invalid_memory": 422,  # InvalidMemoryError of the store (empty text, a NaN vector, bad Unicode)
    "malformed_request": 400,  # not JSON, or not the request's shape
    "not_found": 404,
    "unauthorized": 401,
    "forbidden": 403,
    "too_large": 413,
    "misdirected": 421,  # the Host header names another server (DNS rebinding)
    "conflict": 409,  # the store refuses: another format, dim or encoder
    "unavailable": 503,  # the store cannot be reached (retry after Retry-After seconds)
    "not_ready": 503,
    "insufficient_storage": 507,  # the store's disk is full (SQLite's SQLITE_FULL, ENOSPC): nothing of the call stored
    "internal": 500,
}


GUARD_CODES = {400: "malformed_request", 401: "unauthorized", 403: "forbidden", 413: "too_large", 421: "misdirected"}


def guard_error_body(status: int, message: str) -> dict:
    """:func:`error_body` of a refusal of the HTTP door guard (body limit, Host, Origin, a failure),
    so that every REST error has one shape."""
    return error_body(GUARD_CODES.get(status, "internal"), message)


def error_body(code: str, message: str, field: str | None = None, kind: str | None = None) -> dict:
    """The JSON of an error response: ``{"error": {"code", "message", "field", "type"}}``.

    ``type`` is the Python exception class the API raised (ValueError, TypeError, KeyError, ...),
    so that :class:`memnets.Client` raises the same one.
    """
    return {"error": {"code": code, "message": message, "field": field, "type": kind}}
