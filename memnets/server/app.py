"""The REST app: the memory API under ``/v1``, health, metrics, the offline API docs and the inspector.

:func:`create_app` builds a FastAPI app over one :class:`~memnets.api.AgentMemory`, opened in a
background thread by ``opener`` (so ``/healthz`` answers at once and ``/readyz`` once the encoder is
loaded and the store answers), and includes the routers of :mod:`memnets.server.routes`, one per
resource. Who calls is a dependency of every route (:mod:`memnets.server.caller`); what the app
holds is :class:`~memnets.server.state.ServerState`; errors become JSON by
:mod:`memnets.server.errors`; every request is counted, timed and traced by
:class:`~memnets.server.measure.RequestMeasure`; search and add requests of the plain case are served
past FastAPI's request plumbing by :class:`~memnets.server.hot.HotRoutes`. The encoder is wrapped in a
:class:`~memnets.server.batching.BatchingEncoder` before the memory is opened with it, so
concurrent requests share forward passes (with ``batching=False`` it encodes every call alone).

The body limit, Host/Origin checks and the containment of failures outside the app are
:class:`memnets.httpguard.HTTPGuard`'s, in front of this app (:func:`memnets.server.run.build_app`).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from fastapi import FastAPI

from memnets.server import errors
from memnets.server.auth import Tokens
from memnets.server.hot import HotRoutes
from memnets.server.measure import RequestMeasure
from memnets.server.routes import ROUTERS, ui
from memnets.server.routes.bodies import add_schemas
from memnets.server.state import ServerError, ServerState


def create_app(
    opener: Callable[[Callable], Any],
    *,
    tokens: Tokens | None = None,
    batching: bool = True,
    max_wait_s: float = 0.005,
    cors_origins: list[str] | None = None,
    pack=None,
    access_log: bool = False,
) -> FastAPI:
    """The REST app over the memory ``opener(wrap)`` returns (called once, in a background thread at startup).

    Args:
        opener: called with ``wrap``, returns an open AgentMemory whose encoder is ``wrap(encoder)``
            (e.g. ``lambda wrap: memnets.open(location, encoder=wrap(load_encoder()))``); the app
            closes it at shutdown.
        tokens: who may call (default: nobody needs a token; bind to loopback then).
        batching: the encoder ``wrap`` gives batches concurrent calls (False: one forward pass per call).
        max_wait_s: the batching window.
        cors_origins: origins allowed by CORS (default: none, CORS off).
        pack: the pack (a folder or a loaded Pack), whose manifest /v1/pack answers and the inspector
            plots; the manifest is read once, when the memory opens.
        access_log: log each request as its method, route template and status (no path values, no
            query string: no user names, ids or filter values) on uvicorn's access logger.
    """
    state = ServerState(opener, tokens or Tokens(), batching=batching, max_wait_s=max_wait_s, pack=pack)

    async def lifespan(app):
        thread = threading.Thread(target=state.load, name="memnets-open", daemon=True)
        thread.start()
        yield
        await anyio.to_thread.run_sync(thread.join)
        await anyio.to_thread.run_sync(state.close)

    app = FastAPI(
        title="memnets",
        version="1",
        description="The memnets memory API over HTTP: add, search (with each hit's score parts), get, update, "
        "history, delete, list, users; the manager's tiers and recall gate; health and metrics.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        **_without_native_telemetry(),
    )
    app.state.memnets = state
    app.add_middleware(HotRoutes)  # added first: the innermost, inside CORS and RequestMeasure
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware, allow_origins=cors_origins, allow_methods=["*"], allow_headers=["Authorization", "*"]
        )

    app.add_middleware(RequestMeasure, state=state, access_log=access_log)
    errors.install(app, state)
    for router in ROUTERS:
        app.include_router(router)
    ui.mount_inspector(app)
    app.openapi = partial(_openapi, app)
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's OpenAPI document of ``app`` with the routes' typed bodies in its components
    (:func:`~memnets.server.routes.bodies.add_schemas`), made once."""
    if app.openapi_schema is None:
        add_schemas(FastAPI.openapi(app))
    return app.openapi_schema


def _without_native_telemetry() -> dict:
    """FastAPI's own OpenTelemetry (in releases that have it: the ``telemetry`` argument) turned off:
    its request span holds ``url.path`` and ``url.query`` (memory ids, user names) and its logs hold
    invalid input. The app's request span (:func:`memnets.tracing.request_span`) names the route only."""
    if "telemetry" not in inspect.signature(FastAPI).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}}


__all__ = ["ServerError", "ServerState", "create_app"]
