"""``memnets.Client``: AgentMemory's methods over HTTP, so code moves from an embedded memory to a
server by changing one line::

    import memnets

    memory = memnets.open("memories/")                                   # embedded
    memory = memnets.Client("http://127.0.0.1:8000", token="...")        # the same calls, remote

    memory.add("I adopted a beagle named Rex", user="ann")
    hits = memory.search("What is Ann's dog called?", user="ann", k=3)   # [SearchHit(memory, score)]

Every method takes the arguments of its AgentMemory namesake and returns the same types
(:class:`~memnets.records.Memory`, :class:`~memnets.api.SearchHit`, bool, int, lists); keyword
arguments go to the server as they are, so an argument the API gains works through the client too.
Errors come back as the exception the API raised on the server (ValueError, TypeError, KeyError,
InvalidMemoryError), naming the argument; a token without access raises PermissionError; a server
or store that cannot be reached raises :class:`ServerUnavailableError` (a ConnectionError).
What a Client cannot do: ``manager(user)`` (a manager's tiers live in a process; the server runs its
own, see ``/v1/users/{user}/manager``) and passing a Python encoder or store.
"""

from __future__ import annotations

import json as _json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from memnets.api import SearchHit
from memnets.extras import needs_extra
from memnets.memory.ids import check_id
from memnets.memory.intake import check_item
from memnets.memory.messages import MessageOutcome, as_mapping, is_message
from memnets.records import Memory, check_json_value
from memnets.server.wire import filters_to_json, memory_from_json, to_json
from memnets.store.errors import InvalidMemoryError

with needs_extra("memnets.Client", "server"):
    import httpx

DEFAULT_TIMEOUT_S = 60.0


class ServerUnavailableError(ConnectionError):
    """The server, or the store behind it, cannot be reached now (``retry_after``: seconds it suggests)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServerError(RuntimeError):
    """Any other error response of the server (``status``, ``code``)."""

    def __init__(self, message: str, status: int, code: str | None) -> None:
        super().__init__(message)
        self.status, self.code = status, code


_EXCEPTIONS = {"ValueError": ValueError, "TypeError": TypeError, "KeyError": KeyError}


class Client:
    """A memnets server's memory, with AgentMemory's methods.

    Args:
        url: the server's base URL, e.g. ``http://127.0.0.1:8000``.
        token: a bearer token (the admin token, or one scoped to a user).
        timeout: seconds to wait for each response.
        transport: an httpx transport (tests, proxies); default: plain HTTP(S).
    """

    def __init__(
        self, url: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT_S, transport=None
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"Client: url must be an http:// or https:// URL, got {url!r}")
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ValueError("Client: token must be a non-empty string or None")
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self.closed = False

    # ------------------------------------------------------------------ transport
    def _request(self, method: str, path: str, *, json: Any = None, params: dict | None = None) -> dict:
        if self.closed:
            raise RuntimeError("this Client is closed")
        try:
            # ASCII JSON: a lone surrogate in a text travels as its \u escape, and the server's API refuses it
            # naming its position, as the embedded API does (httpx's own encoding would fail here instead)
            content = None if json is None else _json.dumps(json).encode("ascii")
            headers = None if json is None else {"Content-Type": "application/json"}
            response = self._http.request(method, path, content=content, headers=headers, params=params)
        except httpx.TransportError as error:
            raise ServerUnavailableError(f"{method} {self.url}{path}: {type(error).__name__}: {error}") from None
        if response.status_code < 400:
            return response.json()
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            error = response.text[:500]
        if not isinstance(error, dict):  # not a memnets server's error shape (a proxy's page)
            error = {"code": None, "message": str(error), "type": None}
        message, kind = error.get("message") or "", error.get("type")
        if response.status_code in (401, 403):
            raise PermissionError(message)
        if response.status_code == 503:
            retry = response.headers.get("retry-after")
            raise ServerUnavailableError(message, float(retry) if retry and retry.isdigit() else None)
        if kind == "InvalidMemoryError":
            raise InvalidMemoryError(message)
        if kind in _EXCEPTIONS:
            raise _EXCEPTIONS[kind](message)
        raise ServerError(
            f"{response.status_code} {error.get('code')}: {message}", response.status_code, error.get("code")
        )

    @staticmethod
    def _arguments(arguments: dict) -> dict:
        out = {name: value for name, value in arguments.items() if value is not None}
        if isinstance(out.get("metadata"), dict):
            _check_metadata(out["metadata"])
        if "filters" in out:
            out["filters"] = filters_to_json(out["filters"])
        return to_json(out)

    # ------------------------------------------------------------------ writing
    def add(
        self, text_or_record: str | Memory | None = None, *, user: str, messages=None, **arguments
    ) -> Memory | list[MessageOutcome]:
        """AgentMemory.add on the server: one memory of ``user``, durable when this returns; with
        ``messages``, a chat transcript (:meth:`add_messages`)."""
        if messages is not None:
            if text_or_record is not None:
                raise ValueError("add: give either a text (or record) or messages=[...], not both")
            return self.add_messages(messages, user=user, **arguments)
        check_item(text_or_record, "add")
        body = self._arguments({"user": user, **arguments})
        if isinstance(text_or_record, Memory):
            body["record"] = to_json(text_or_record)
        else:
            body["text"] = text_or_record
        return memory_from_json(self._request("POST", "/v1/memories", json=body)["memory"])

    def add_messages(self, messages, *, user: str, **arguments) -> list[MessageOutcome]:
        """AgentMemory.add_messages on the server: a chat transcript, one
        :class:`~memnets.memory.messages.MessageOutcome` per message, in order."""
        body = self._arguments({"user": user, **arguments})
        if isinstance(messages, (list, tuple)):  # LangChain message objects sent as their mappings
            messages = [as_mapping(message) for message in messages]
        body["messages"] = to_json(messages)
        return [_outcome(o) for o in self._request("POST", "/v1/memories", json=body)["outcomes"]]

    def add_many(self, items: Iterable[str | Memory], *, user: str, **arguments) -> list[Memory]:
        """AgentMemory.add_many on the server: one request, one encoder batch; the memories in order."""
        if isinstance(items, (str, Memory)):
            raise TypeError(
                f"add_many: items must be a list of texts or Memory records, not a single {type(items).__name__}"
            )
        items = list(items)
        if any(is_message(item) for item in items):  # messages, as AgentMemory.add_many takes them
            return self.add_messages(items, user=user, **arguments)
        for n, item in enumerate(items):
            check_item(item, f"add_many: items[{n}]")
        body = self._arguments({"user": user, **arguments})
        body["items"] = [to_json(item) if isinstance(item, Memory) else item for item in items]
        return [memory_from_json(m) for m in self._request("POST", "/v1/memories", json=body)["memories"]]

    def update(self, id: str, text: str | None = None, *, user: str, **arguments) -> Memory:
        """AgentMemory.update on the server: a new version; the old one stays in the history."""
        body = self._arguments({"user": user, "text": text, **arguments})
        if "valid_to" in arguments and arguments["valid_to"] is None:
            body["valid_to"] = None  # reopens the memory: None is the value here, not "left out"
        return memory_from_json(self._request("PATCH", f"/v1/memories/{_segment(id, 'id')}", json=body)["memory"])

    # ------------------------------------------------------------------ reading
    def search(self, query: str, *, user: str, k: int = 5, filters=None, **arguments) -> list[SearchHit]:
        """AgentMemory.search on the server: ``[SearchHit(memory, score)]``, best first."""
        body = self._arguments({"user": user, "query": query, "k": k, "filters": filters, **arguments})
        return _hits(self._request("POST", "/v1/search", json=body)["results"])

    def search_explained(self, query: str, *, user: str, k: int = 5, filters=None, **arguments) -> dict:
        """The server's search answer as it is: each hit's memory, score and score parts, the ranker, its weights."""
        body = self._arguments({"user": user, "query": query, "k": k, "filters": filters, **arguments})
        return self._request("POST", "/v1/search", json=body)

    def search_many(
        self, query: str, *, users: Sequence[str], k: int = 5, filters=None, **arguments
    ) -> dict[str, list[SearchHit]]:
        """AgentMemory.search_many on the server: ``{user: hits}``, the query encoded once."""
        if isinstance(users, str) or not isinstance(users, Sequence):
            raise TypeError(f"users must be a list of user ids, got {users!r}")
        body = self._arguments({"users": list(users), "query": query, "k": k, "filters": filters, **arguments})
        found = self._request("POST", "/v1/search", json=body)["by_user"]
        return {user: _hits(found[user]) for user in found}

    def get(self, id: str, *, user: str) -> Memory | None:
        """AgentMemory.get on the server: the memory, or None."""
        try:
            found = self._request("GET", f"/v1/memories/{_segment(id, 'id')}", params={"user": user})
        except KeyError:
            return None
        return memory_from_json(found["memory"])

    def history(self, id: str, *, user: str) -> list[Memory]:
        """AgentMemory.history on the server: every version, oldest first."""
        found = self._request("GET", f"/v1/memories/{_segment(id, 'id')}/history", params={"user": user})
        return [memory_from_json(m) for m in found["memories"]]

    def list_memories(
        self,
        *,
        user: str,
        limit: int | None = 100,
        offset: int = 0,
        filters: Mapping | Any = None,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
    ) -> list[Memory]:
        """AgentMemory.list_memories on the server (``limit=None``: every page, fetched in turn)."""
        params: dict[str, Any] = {"user": user, "offset": offset}
        params.update(to_json({name: value for name, value in (("as_of", as_of), ("known_at", known_at)) if value}))
        if filters is not None:
            params["filters"] = _json.dumps(filters_to_json(filters))
        if limit is not None:
            params["limit"] = limit
            return [memory_from_json(m) for m in self._request("GET", "/v1/memories", params=params)["memories"]]
        out: list[Memory] = []
        params["limit"] = 1000
        while True:
            page = self._request("GET", "/v1/memories", params=params)
            out.extend(memory_from_json(m) for m in page["memories"])
            if page["next_offset"] is None:
                return out
            params["offset"] = page["next_offset"]

    def users(self) -> list[str]:
        """AgentMemory.users on the server (a scoped token sees its own user only)."""
        return self._request("GET", "/v1/users")["users"]

    # ------------------------------------------------------------------ forgetting
    def delete(self, id: str, *, user: str) -> bool:
        """AgentMemory.delete on the server: True if anything held the memory."""
        return bool(self._request("DELETE", f"/v1/memories/{_segment(id, 'id')}", params={"user": user})["deleted"])

    def delete_all(self, *, user: str, agent: str | None = None, session: str | None = None) -> int:
        """AgentMemory.delete_all on the server, of one user (and maybe one agent and/or session of it):
        how many current memories went. (Over HTTP the user is required: a scope of every user at
        once is the embedded API's only.)"""
        params = {"user": user, "agent": agent, "session": session}
        return int(
            self._request("DELETE", "/v1/memories", params={k: v for k, v in params.items() if v is not None})[
                "deleted"
            ]
        )

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the HTTP connections. Safe to call twice."""
        if not self.closed:
            self._http.close()
            self.closed = True

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r}, {'closed' if self.closed else 'open'})"


def _segment(value, name: str) -> str:
    """``value``, an id that passes the id grammar (:mod:`memnets.memory.ids`), as one URL path segment.

    Checked here, before a URL exists: ``quote`` keeps ``"."`` and ``".."``, and the HTTP client
    removes such dot segments, so ``DELETE /v1/memories/.`` would go out as ``DELETE /v1/memories``
    (delete every memory of the user). ``"/"`` is percent-encoded: the server's id routes take it back.
    """
    return quote(check_id(value, name), safe="")


def _outcome(data: dict) -> MessageOutcome:
    """A :class:`MessageOutcome` from its JSON (the server's ``to_json`` of one)."""
    memory = memory_from_json(data["memory"]) if data.get("memory") is not None else None
    return MessageOutcome(data["index"], data["role"], data["outcome"], memory, data.get("reason"))


def _hits(results: list[dict]) -> list[SearchHit]:
    return [SearchHit(memory_from_json(r["memory"]), float(r["score"])) for r in results]


def _check_metadata(metadata: dict) -> None:
    """Refuse, before the request, a metadata the embedded API refuses: nested too deep, not finite, or not
    JSON (a datetime, a set: :func:`~memnets.server.wire.to_json` would have sent them converted, to be stored)."""
    check_json_value(metadata, "metadata")
    try:
        _json.dumps(metadata)
    except (TypeError, ValueError) as error:
        raise InvalidMemoryError(
            f"metadata must be JSON-serialisable valid Unicode ({error})", field="metadata"
        ) from None
