"""uvicorn's HTTP/1.1 protocol (h11) with the limits a server facing slow or hostile clients needs.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` seconds, but once a
client has sent a single byte nothing bounds how long it may take to finish its request: a client
that sends half a request head and then nothing holds its socket (and a file descriptor) forever,
and about a thousand of them exhaust the common 1,024 descriptor limit, after which the server
accepts nobody. :class:`GuardedH11Protocol` adds, per connection:

- a **header timeout**: the request head (request line and headers) must be in within
  ``header_timeout_s`` of the connection opening or of the previous response;
- a **body timeout**: the body must be in within ``body_timeout_s`` of its head;
- a **connection limit**: at most ``max_connections`` open connections per process; one more
  closes the connection that has waited longest for its request head (a half-sent or idle one),
  so a flood of half-sent requests cannot lock out a client that sends its request at once.

A connection that misses a deadline is closed without an answer. uvicorn's own access line is left
out (it holds the query string: user names, ids, filter values); the app logs the route instead
(:mod:`memnets.server.app`), unless :attr:`ConnectionLimits.full_access_log` asks for uvicorn's.

The limits are set per process with :func:`use_limits` before uvicorn starts (``memnets serve
http`` does it, in every worker).
"""

from __future__ import annotations

import logging
import resource
import time
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)


def default_max_connections() -> int:
    """Half the process's soft file-descriptor limit (512 under the common 1,024), at least 16: the
    other half stays for the store, the model files and the log."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, soft // 2) if soft != resource.RLIM_INFINITY else 4096


@dataclass(frozen=True)
class ConnectionLimits:
    """The deadlines and the connection limit of :class:`GuardedH11Protocol` (0 or None: that one off)."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int | None = None  # None: default_max_connections()
    full_access_log: bool = False  # uvicorn's access line (with the query string) instead of the app's

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 3600:
                raise ValueError(f"{name} must be a number of seconds in 0..3600 (0: no timeout), got {value!r}")
        limit = self.max_connections
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"max_connections must be an int >= 0 (0: no limit), got {limit!r}")


_limits = ConnectionLimits()


def use_limits(limits: ConnectionLimits) -> None:
    """Make ``limits`` those of every connection this process accepts from now on."""
    global _limits
    _limits = limits


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the header and body timeouts and the connection limit of the
    limits in force (:func:`use_limits`); pass it as uvicorn's ``http`` setting."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.limits = _limits
        if not self.limits.full_access_log:
            self.access_log = False
        self._deadline = None
        self._phase: str | None = None  # what the deadline waits for: "head", "body", or None (no deadline)
        self._waiting_since = 0.0  # when this connection began waiting for a request head

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._await_head()
        limit = self.limits.max_connections
        if limit is None:
            limit = default_max_connections()
        if limit and len(self.connections) > limit:
            self._evict()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY and self._phase == "head":
            self._arm("body", self.limits.body_timeout_s)
        elif state is not h11.IDLE and state is not h11.SEND_BODY:
            self._disarm()  # the request is in (or the connection is done): the app has it

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    # ------------------------------------------------------------ deadlines
    def _await_head(self) -> None:
        self._waiting_since = time.monotonic()
        self._arm("head", self.limits.header_timeout_s)

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        if seconds:
            self._deadline = self.loop.call_later(seconds, self._timed_out, phase)

    def _disarm(self) -> None:
        self._phase = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self, phase: str) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            logger.info("memnets server: closed a connection whose request %s was not in on time", phase)
            self.transport.close()

    def _evict(self) -> None:
        """Close the connection that has waited longest for its request head (this new one if none)."""
        waiting = [
            c
            for c in self.connections
            if isinstance(c, GuardedH11Protocol) and c._phase == "head" and not c.transport.is_closing()
        ]  # a closed one stays in the set until the loop delivers its connection_lost
        oldest = min(waiting, key=lambda c: c._waiting_since, default=self)
        oldest._disarm()
        logger.warning(
            "memnets server: %d connections, over the limit: closing the longest waiting", len(self.connections)
        )
        oldest.transport.close()
