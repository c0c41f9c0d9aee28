"""The memory API's checks of its own arguments: users and scopes, search's k, a listing's limit and offset.

Each raises TypeError (a wrong type) or ValueError (a bad value) naming the argument, before anything
is read or written; the ranges are far above any real call and inside what the stores take (FAISS's
and SQL's 64-bit integers, a pack's ``fetch_factor * k`` candidates), so hostile numbers are a clear
error at every door instead of an OverflowError deep in a store.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.records import Memory

MAX_K = 10_000  # search results per call
MAX_COUNT = 10**12  # a listing's limit or offset (10**20 overflowed the stores' 64-bit SQL integers)


def check_user(user) -> None:
    """A user id: a non-empty str (whitespace alone is not a name)."""
    if not isinstance(user, str):
        raise ArgumentTypeError(f"user must be a str, got {type(user).__name__}", field="user")
    if not user.strip():
        raise ArgumentValueError(f"user must be a non-empty string, got {user!r}", field="user")


def check_users(users) -> None:
    """A list of user ids (a str is refused: it would be read as its letters)."""
    if isinstance(users, str) or not isinstance(users, Sequence):
        raise ArgumentTypeError(f"users must be a list of user ids, got {users!r}", field="users")
    for user in users:
        check_user(user)


def check_scope(value, name: str) -> None:
    """A user, agent or session named as a scope to delete: a non-empty str."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(value).__name__}", field=name)
    if not value:
        raise ArgumentValueError(f"{name} must be a non-empty string", field=name)


def check_k(k) -> None:
    """The number of search results: an int in [1, MAX_K]."""
    if not isinstance(k, int) or isinstance(k, bool):
        raise ArgumentTypeError(f"k must be an int, got {type(k).__name__}", field="k")
    if not 1 <= k <= MAX_K:
        raise ArgumentValueError(f"k must lie in [1, {MAX_K:,}], got {k}", field="k")


def check_count(value, name: str) -> None:
    """A listing's limit or offset: an int in [0, MAX_COUNT] (10**20 overflowed the stores' 64-bit SQL integers)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        raise ArgumentValueError(f"{name} must be an int in [0, {MAX_COUNT:,}], got {value!r:.40}", field=name)


def check_items(items) -> list:
    """``add_many``'s items as a list (a single text or record is refused: it is not a list of them)."""
    if isinstance(items, (str, Memory)):
        raise ArgumentTypeError(
            f"add_many: items must be a list of texts or Memory records, not a single {type(items).__name__}",
            field="items",
        )
    return list(items)


def aligned_ids(items: list, ids) -> list:
    """``add_many``'s ids, one per item (None: each gets a new id); a Memory record brings its own."""
    if ids is None:
        return [None] * len(items)
    if isinstance(ids, str) or len(ids := list(ids)) != len(items):
        raise ArgumentValueError(
            f"add_many: ids must be a list with one entry (an id or None) per item, got {ids!r:.60}", field="ids"
        )
    for n, (item, memory_id) in enumerate(zip(items, ids)):
        if memory_id is not None and isinstance(item, Memory):
            raise ArgumentValueError(f"add_many: ids[{n}] given for a Memory record, which has its own id", field="ids")
    return ids


def check_unrepeated(ids: Iterable[str]) -> None:
    """ValueError when an id comes twice within one ``add_many`` call."""
    repeated = sorted(i for i, count in Counter(ids).items() if count > 1)
    if repeated:
        raise ArgumentValueError(f"add_many: ids repeated within the call: {repeated[:5]}", field="ids")


def check_vector(vector, dim: int) -> np.ndarray:
    """A query vector given instead of a text: ``dim`` finite numbers, as float32."""
    vector = np.asarray(vector, dtype=np.float32).reshape(-1)
    if vector.shape != (dim,) or not np.isfinite(vector).all():
        raise ArgumentValueError(f"vector must be {dim} finite numbers, got shape {vector.shape}", field="vector")
    return vector


__all__ = [
    "MAX_COUNT",
    "MAX_K",
    "aligned_ids",
    "check_count",
    "check_items",
    "check_k",
    "check_scope",
    "check_unrepeated",
    "check_user",
    "check_users",
    "check_vector",
]


class Keep:
    """The default of an ``update`` keyword for which None means something (no TTL, an open validity):
    leave the memory's value as it is. Each such keyword has its one instance (``KEEP_TTL``, ``KEEP``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name
