"""The two routes of every agent turn, ``POST /v1/search`` and ``POST /v1/memories``, served past
FastAPI's request plumbing when the request is the plain case.

FastAPI's own work per request (the route matched among every route, its middleware stack, the body
read through its request handler, the dependencies solved) took ~140 us of CPU per search in process,
as much as the rest of the server's HTTP path (the door guard, the hand-off to a worker thread, the
answer's JSON; docs/history.md, session 7). :class:`HotRoutes`, the innermost middleware of the
app, serves a request of the plain case with the route's own function, body model and caller
dependency: POST to the route's exact path, ``Content-Type: application/json``, a body that is a JSON
object the route's model validates. Anything else (another method, path or content type, a body
that is not JSON or does not validate) goes to the FastAPI app with its body replayed, which answers
it as it always did (its 400/422 error shapes included). An exception of the route is answered by the
app's exception handler for its class (the lookup Starlette makes), so every error keeps its shape;
one no handler takes goes up to :class:`~memnets.server.measure.RequestMeasure` as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memnets.httpguard import request_json
from memnets.server.caller import caller
from memnets.server.routes import memories, search


@dataclass(frozen=True)
class HotRoute:
    """A route served past FastAPI: its APIRoute (the label of its metrics and span), its body model."""

    route: Any
    model: type[BaseModel]


def hot_routes() -> dict[str, HotRoute]:
    """The POST routes :class:`HotRoutes` serves, by path: search and add (their functions take
    ``(body, caller)``)."""
    found = {}
    for module, model in ((search, search.SearchBody), (memories, memories.AddBody)):
        route = next(r for r in module.router.routes if r.path == module.router.prefix and "POST" in r.methods)
        _check_takes_body_and_caller(route)
        found[route.path] = HotRoute(route, model)
    return found


def _check_takes_body_and_caller(route) -> None:
    """Refuse, at the app's start, a hot route that takes more than its body and the caller: a
    dependency or parameter added to it later would be skipped by the hot path, not solved."""
    wants = route.dependant
    extra = wants.query_params + wants.path_params + wants.header_params + wants.cookie_params
    if [d.call for d in wants.dependencies] != [caller] or len(wants.body_params) != 1 or extra:
        raise RuntimeError(f"HotRoutes serves {route.path} as (body, caller) only; it takes more: serve it by FastAPI")


class HotRoutes:
    """Serves :func:`hot_routes` in the plain case, hands every other request to ``app`` (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.routes = hot_routes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = self.routes.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if hot is None or not _json_content(scope):
            await self.app(scope, receive, send)
            return
        raw, receive = await _read_body(receive)
        body = _validated(hot.model, raw)
        if body is None:
            await self.app(scope, receive, send)
            return
        scope.update(route=hot.route, endpoint=hot.route.endpoint, path_params={})
        request = Request(scope, receive)
        try:
            response = await hot.route.endpoint(body, await caller(request))
        except Exception as error:
            handler = _handler(scope["app"].exception_handlers, error)
            if handler is None:
                raise
            response = await handler(request, error)
        await response(scope, receive, send)


def _json_content(scope: Scope) -> bool:
    """Whether the request's one Content-Type is application/json (parameters such as charset aside)."""
    types = [value for name, value in scope["headers"] if name == b"content-type"]
    return len(types) == 1 and types[0].split(b";", 1)[0].strip().lower() == b"application/json"


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's body, and a receive that replays it (then whatever else came) before ``receive``'s next."""
    chunks, messages = [], []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            messages.append(message)
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    messages.insert(0, {"type": "http.request", "body": body, "more_body": False})

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return body, replay


def _validated(model: type[BaseModel], raw: bytes) -> BaseModel | None:
    """``raw`` as ``model`` when it is a JSON object the model validates, else None (FastAPI answers it)."""
    try:
        data = request_json(raw)
    except ValueError:  # not JSON, not UTF-8, or nested past the parser's stack
        return None
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def _handler(handlers: dict, error: Exception):
    """The app's exception handler for ``error``'s class or its nearest base (Starlette's lookup; the
    500 handler is the server error middleware's, not this one's), or None."""
    for cls in type(error).__mro__:
        if cls is Exception:
            return None
        handler = handlers.get(cls)
        if handler is not None:
            return handler
    return None
