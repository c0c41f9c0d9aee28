"""The REST app: the memory API under ``/v1``, health, metrics, the offline API docs and the inspector.

:func:`create_app` builds a FastAPI app over one :class:`~memnets.api.AgentMemory` (opened in a
background thread by ``opener``, so ``/healthz`` answers at once and ``/readyz`` once the encoder is
loaded and the store answers). Every route is a thin translation of one AgentMemory call: the
request's JSON fields are the call's keyword arguments (times as ISO 8601 strings), so an
argument the API gains reaches it without a change here, and the API's own validation names what
is wrong. Memory calls run in worker threads (the event loop never waits on the model or the
database); the encoder is wrapped in a :class:`~memnets.server.batching.BatchingEncoder` so
concurrent requests share forward passes (with ``batching=False`` it encodes every call alone) and
a search's score breakdown reuses the query's vector instead of encoding the query again.

Errors are JSON ``{"error": {"code", "message", "field", "type"}}`` (see
:data:`memnets.server.wire.ERROR_STATUS`): the API's ValueError/TypeError are 422, KeyError 404, a
store that cannot be reached 503 with ``Retry-After``, a body that is not JSON 400; an unexpected
failure is a 500 with no internals in it (and logged). The body limit, Host/Origin checks and the
containment of failures outside the app are :class:`memnets.httpguard.HTTPGuard`'s, in front of
this app (:func:`memnets.server.run.build_app`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from importlib import resources
from typing import Any

import anyio
import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.staticfiles import StaticFiles

from memnets.memory.events import Move
from memnets.records import DERIVED_KINDS, Memory
from memnets.scoring import DEFAULT_DECAY, cosine, recency
from memnets.server.auth import AuthError, Principal, Tokens, authorize, authorize_memory, authorize_scope
from memnets.server.batching import BatchingEncoder
from memnets.server.metrics import ServerMetrics
from memnets.server.wire import (
    ERROR_STATUS,
    arguments_from_json,
    error_body,
    field_named,
    filters_from_json,
    memory_from_json,
    to_json,
)
from memnets.store.errors import InvalidMemoryError, StoreError
from memnets.store.filters import MemoryFilter
from memnets.timeutil import now as utc_now

logger = logging.getLogger(__name__)

MAX_BATCH_ITEMS = 10_000  # items of one batch add
RETRY_AFTER_S = 2  # what a 503 tells the client to wait
GATE_DECISIONS_SHOWN = 20
ARGUMENT_NAMES = (  # what an error message may name (the first one it names is the error's field)
    "user",
    "users",
    "text",
    "record",
    "items",
    "ids",
    "query",
    "k",
    "filters",
    "limit",
    "offset",
    "metadata",
    "t",
    "kind",
    "id",
    "importance",
    "agent",
    "action",
    "objects",
    "location",
    "replaces",
    "since",
    "until",
)
THREADS = 64  # worker threads for memory calls (the 50-client benchmark keeps them busy)


class ServerError(Exception):
    """An error the server answers with its own code (not one of the API's exceptions)."""

    def __init__(self, code: str, message: str, field: str | None = None, headers: dict | None = None) -> None:
        super().__init__(message)
        self.code, self.field, self.headers = code, field, headers or {}


# ---------------------------------------------------------------- request bodies (extra fields pass through)
class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")

    def arguments(self) -> dict[str, Any]:
        """The fields the client sent, as the API call's keyword arguments (times parsed)."""
        return arguments_from_json(self.model_dump(exclude_unset=True))


class AddBody(_Body):
    """One memory (``text``, or ``record``: a whole Memory object) or a batch (``items``); any other
    field is an argument of ``AgentMemory.add`` / ``add_many`` (t, kind, metadata, id, importance, ...)."""

    user: Any = Field(description="whose memory it is")
    text: Any = Field(None, description="the memory's text (one memory)")
    record: Any = Field(None, description="a Memory record as JSON (one memory, stored as it is)")
    items: Any = Field(None, description="a batch: texts and/or Memory records as JSON")


class SearchBody(_Body):
    """Arguments of ``AgentMemory.search``: user, query, k, filters (kind, metadata operators, since, until);
    or ``users`` (a list) instead of ``user`` for ``search_many``."""

    user: Any = None
    query: Any
    k: Any = 5
    filters: Any = None


class UpdateBody(_Body):
    """Arguments of ``AgentMemory.update``: user, and text and/or metadata (and t)."""

    user: Any


class ObserveBody(_Body):
    """Arguments of ``MemoryManager.observe``: the text as ``text`` and its fields (t, kind, importance, ...)."""

    text: Any


class ContextBody(_Body):
    """Arguments of ``MemoryManager.context_for``: the query, k and now."""

    query: Any


# ---------------------------------------------------------------- state
class ServerState:
    """The memory once it is open, its batching encoder, the managers, tokens and metrics of one app."""

    def __init__(self, opener: Callable[[], Any], tokens: Tokens, *, batching: bool, max_wait_s: float, pack) -> None:
        self.tokens = tokens
        self.metrics = ServerMetrics()
        self.memory = None
        self.load_error: str | None = None
        self.batching = batching
        self.max_wait_s = max_wait_s
        self.pack = pack
        self.managers: dict[str, Any] = {}
        self._managers_lock = threading.Lock()
        self._opener = opener
        self.limiter = anyio.CapacityLimiter(THREADS)

    def load(self) -> None:
        """Open the memory (load the encoder, reach the store); on failure keep the reason for /readyz."""
        try:
            memory = self._opener()
            memory.encoder = BatchingEncoder(
                memory.encoder, max_wait_s=self.max_wait_s, on_batch=self.metrics.batch.observe, batch=self.batching
            )
            self.memory = memory
            logger.info("memnets server: memory open (%r)", memory)
        except Exception as error:  # reported by /readyz and every route
            self.load_error = f"{type(error).__name__}: {error}"
            logger.exception("memnets server: cannot open the memory")

    def require(self):
        if self.memory is None:
            message = self.load_error or "the memory is still loading (the encoder and the store)"
            raise ServerError("not_ready", message, headers={"Retry-After": str(RETRY_AFTER_S)})
        return self.memory

    def manager(self, user: str):
        """This process's manager of ``user`` (tiers in memory, every kept observation written through)."""
        memory = self.require()
        with self._managers_lock:
            manager = self.managers.get(user)
            if manager is None or manager.closed:
                manager = memory.manager(user, state_path=None, resume=False, write_through_threshold=0.0)
                self.managers[user] = manager
            return manager

    def close(self) -> None:
        memory = self.memory
        if memory is None:
            return
        for manager in self.managers.values():
            manager.close()
        memory.close()
        memory.encoder.close()  # the BatchingEncoder of load()


# ---------------------------------------------------------------- errors
def _store_unavailable(error: BaseException) -> bool:
    """Whether ``error`` says the store cannot be reached now (a retry may succeed)."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & {"StoreUnavailableError", "PoolTimeout", "OperationalError", "InterfaceError"}:
        return True
    cause = error.__cause__ or error.__context__
    return cause is not None and cause is not error and _store_unavailable(cause)


def _error_response(state: ServerState, code: str, message: str, field=None, kind=None, headers=None) -> JSONResponse:
    state.metrics.errors.labels(code).inc()
    return JSONResponse(error_body(code, message, field, kind), status_code=ERROR_STATUS[code], headers=headers)


def _classify(error: BaseException, candidates) -> tuple[str, str, str | None]:
    """(code, message, field) of an exception a memory call raised."""
    if _store_unavailable(error):
        return "unavailable", f"the store cannot be reached: {error}", None
    if isinstance(error, InvalidMemoryError):
        return "invalid_memory", str(error), field_named(str(error), candidates)
    if isinstance(error, KeyError):
        message = str(error.args[0]) if error.args else "not found"
        return "not_found", message, field_named(message, candidates)
    if isinstance(error, TypeError):
        return "invalid_type", str(error), field_named(str(error), candidates)
    if isinstance(error, ValueError):
        return "invalid_argument", str(error), field_named(str(error), candidates)
    if isinstance(error, StoreError):
        return "conflict", str(error), None
    return "internal", "internal error (logged by the server)", None


def _api_error_response(state: ServerState, request: Request, error: Exception) -> JSONResponse:
    """The JSON error answer to an exception of a memory call (logged when it is not the caller's fault)."""
    code, message, field = _classify(error, [*ARGUMENT_NAMES, *request.query_params])
    if code == "internal":
        logger.error("memnets server: %s %s failed", request.method, request.url.path, exc_info=error)
    elif code == "unavailable":
        logger.warning("memnets server: %s %s: the store is unavailable: %s", request.method, request.url.path, error)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if code == "unavailable" else None
    kind = None if code in ("internal", "unavailable") else type(error).__name__
    return _error_response(state, code, message, field, kind, headers)


# ---------------------------------------------------------------- the app
def create_app(
    opener: Callable[[], Any],
    *,
    tokens: Tokens | None = None,
    batching: bool = True,
    max_wait_s: float = 0.005,
    cors_origins: list[str] | None = None,
    pack=None,
) -> FastAPI:
    """The REST app over the memory ``opener()`` returns (called once, in a background thread at startup).

    Args:
        opener: returns an open AgentMemory (e.g. ``partial(memnets.open, location, pack=...)``);
            the app closes it at shutdown.
        tokens: who may call (default: nobody needs a token; bind to loopback then).
        batching: wrap the encoder in a BatchingEncoder (False: one forward pass per call).
        max_wait_s: the batching window.
        cors_origins: origins allowed by CORS (default: none, CORS off).
        pack: the pack folder, whose manifest's metrics the inspector plots.
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
    )
    app.state.memnets = state
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware, allow_origins=cors_origins, allow_methods=["*"], allow_headers=["Authorization", "*"]
        )

    async def call(function, *args, **kwargs):
        return await anyio.to_thread.run_sync(partial(function, *args, **kwargs), limiter=state.limiter)

    def principal_of(request: Request) -> Principal:
        return state.tokens.principal(request.headers.get("authorization"))

    def scoped(request: Request, user) -> Principal:
        principal = principal_of(request)
        if isinstance(user, str):  # anything else: the API names the wrong type
            authorize(principal, user)
        elif not principal.admin:
            raise AuthError(403, "forbidden: a scoped token must name its user")
        return principal

    def whole_user(request: Request, user: str, where: str) -> Principal:
        """``scoped``, for routes that span every scope of the user (the manager's tiers hold all its agents')."""
        principal = scoped(request, user)
        if principal.scope:
            raise AuthError(
                403,
                f"forbidden: {where} spans every agent and session of user {user!r}; this token is narrowed to "
                f"{principal.describe()}",
            )
        return principal

    def narrowed(principal: Principal, filters) -> Any:
        """``filters`` and the token's scope, both to hold (``filters`` as given without a scope)."""
        return MemoryFilter.combine(filters, principal.scope) if principal.scope else filters

    async def check_ids(principal: Principal, memory, ids, user: str, where: str) -> None:
        """403 when a memory the request names by id exists outside the token's scope (a narrowed token
        may neither read nor overwrite, replace or delete another agent's or session's memory)."""
        ids = [i for i in ids if isinstance(i, str)]
        if principal.scope and ids:
            for found in await call(memory.store.get, ids, user, include_expired=True):  # an expired id is still held
                authorize_memory(principal, found, where)

    # ------------------------------------------------------------ middleware: size, metrics, worker id
    @app.middleware("http")
    async def measure(request: Request, call_next):
        started = time.perf_counter()
        try:
            response = await call_next(request)
        except Exception as error:  # one no handler took (a driver's own error class): this request only
            response = _api_error_response(state, request, error)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        state.metrics.requests.labels(request.method, path, str(response.status_code)).inc()
        state.metrics.latency.labels(request.method, path).observe(time.perf_counter() - started)
        response.headers["X-Memnets-Worker"] = str(os.getpid())
        return response

    # ------------------------------------------------------------ error handlers
    @app.exception_handler(AuthError)
    async def auth_error(request: Request, error: AuthError):
        code = "unauthorized" if error.status == 401 else "forbidden"
        headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
        return _error_response(
            state, code, str(error), "authorization" if error.status == 401 else "user", "PermissionError", headers
        )

    @app.exception_handler(ServerError)
    async def server_error(request: Request, error: ServerError):
        kind = "KeyError" if error.code == "not_found" else None
        return _error_response(state, error.code, str(error), error.field, kind, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError):
        first = error.errors()[0] if error.errors() else {}
        loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path")]
        field = ".".join(loc) or "body"
        if first.get("type") == "json_invalid":
            field = "body"
        if first.get("type") in ("json_invalid", "model_attributes_type", "dict_type"):
            return _error_response(state, "malformed_request", f"{field}: {first.get('msg', 'not valid JSON')}", field)
        return _error_response(
            state, "invalid_argument", f"{field}: {first.get('msg', 'invalid')}", field, "ValueError"
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        code = {404: "not_found", 405: "malformed_request", 413: "too_large"}.get(
            error.status_code, "malformed_request"
        )
        response = _error_response(state, code, f"{request.method} {request.url.path}: {error.detail}")
        response.status_code = error.status_code
        return response

    async def api_error(request: Request, error: Exception):
        return _api_error_response(state, request, error)

    for handled in (ValueError, TypeError, LookupError, StoreError, RuntimeError, OSError):
        app.add_exception_handler(handled, api_error)  # each class by name: handled inside the middleware stack

    # ------------------------------------------------------------ health, metrics, docs
    @app.get("/healthz", tags=["health"])
    async def healthz():
        """The process answers (it may still be loading: see /readyz)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz():
        """Ready once the memory is open (encoder loaded) and the store answers a query now."""
        memory = state.require()
        try:
            with anyio.fail_after(5):
                await call(memory.store.count, "memnets-readyz")
        except TimeoutError:
            raise ServerError(
                "unavailable", "the store did not answer within 5 s", headers={"Retry-After": "2"}
            ) from None
        return {"status": "ready", "memory": repr(memory), "batching": state.batching}

    @app.get("/metrics", tags=["health"])
    async def metrics(request: Request):
        """Prometheus text format: requests, latencies, errors, gate decisions, encode batch sizes."""
        if not principal_of(request).admin:
            raise AuthError(403, "forbidden: /metrics needs the admin token")
        return Response(state.metrics.render(), media_type=state.metrics.content_type)

    @app.get("/docs", include_in_schema=False)
    async def docs():
        return HTMLResponse(_ui_file("docs.html"))

    # ------------------------------------------------------------ memories
    def write_scope(principal: Principal, arguments: dict, items, where: str) -> None:
        """A narrowed token writes in its scope only: agent/session filled in, records of another refused."""
        if not principal.scope:
            return
        arguments.update(authorize_scope(principal, {name: arguments.get(name) for name in principal.scope}, where))
        for item in items:
            if isinstance(item, Memory) and not principal.holds(item):
                raise AuthError(
                    403, f"forbidden: record {item.id!r} is outside this token's scope ({principal.describe()})"
                )

    @app.post("/v1/memories", tags=["memories"])
    async def add(body: AddBody, request: Request):
        """Add one memory (``text`` or ``record``) or a batch (``items``): AgentMemory.add / add_many."""
        principal = scoped(request, body.user)
        memory = state.require()
        arguments = body.arguments()
        user = arguments.pop("user")
        text, record, items = arguments.pop("text", None), arguments.pop("record", None), arguments.pop("items", None)
        given = [name for name, value in (("text", text), ("record", record), ("items", items)) if value is not None]
        if len(given) != 1:
            raise ServerError(
                "malformed_request", f"give exactly one of text, record, items; got {given or 'none'}", "text"
            )
        if items is not None:
            if not isinstance(items, list):
                raise ServerError("malformed_request", "items must be a list of texts and/or memory records", "items")
            if len(items) > MAX_BATCH_ITEMS:
                raise ServerError(
                    "too_large", f"items: {len(items)} items, at most {MAX_BATCH_ITEMS} per call", "items"
                )
            items = [memory_from_json(i, f"items[{n}]") if isinstance(i, dict) else i for n, i in enumerate(items)]
            write_scope(principal, arguments, items, "items")
            ids = arguments.get("ids")
            named = [i.id for i in items if isinstance(i, Memory)] + (ids if isinstance(ids, list) else [])
            await check_ids(principal, memory, named, user, "add")
            added = await call(memory.add_many, items, user=user, **arguments)
            return {"memories": to_json(added)}
        item = memory_from_json(record, "record") if record is not None else text
        write_scope(principal, arguments, [item], "add")
        named = [item.id if isinstance(item, Memory) else arguments.get("id"), arguments.get("replaces")]
        await check_ids(principal, memory, named, user, "add")
        return {"memory": to_json(await call(memory.add, item, user=user, **arguments))}

    @app.post("/v1/search", tags=["memories"])
    async def search(body: SearchBody, request: Request):
        """AgentMemory.search: the k best memories, each with its score and its parts (relevance, recency,
        importance, the learned score). With ``users`` (a list) instead of ``user``: search_many, the
        query encoded once, ``{"by_user": {user: results}}``."""
        arguments = body.arguments()
        if "users" in arguments:
            users = arguments.pop("users")
            principal = principal_of(request)
            for user in users if isinstance(users, list) else []:
                principal = scoped(request, user)
            if not isinstance(users, list):
                scoped(request, None)
            arguments.pop("user", None)
            arguments["filters"] = narrowed(principal, arguments.get("filters"))
            memory = state.require()
            return await call(_search_many_explained, memory, arguments.pop("query"), users, arguments)
        principal = scoped(request, body.user)
        memory = state.require()
        user, query = arguments.pop("user"), arguments.pop("query")
        arguments["filters"] = narrowed(principal, arguments.get("filters"))
        return await call(_search_explained, memory, query, user, arguments)

    @app.get("/v1/memories", tags=["memories"])
    async def list_memories(request: Request, user: str, limit: int = 100, offset: int = 0, filters: str | None = None):
        """AgentMemory.list_memories: one page, by (t, id); ``filters`` is a JSON object; ``next_offset`` pages on."""
        principal = scoped(request, user)
        memory = state.require()
        parsed = None
        if filters is not None:
            try:
                parsed = filters_from_json(json.loads(filters))
            except json.JSONDecodeError as error:
                raise ServerError("malformed_request", f"filters must be a JSON object: {error}", "filters") from None
        found = await call(
            memory.list_memories, user=user, limit=limit, offset=offset, filters=narrowed(principal, parsed)
        )
        full = limit is not None and len(found) == limit and limit > 0
        return {"memories": to_json(found), "next_offset": offset + len(found) if full else None}

    @app.delete("/v1/memories", tags=["memories"])
    async def delete_all(request: Request, user: str, agent: str | None = None, session: str | None = None):
        """AgentMemory.delete_all: every memory of ``user``, or of its ``agent`` and/or ``session`` (a
        narrowed token: of its own scope); returns how many current ones went."""
        principal = scoped(request, user)
        memory = state.require()
        scope = authorize_scope(principal, {"agent": agent, "session": session}, "delete_all")
        deleted = await call(memory.delete_all, user=user, **scope)
        if scope["agent"] is None and scope["session"] is None:
            manager = state.managers.pop(user, None)
            if manager is not None:
                await call(manager.close)
        return {"deleted": deleted}

    @app.get("/v1/memories/{id:path}/history", tags=["memories"])
    async def history(id: str, request: Request, user: str):
        """AgentMemory.history: every version, oldest first, the current one last."""
        principal = scoped(request, user)
        memory = state.require()
        await check_ids(principal, memory, [id], user, "history")
        return {"memories": to_json(await call(memory.history, id, user=user))}

    @app.get("/v1/memories/{id:path}/derived", tags=["memories"])
    async def derived(id: str, request: Request, user: str):
        """The reflections, summaries and plans that link to memory ``id`` (what deleting it also deletes, first level)."""
        principal = scoped(request, user)
        memory = state.require()
        await check_ids(principal, memory, [id], user, "derived")
        kinds = narrowed(principal, {"kind": list(DERIVED_KINDS)})
        found = await call(memory.list_memories, user=user, limit=None, filters=kinds)
        return {"memories": to_json([m for m in found if id in m.links])}

    @app.get("/v1/memories/{id:path}", tags=["memories"])
    async def get(id: str, request: Request, user: str):
        """AgentMemory.get: one memory (an older version too, by its own id); 404 if ``user`` has none."""
        principal = scoped(request, user)
        found = await call(state.require().get, id, user=user)
        if found is None:
            raise ServerError("not_found", f"id={id!r}: user {user!r} has no memory with this id", "id")
        authorize_memory(principal, found, "get")
        return {"memory": to_json(found)}

    @app.patch("/v1/memories/{id:path}", tags=["memories"])
    async def update(id: str, body: UpdateBody, request: Request):
        """AgentMemory.update: a new version (text and/or metadata); the old one stays in the history."""
        principal = scoped(request, body.user)
        memory = state.require()
        arguments = body.arguments()
        user = arguments.pop("user")
        await check_ids(principal, memory, [id], user, "update")
        return {"memory": to_json(await call(memory.update, id, user=user, **arguments))}

    @app.delete("/v1/memories/{id:path}", tags=["memories"])
    async def delete(id: str, request: Request, user: str):
        """AgentMemory.delete: the memory, its older versions and what was derived from it; ``deleted``: whether anything held it."""
        principal = scoped(request, user)
        memory = state.require()
        await check_ids(principal, memory, [id], user, "delete")
        return {"deleted": await call(memory.delete, id, user=user)}

    @app.get("/v1/users", tags=["users"])
    async def users(request: Request):
        """AgentMemory.users for the admin; a scoped token sees its own user only (if it has memories in its scope)."""
        principal = principal_of(request)
        memory = state.require()
        if principal.admin:
            return {"users": await call(memory.users)}
        mine = await call(memory.list_memories, user=principal.user, limit=1, filters=narrowed(principal, None))
        return {"users": [principal.user] if mine else []}

    @app.get("/v1/whoami", tags=["users"])
    async def whoami(request: Request):
        """What the request's token reaches: ``{"admin", "user", "agent", "session"}`` (the inspector narrows itself to it)."""
        principal = principal_of(request)
        return {
            "admin": principal.admin,
            "user": principal.user,
            "agent": principal.agent,
            "session": principal.session,
        }

    # ------------------------------------------------------------ the manager of a user (this process's)
    @app.post("/v1/users/{user}/observe", tags=["manager"])
    async def observe(user: str, body: ObserveBody, request: Request):
        """MemoryManager.observe: the message enters the user's context; kept ones are written through."""
        whole_user(request, user, "the manager")
        arguments = body.arguments()
        text = arguments.pop("text")
        manager = await call(state.manager, user)
        return {"memory": to_json(await call(manager.observe, text, **arguments))}

    @app.post("/v1/users/{user}/context", tags=["manager"])
    async def context(user: str, body: ContextBody, request: Request):
        """MemoryManager.context_for: the recall gate's verdict, maybe a RECALL, and the memories for the prompt."""
        whole_user(request, user, "the manager")
        arguments = body.arguments()
        manager = await call(state.manager, user)
        view = await call(manager.context_for, arguments.pop("query"), **arguments)
        state.metrics.gate.labels("true" if view.recalled else "false").inc()
        return {
            "recalled": view.recalled,
            "gate_score": to_json(view.gate_score),
            "memories": to_json(list(view.memories)),
            "messages": to_json(list(view.messages)),
        }

    @app.get("/v1/users/{user}/manager", tags=["manager"])
    async def manager_state(user: str, request: Request):
        """What this process's manager of ``user`` holds in each tier, and the recall gate's last decisions."""
        whole_user(request, user, "the manager")
        manager = await call(state.manager, user)
        return await call(_tiers, manager)

    @app.get("/v1/pack", tags=["pack"])
    async def pack_info(request: Request):
        """The pack's manifest (its evaluation metrics, thresholds, training data), or null without a pack."""
        principal_of(request)
        memory = state.require()
        return {
            "pack": _manifest(state.pack),
            "ranker": "learned" if memory.scorer is not None else "cosine",
            "batching": state.batching,
        }

    # ------------------------------------------------------------ the inspector
    app.mount("/ui", StaticFiles(packages=[("memnets.server", "ui")], html=True), name="ui")
    return app


def _search_explained(memory, query, user: str, arguments: dict) -> dict:
    """``memory.search`` and each hit's score parts: relevance (cosine), recency, importance, learned score."""
    hits = memory.search(query, user=user, **arguments)
    return _explain(memory, query, {user: hits}, user)


def _search_many_explained(memory, query, users, arguments: dict) -> dict:
    """``memory.search_many`` with the parts of every hit, ``{"by_user": {user: results}}``."""
    found = memory.search_many(query, users=users, **arguments)
    return {"by_user": {user: _explain(memory, query, found, user)["results"] for user in found}}


def _explain(memory, query, found: dict, user: str) -> dict:
    hits = found[user]
    weights = getattr(memory.scorer, "weights", None)
    out = {
        "results": [],
        "ranker": "learned" if memory.scorer is not None else "cosine",
        "weights": to_json(weights) if weights is not None else None,
    }
    if not hits:
        return out
    encoder = memory.encoder  # the server's BatchingEncoder (ServerState.load), batching or not
    vector = encoder.last_vectors()  # the query's row: the search encoded it last, in this thread
    if vector is None or vector.shape != (1, encoder.dim):  # not expected; correct scores all the same
        vector = np.asarray(encoder.encode([query], kind="query"), dtype=np.float32).reshape(1, encoder.dim)
    memories = [hit.memory for hit in hits]
    relevance = cosine(vector[0], memory.store.vectors([m.id for m in memories], user))
    fresh = recency(memories, utc_now(), getattr(weights, "decay", DEFAULT_DECAY))
    for n, hit in enumerate(hits):
        parts = {
            "relevance": float(relevance[n]),
            "recency": float(fresh[n]),
            "importance": float(hit.memory.importance),
            "learned": float(hit.score) if memory.scorer is not None else None,
        }
        out["results"].append({"memory": to_json(hit.memory), "score": float(hit.score), "parts": parts})
    return out


def _tiers(manager) -> dict:
    gate = manager.events.of(Move.GATE)[-GATE_DECISIONS_SHOWN:]
    return {
        "context": to_json([e.memory for e in manager.context.entries]),
        "working": to_json([e.memory for e in manager.working.entries.values()]),
        "pending": to_json([e.memory for e in manager.pending.values()]),
        "gate": [event.to_json() for event in reversed(gate)],
        "moves": {move.value: manager.events.count(move) for move in Move if manager.events.count(move)},
    }


def _manifest(pack) -> dict | None:
    if pack is None:
        return None
    manifest = getattr(pack, "manifest", None)
    if manifest is None:
        from pathlib import Path

        from memnets.pack import MANIFEST

        manifest = json.loads((Path(pack) / MANIFEST).read_text(encoding="utf-8"))
    return to_json(manifest)


def _ui_file(name: str) -> str:
    return resources.files("memnets.server").joinpath("ui", name).read_text(encoding="utf-8")


__all__ = ["create_app", "ServerState", "ServerError"]
