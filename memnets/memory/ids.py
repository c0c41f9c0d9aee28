"""The grammar of memory ids that callers give or name: one check for every door.

Every door (``AgentMemory``'s methods, and through them the REST server, MCP and the LangGraph
store; ``MemoryManager.observe``; :class:`memnets.Client` before it builds a URL) checks an id
with :func:`check_id`, and an id for a new memory also with :func:`check_new_id`. An id is a
``str`` that is

- not empty and at most :data:`MAX_ID_CHARS` characters (an older version's id, ``{id}~{n}``,
  may be :data:`VERSION_ROOM` characters longer);
- not ``"."`` or ``".."``, and with no ``"."`` or ``".."`` between slashes (``"a/./b"``): such
  segments are path steps that an HTTP client or proxy removes, so the request would name
  another resource (``Client.delete(".")`` became ``DELETE /v1/memories``: delete-all);
- free of backslashes (a path separator to browsers and Windows), control characters (Unicode
  category Cc: C0, DEL, C1) and lone surrogates (not valid Unicode: no store can hold them);
- for a new memory, free of :data:`VERSION_SEPARATOR` ``"~"``, which names older versions.

A ``/`` is allowed (LoCoMo's ``conv-26/D1:3``, the manager's ``{user}/{hex}``): the server's id
routes take the rest of the path, and the Client sends it percent-encoded. What is refused is a
ValueError (TypeError for a non-str) naming the argument and the id.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.store.rows import VERSION_SEPARATOR

MAX_ID_CHARS = 512  # far above uuid4 hex (32), LoCoMo's ids and the manager's {user}/{12 hex}
VERSION_ROOM = 21  # "~" and up to 20 digits: the suffix of an older version's id
DOT_SEGMENTS = (".", "..")
SEPARATOR_REFUSED = "\\"
_REFUSED_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # Unicode Cc (C0, DEL, C1) and lone surrogates


def check_id(value, name: str = "id") -> str:
    """``value`` if it is a valid id to name a memory (new, current or an older version); else an error naming ``name``."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(value).__name__}", field=name)
    if not value:
        raise ArgumentValueError(f"{name} must be a non-empty string", field=name)
    if len(value) > MAX_ID_CHARS + VERSION_ROOM:
        raise ArgumentValueError(
            f"{name} has {len(value):,} characters, over the limit of {MAX_ID_CHARS} (memnets.memory.ids)", field=name
        )
    if any(segment in DOT_SEGMENTS for segment in value.split("/")):
        raise ArgumentValueError(
            f"{name} {value!r:.80}: '.' and '..' are not ids, nor segments of one between '/'", field=name
        )
    if SEPARATOR_REFUSED in value:
        raise ArgumentValueError(f"{name} {value!r:.80} contains a backslash, which ids may not contain", field=name)
    refused = _REFUSED_CHARS.search(value)
    if refused is not None:
        raise ArgumentValueError(
            f"{name} {value!r:.80} contains {refused.group()!r} at position {refused.start()}: "
            "ids may not contain control characters or lone surrogates",
            field=name,
        )
    return value


def check_ids(values, name: str = "ids") -> list[str]:
    """``values`` as a list if it is a list (or other sequence, not a str) of valid ids; else an error naming
    ``name`` and, for a bad id, its position."""
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ArgumentTypeError(f"{name} must be a list of memory ids, got {type(values).__name__}", field=name)
    return [check_id(value, f"{name}[{n}]") for n, value in enumerate(values)]


def check_new_id(value, name: str = "id") -> str:
    """:func:`check_id` for the id of a new memory: at most :data:`MAX_ID_CHARS` and no ``"~"``."""
    check_id(value, name)
    if len(value) > MAX_ID_CHARS:
        raise ArgumentValueError(
            f"{name} has {len(value):,} characters, over the limit of {MAX_ID_CHARS} (memnets.memory.ids)", field=name
        )
    if VERSION_SEPARATOR in value:
        raise ArgumentValueError(
            f"{name} {value!r:.80} contains {VERSION_SEPARATOR!r}, reserved for older versions", field=name
        )
    return value
