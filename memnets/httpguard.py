"""The checks in front of every memnets HTTP door (MCP over HTTP, ``memnets serve http``).

One ASGI middleware, :class:`HTTPGuard`, in plain ASGI (no web framework), so that every door
refuses the same requests the same way before its app sees them:

- **Host and Origin** (DNS rebinding): a web page on another site can point its own name at
  127.0.0.1 and have the visitor's browser call a local server; the request then names that site in
  its ``Host`` header (and ``Origin``). The guard accepts only the names the server is reached by,
  worked out from the real bind address: a loopback bind accepts loopback addresses and
  ``localhost``; a wildcard bind (``0.0.0.0``, ``::``) any IP address and ``localhost``; any other
  bind that address or name; plus the names the operator lists (``allowed_hosts``, e.g. the name of
  a reverse proxy). Addresses compare by value (``[0:0:0:0:0:0:0:1]`` is ``[::1]``), names without
  case or a trailing dot. The port is not checked: rebinding needs the attacker's own name, and a
  port mapping (``docker -p 9000:8000``) changes the port a client writes. An ``Origin`` passes when it
  is the server's own (its host one of those names) or one of the origins the operator allows by CORS
  (``cors_origins``, compared as a browser writes an origin); a CORS origin is never a name for
  ``Host``. A foreign ``Host`` gets 421, a foreign or opaque (``null``) ``Origin`` 403.
- **Bearer token**: with a token, every request carries ``Authorization: Bearer <token>``, the scheme
  in any case (RFC 7235), the token compared in constant time; anything else gets 401.
- **Body size**: a body over ``max_body_bytes`` gets 413 with the limit in the message, read at most
  up to the limit (a declared ``Content-Length`` over it is refused before reading).
- **Contained failures**: an exception of the wrapped app, a ``BaseException`` such as pyo3's
  ``PanicException`` included, becomes a 500 for that request (or cuts that response short if it
  had started) and is logged; the server goes on. Cancellation, ``KeyboardInterrupt`` and
  ``SystemExit`` pass through (:func:`is_control_flow`), so a server still stops.

Its log lines name a request by its route template (:func:`route_of`), never by its path.

Lifespan events pass through untouched, so the app starts and stops as without the guard.

Every door parses the JSON a client sent (a body, a query value, an MCP line) with :func:`request_json`,
so that JSON nested past the parser's stack is a malformed request like any other, never a
RecursionError (a 500 with a traceback, or a dead stdio server).
"""

from __future__ import annotations

import asyncio
import builtins
import hmac
import ipaddress
import json
import logging
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from memnets.netutil import is_loopback

logger = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024  # the mcp SDK's own limit on a streamable-HTTP body

# host, or [IPv6 address] (with a zone id), then an optional port; ASCII only (no other digits)
_AUTHORITY = re.compile(
    r"(?:\[(?P<v6>[0-9a-f:.]+(?:%[^\]\s]+)?)\]|(?P<name>[^\s:\[\]/@]+))(?::[0-9]{0,5})?", re.I | re.A
)
_WILDCARDS = (ipaddress.ip_address("0.0.0.0"), ipaddress.ip_address("::"))
_DEFAULT_PORTS = {"http": 80, "https": 443}  # the port an origin of each scheme has when it writes none
_BaseExceptionGroup = getattr(builtins, "BaseExceptionGroup", None)  # Python 3.11+


def is_control_flow(error: BaseException) -> bool:
    """True for what must stop the work rather than become an error reply: cancellation
    (``asyncio.CancelledError``, ``trio.Cancelled``), ``KeyboardInterrupt``, ``SystemExit`` and
    ``GeneratorExit``, also inside an exception group. Anything else, a ``BaseException`` such as
    pyo3's ``PanicException`` (a Rust panic in the tokenizer) included, is one request's failure."""
    if _BaseExceptionGroup is not None and isinstance(error, _BaseExceptionGroup):
        return any(is_control_flow(inner) for inner in error.exceptions)
    trio = sys.modules.get("trio")  # anyio's other backend cancels with trio.Cancelled
    if trio is not None and isinstance(error, trio.Cancelled):
        return True
    return isinstance(error, (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit))


def host_of(authority: str) -> str | None:
    """The host of a ``Host`` header or an origin's ``host[:port]``, normalised for comparison
    (addresses in their canonical form, names in lower case without a trailing dot), or None when it
    is not one."""
    match = _AUTHORITY.fullmatch(authority.strip())
    if match is None:
        return None
    if match["v6"] is not None:
        try:
            return str(ipaddress.IPv6Address(match["v6"]))
        except ValueError:
            return None
    name = match["name"].lower()
    name = name[:-1] if name.endswith(".") and len(name) > 1 else name
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def request_json(raw: str | bytes) -> Any:
    """``raw``, JSON a client sent (a request body, a query value, an MCP message), parsed. ValueError for
    anything that is not JSON, not UTF-8 or nested deeper than the parser's stack allows: Python's
    parser raises RecursionError for the last (~500 levels of ``$and`` in a 9 KB query string), which
    every caller had to remember to catch, and one that did not answered a 500."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested deeper than the parser's stack allows") from None


def route_of(scope) -> str:
    """What a log line names a request by: the route template it matched (``/v1/memories/{id:path}``), or
    ``unmatched`` when none has (yet: the guard's refusals come before routing). Never the path, whose
    values (user names, memory ids) would stay in a log that an erasure cannot reach; the access log,
    the metrics and every warning and error line of a door follow this one rule."""
    return getattr(scope.get("route"), "path", "unmatched")


def check_bind(host: str, token: str | None) -> None:
    """Raise ValueError, saying why, for an HTTP door on a host other machines can reach without a
    token (anything but a loopback address or ``localhost``): its tools read and delete memories."""
    if token is None and not is_loopback(host):
        raise ValueError(
            f"host {host!r} is reachable from other machines and the server reads and deletes every user's "
            "memories: give a bearer token (--token-env VAR) or listen on 127.0.0.1"
        )


def host_names(host: str, allowed_hosts: Iterable[str] = ()) -> set[str]:
    """The bind ``host`` and the ``allowed_hosts``, normalised by :func:`host_of`; ValueError names
    an entry that is not an address or host name."""
    names = set()
    for label, name in [("host", host), *(("allowed host", entry) for entry in allowed_hosts)]:
        normal = None
        if isinstance(name, str):  # a bare address (``::1``, as --host takes it) or a Host-style name
            normal = str(_ip(name.strip())) if _ip(name.strip()) is not None else host_of(name)
        if normal is None:
            raise ValueError(f"{label} {name!r} is not an address or host name")
        names.add(normal)
    return names


def allowed_origins(origins: Iterable[str]) -> list[str]:
    """The origins allowed by CORS (``--cors-origin``), each as a browser writes it in ``Origin``
    (``HTTP://App.Example:80/`` is ``http://app.example``), so that the door guard and the CORS
    middleware compare the same strings. ValueError names an entry that is not one origin
    ``http(s)://host[:port]``, ``*`` included: the guard would pass every web page then."""
    allowed = []
    for origin in origins:
        parts = _origin_parts(origin) if isinstance(origin, str) else None
        if parts is None:
            raise ValueError(
                f"cors origin {origin!r} is not one origin http(s)://host[:port] (list each origin; '*' is not taken)"
            )
        allowed.append(_serialised(*parts))
    return allowed


def plain_error_body(status: int, message: str) -> dict:
    """The guard's own error JSON, ``{"error": message}`` (a server with an error shape of its own passes
    ``error_body`` to :class:`HTTPGuard`)."""
    return {"error": message}


class HTTPGuard:
    """ASGI middleware: Host/Origin validation for the bind ``host``, an optional bearer ``token``, a
    body limit and contained failures, in that order (see the module docstring).

    Args:
        app: the ASGI app to guard.
        host: the address or name the server listens on (the real ``--host`` value).
        token: the bearer token every request must carry, or None for none.
        allowed_hosts: further names (or addresses) clients reach the server by, e.g. a proxy's.
        cors_origins: origins (``https://app.example``) whose requests pass the Origin check besides the
            server's own: the app's CORS origins (:func:`allowed_origins` checks them). Never a ``Host``.
        max_body_bytes: the largest request body accepted.
        error_body: the JSON of a refusal from its status and message (default ``{"error": message}``;
            the REST server passes its documented ``{"error": {"code", "message", ...}}``).
    """

    def __init__(
        self,
        app,
        *,
        host: str,
        token: str | None = None,
        allowed_hosts: Iterable[str] = (),
        cors_origins: Iterable[str] = (),
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        error_body: Callable[[int, str], dict] = plain_error_body,
    ) -> None:
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ValueError("HTTPGuard: token must be a non-empty string or None")
        if not isinstance(max_body_bytes, int) or isinstance(max_body_bytes, bool) or max_body_bytes < 1:
            raise ValueError(f"HTTPGuard: max_body_bytes must be a positive int, got {max_body_bytes!r}")
        self.app = app
        self.token = None if token is None else token.encode()
        self.max_body_bytes = max_body_bytes
        self.error_body = error_body  # (status, message) -> the JSON of a refusal
        self.names = host_names(host, allowed_hosts)
        self.cors_origins = frozenset(allowed_origins(cors_origins))
        bound = next(iter(host_names(host)))
        self.any_ip = _ip(bound) in _WILDCARDS
        self.loopback = is_loopback(bound) or self.any_ip  # a wildcard bind listens on loopback too

    def allows(self, host: str | None) -> bool:
        """Whether a request naming ``host`` (normalised by :func:`host_of`) is for this server."""
        if host is None:
            return False
        if host in self.names or (self.loopback and host == "localhost"):
            return True
        ip = _ip(host)
        return ip is not None and (self.any_ip or (self.loopback and _is_loopback_ip(ip)))

    def allows_origin(self, origin: str) -> bool:
        """Whether a request from ``origin`` (an ``Origin`` value) may reach the app: the server's own (its
        host one :meth:`allows`) or an origin allowed by CORS; ``null`` and anything not an origin never."""
        parts = _origin_parts(origin)
        return parts is not None and (self.allows(parts[1]) or _serialised(*parts) in self.cors_origins)

    def refusal(self, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
        """Why a request with these headers is refused (status, message), or None when it passes
        the Host, Origin and token checks."""
        hosts = _values(headers, b"host")
        if len(hosts) != 1 or not self.allows(host_of(hosts[0])):
            shown = hosts[0] if len(hosts) == 1 else f"{len(hosts)} Host headers"
            return 421, f"misdirected request: Host {shown!r} does not name this server"
        for origin in _values(headers, b"origin"):
            if not self.allows_origin(origin):
                return 403, f"forbidden: requests from origin {origin!r} are refused"
        if self.token is not None:
            given = [value.encode("latin-1") for value in _values(headers, b"authorization")]
            if len(given) != 1 or not _bearer_matches(given[0], self.token):
                return 401, "unauthorized: send Authorization: Bearer <token>"
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refused = self.refusal(list(scope.get("headers") or ()))
        if refused is not None:
            status, message = refused
            logger.warning("refused %s %s: %s", scope["type"], route_of(scope), message)
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
            else:
                await _respond(
                    send, self.error_body, status, message, {401: [(b"www-authenticate", b"Bearer")]}.get(status, [])
                )
            return
        if scope["type"] == "http":
            replay = await self._bounded_body(scope, receive, send)
            if replay is None:
                return
            receive = replay
        await self._contained(scope, receive, send)

    async def _bounded_body(self, scope, receive, send):
        """A receive callable replaying the body, read up to the limit; None after a 413/400 reply."""
        limit = self.max_body_bytes
        declared = _values(list(scope.get("headers") or ()), b"content-length")
        if declared:
            if len(declared) != 1 or not declared[0].isascii() or not declared[0].strip().isdigit():
                await _respond(
                    send, self.error_body, 400, f"bad request: Content-Length {declared!r} is not one byte count"
                )
                return None
            if int(declared[0]) > limit:
                await _respond(send, self.error_body, 413, _too_large(limit))
                return None
        body, messages = bytearray(), []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                messages.append(message)
                break
            body += message.get("body", b"")
            if len(body) > limit:
                await _respond(send, self.error_body, 413, _too_large(limit))
                return None
            if not message.get("more_body", False):
                break
        messages.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

        async def replay():
            return messages.pop(0) if messages else await receive()

        return replay

    async def _contained(self, scope, receive, send) -> None:
        started = False

        async def tracked(message) -> None:
            nonlocal started
            if message["type"] in ("http.response.start", "websocket.accept", "websocket.close"):
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except BaseException as error:
            if is_control_flow(error):
                raise
            logger.error("%s %s failed", scope["type"], route_of(scope), exc_info=error)
            if started:
                return  # the response is cut short; the next request is served as usual
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1011})
            else:
                await _respond(
                    send, self.error_body, 500, f"internal error: {type(error).__name__} (logged by the server)"
                )


def _ip(host: str):
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _is_loopback_ip(ip) -> bool:
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is IPv4 loopback written as IPv6
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _values(headers: list[tuple[bytes, bytes]], name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in headers if key.lower() == name]


def _origin_parts(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin ``http(s)://host[:port]``: the scheme in lower case, the host
    normalised by :func:`host_of`, the port the scheme's default when none is written; None for ``null``
    or anything else (another scheme, a path, a query, user info, a port out of range)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    host = host_of(parts.netloc)
    return None if host is None else (scheme, host, _DEFAULT_PORTS[scheme] if port is None else port)


def _serialised(scheme: str, host: str, port: int) -> str:
    """The origin of :func:`_origin_parts`' parts as a browser writes it: an IPv6 address in brackets, the
    port only when it is not the scheme's default."""
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" if port == _DEFAULT_PORTS[scheme] else f"{scheme}://{shown}:{port}"


def _bearer_matches(value: bytes, token: bytes) -> bool:
    """``value`` is ``<scheme> <credentials>`` with the scheme ``Bearer`` in any case (RFC 7235) and
    the credentials equal to ``token``, compared in constant time."""
    scheme, _, credentials = value.strip().partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.lstrip(b" "), token)


def _too_large(limit: int) -> str:
    return f"request body too large: the limit is {limit} bytes ({limit / 2**20:g} MiB)"


async def _respond(
    send, error_body: Callable[[int, str], dict], status: int, message: str, headers: list[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(error_body(status, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            + list(headers),
        }
    )
    await send({"type": "http.response.body", "body": body})
