"""The memory API's checks of its own arguments: users and scopes, search's k, a listing's limit and offset.

Each raises TypeError (a wrong type) or ValueError (a bad value) naming the argument, before anything
is read or written; the ranges are far above any real call and inside what the stores take (FAISS's
and SQL's 64-bit integers, a pack's ``fetch_factor * k`` candidates), so hostile numbers are a clear
error at every door instead of an OverflowError deep in a store.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_K = 10_000  # search results per call
MAX_COUNT = 10**12  # a listing's limit or offset (10**20 overflowed the stores' 64-bit SQL integers)


def check_user(user) -> None:
    """A user id: a non-empty str (whitespace alone is not a name)."""
    if not isinstance(user, str):
        raise TypeError(f"user must be a str, got {type(user).__name__}")
    if not user.strip():
        raise ValueError(f"user must be a non-empty string, got {user!r}")


def check_users(users) -> None:
    """A list of user ids (a str is refused: it would be read as its letters)."""
    if isinstance(users, str) or not isinstance(users, Sequence):
        raise TypeError(f"users must be a list of user ids, got {users!r}")
    for user in users:
        check_user(user)


def check_scope(value, name: str) -> None:
    """A user, agent or session named as a scope to delete: a non-empty str."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{name} must be a non-empty string")


def check_k(k) -> None:
    """The number of search results: an int in [1, MAX_K]."""
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must lie in [1, {MAX_K:,}], got {k}")


def check_count(value, name: str) -> None:
    """A listing's limit or offset: an int in [0, MAX_COUNT] (10**20 overflowed the stores' 64-bit SQL integers)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{name} must be an int in [0, {MAX_COUNT:,}], got {value!r:.40}")


__all__ = ["MAX_COUNT", "MAX_K", "check_count", "check_k", "check_scope", "check_user", "check_users"]


class Keep:
    """The default of an ``update`` keyword for which None means something (no TTL, an open validity):
    leave the memory's value as it is. Each such keyword has its one instance (``KEEP_TTL``, ``KEEP``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name
