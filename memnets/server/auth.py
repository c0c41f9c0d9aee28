"""Who a request is: the admin token, a scoped token (one user, or one scope of a user), or nobody.

- ``admin``: the token of ``--token-env VAR``; reads and changes every user's memories.
- Scoped tokens (``--tokens FILE``): a JSON object ``{"<token>": "<user>"}`` or
  ``{"<token>": {"user": "<user>", "agent": "<agent>", "session": "<session>"}}`` (agent and
  session each optional): the memory API's scopes. Such a token reaches its user's memories only
  (any other user: 403); with an agent and/or a session, only the memories of that agent and/or
  session, for reads and writes alike (another scope's memory: 403; searches and listings see its
  scope only; its writes are filled in with its scope). The server applies it
  (:mod:`memnets.server.app`); :class:`Principal` says what it is.
- Without any token configured the server accepts every request as admin; the server then
  refuses a host other machines can reach (:func:`memnets.httpguard.check_bind`, as ``memnets
  serve mcp`` does).

Tokens are looked up by comparing the SHA-256 of the presented token with the digest of every
configured one, each with :func:`hmac.compare_digest` and without stopping at a match, so the
time taken tells nothing about which tokens exist or how much of one was guessed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path

from memnets.store.filters import SCOPES  # the scopes of a user's memories a token may be narrowed to


@dataclass(frozen=True)
class Principal:
    """What a request may reach: everything (admin), one user, or one scope (agent, session) of a user."""

    admin: bool
    user: str | None = None
    agent: str | None = None
    session: str | None = None

    def may_read(self, user: str) -> bool:
        return self.admin or user == self.user

    @property
    def scope(self) -> dict[str, str]:
        """The scopes this token is narrowed to, ``{"agent": ..., "session": ...}`` (those set; {} for none)."""
        return {name: getattr(self, name) for name in SCOPES if getattr(self, name) is not None}

    def holds(self, memory) -> bool:
        """Whether ``memory`` (of this token's user) lies in its scope."""
        return all(getattr(memory, name) == value for name, value in self.scope.items())

    def describe(self) -> str:
        """``user 'ann', agent 'planner'``: the scope in words, for error messages."""
        if self.admin:
            return "admin"
        return ", ".join([f"user {self.user!r}", *(f"{name} {value!r}" for name, value in self.scope.items())])


ADMIN = Principal(admin=True)


class AuthError(Exception):
    """A request without a valid token (401) or reaching beyond its token's scope (403)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Tokens:
    """The configured tokens and the principal each one stands for."""

    def __init__(self, admin: str | None = None, scoped: dict[str, Principal] | None = None) -> None:
        if admin is not None and (not isinstance(admin, str) or not admin.strip()):
            raise ValueError("Tokens: the admin token must be a non-empty string")
        self._entries: list[tuple[bytes, Principal]] = []
        if admin is not None:
            self._entries.append((_digest(admin), ADMIN))
        for token, principal in (scoped or {}).items():
            if not isinstance(token, str) or not token.strip():
                raise ValueError("Tokens: every scoped token must be a non-empty string")
            self._entries.append((_digest(token), principal))
        digests = [d for d, _ in self._entries]
        if len(set(digests)) != len(digests):
            raise ValueError("Tokens: a token is given twice (the admin token and a scoped one, or in the file)")

    @property
    def required(self) -> bool:
        """Whether requests must carry a token (any token is configured)."""
        return bool(self._entries)

    @classmethod
    def load(cls, admin: str | None, path: str | Path | None) -> Tokens:
        """The admin token and the scoped tokens of the JSON file at ``path`` (see the module docstring)."""
        scoped: dict[str, Principal] = {}
        if path is not None:
            try:
                data = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise ValueError(f"tokens file {path}: cannot read it as JSON: {error}") from None
            if not isinstance(data, dict):
                raise ValueError(
                    f"tokens file {path}: must be a JSON object of token -> user or {{user, agent, session}}"
                )
            for n, (token, scope) in enumerate(data.items()):
                if isinstance(scope, str):
                    scope = {"user": scope}
                if not isinstance(scope, dict) or set(scope) - {"user", *SCOPES} or "user" not in scope:
                    raise ValueError(
                        f"tokens file {path}: entry {n} must map the token to a user or to {{user, agent, session}}, "
                        f"got {scope!r:.80}"
                    )
                for name in ("user", *SCOPES):
                    value = scope.get(name)
                    if (name == "user" or value is not None) and (not isinstance(value, str) or not value.strip()):
                        raise ValueError(f"tokens file {path}: entry {n}: {name} must be a non-empty string")
                scoped[token] = Principal(admin=False, **scope)
        return cls(admin, scoped)

    def principal(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header's value; AuthError(401) without a valid token."""
        if not self.required:
            return ADMIN
        token = bearer_token(authorization)
        if token is None:
            raise AuthError(401, "unauthorized: send Authorization: Bearer <token>")
        given = _digest(token)
        found = None
        for digest, principal in self._entries:  # all of them, no early exit
            if hmac.compare_digest(given, digest):
                found = principal
        if found is None:
            raise AuthError(401, "unauthorized: the bearer token is not valid")
        return found


def bearer_token(authorization: str | None) -> str | None:
    """The token of ``Bearer <token>`` (the scheme case-insensitive, as RFC 9110 says), else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def authorize(principal: Principal, user: str) -> None:
    """AuthError(403) unless ``principal`` may reach ``user``'s memories."""
    if not principal.may_read(user):
        raise AuthError(403, f"forbidden: this token is for user {principal.user!r}, not user {user!r}")


def authorize_memory(principal: Principal, memory, where: str) -> None:
    """AuthError(403) unless ``memory`` (None: nothing to check) lies in ``principal``'s scope."""
    if memory is not None and not principal.holds(memory):
        raise AuthError(
            403, f"forbidden: memory {memory.id!r} is outside this token's scope ({principal.describe()}) ({where})"
        )


def authorize_scope(principal: Principal, given: dict, where: str) -> dict:
    """The scope arguments of a write or a scope deletion, narrowed to ``principal``'s: ``given``
    (agent/session, None where not given) with the token's values filled in; AuthError(403) when a
    given value is another scope than the token's."""
    narrowed = dict(given)
    for name, value in principal.scope.items():
        if given.get(name) is not None and given[name] != value:
            raise AuthError(403, f"forbidden: this token is for {name} {value!r}, not {name} {given[name]!r} ({where})")
        narrowed[name] = value
    return narrowed
