"""Every request counted, timed and traced by its route, the worker that answered named in a header.

:class:`RequestMeasure` is a plain ASGI middleware of the app (:func:`memnets.server.app.create_app`).
It was a function under ``@app.middleware("http")``, Starlette's BaseHTTPMiddleware, which runs the
rest of the app in a task of its own and passes the response through memory streams: ~140 us of CPU
per request (measured with a trivial route, under load), spent on every request the server answers.
"""

from __future__ import annotations

import logging
import os
import time

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memnets import tracing
from memnets.httpguard import route_of
from memnets.server import errors
from memnets.server.state import ServerState

ACCESS_LOG = logging.getLogger("uvicorn.access")  # uvicorn's handler and format; the route in place of the path


class RequestMeasure:
    """Counts, times and traces every HTTP request by route (its span the parent of the memory's spans,
    the child of the caller's W3C traceparent), answers an exception no handler took for that request
    only, names the worker (``X-Memnets-Worker``), and with ``access_log`` logs the method, the route
    template and the status (no path values, no query string)."""

    def __init__(self, app: ASGIApp, state: ServerState, access_log: bool) -> None:
        self.app, self.state, self.access_log = app, state, access_log
        self.worker = str(os.getpid()).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = scope["method"]
        status = None

        async def named(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-memnets-worker", self.worker)]
            await send(message)

        with tracing.request_span(method, Headers(scope=scope)) as finish:
            try:
                await self.app(scope, receive, named)
                if status is None:
                    raise RuntimeError("the app returned without an answer")
            except Exception as error:
                if status is not None:  # the answer is under way: nothing else can be sent
                    raise
                await errors.api_error_response(self.state, Request(scope), error)(scope, receive, named)
            path = route_of(scope)
            finish(path, status)
        metrics = self.state.metrics
        metrics.requests.labels(method, path, str(status)).inc()
        metrics.latency.labels(method, path).observe(time.perf_counter() - started)
        if self.access_log:
            client = scope["client"][0] if scope.get("client") else "-"
            version = scope.get("http_version", "1.1")
            ACCESS_LOG.info('%s - "%s %s HTTP/%s" %d', client, method, path, version, status)
