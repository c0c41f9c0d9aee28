"""The server's error answers: every failure as ``{"error": {"code", "message", "field", "type"}}``.

The code comes from the exception's type (:data:`memnets.server.wire.ERROR_STATUS` gives its
status): the store's own error types (:mod:`memnets.store.errors`: unreachable -> 503 with
``Retry-After``, an unusable memory -> 422, any other refusal -> 409), the API's ValueError /
TypeError -> 422 and KeyError -> 404, a token's AuthError -> 401/403, a request FastAPI cannot read
-> 400/422; anything else is a 500 with no internals in it (and logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memnets.argerrors import field_of
from memnets.httpguard import route_of
from memnets.server.auth import AuthError
from memnets.server.state import RETRY_AFTER_S, ServerError, ServerState
from memnets.server.wire import ERROR_STATUS, error_body
from memnets.store.disk_reserve import disk_full
from memnets.store.errors import InvalidMemoryError, StoreError, StoreUnavailableError

logger = logging.getLogger(__name__)

DISK_FULL_MESSAGE = (
    "the store's disk is full: this call was not completed (its transaction rolled back). Free space on the "
    "server's disk; reads and deletions still work (the store keeps room for a deletion)"
)


def _raised_from(error: BaseException, test: Callable[[BaseException], bool]) -> bool:
    """Whether ``error``, or an error it was raised from (or while handling), passes ``test``."""
    seen = set()
    while error is not None and id(error) not in seen:
        if test(error):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def classify(error: BaseException) -> tuple[str, str, str | None]:
    """(code, message, field) of an exception a memory call raised; the field is the argument the
    error names itself (:mod:`memnets.argerrors`), never guessed from its message."""
    if _raised_from(error, lambda raised: isinstance(raised, StoreUnavailableError)):
        return "unavailable", f"the store cannot be reached: {error}", None
    if _raised_from(error, disk_full):
        return "insufficient_storage", DISK_FULL_MESSAGE, None
    if isinstance(error, InvalidMemoryError):
        return "invalid_memory", str(error), field_of(error)
    if isinstance(error, KeyError):
        message = str(error.args[0]) if error.args else "not found"
        return "not_found", message, field_of(error)
    if isinstance(error, TypeError):
        return "invalid_type", str(error), field_of(error)
    if isinstance(error, (ValueError, OverflowError)):  # OverflowError: a number or a date out of every range
        return "invalid_argument", str(error), field_of(error)
    if isinstance(error, StoreError):
        return "conflict", str(error), None
    return "internal", "internal error (logged by the server)", None


def error_response(state: ServerState, code: str, message: str, field=None, kind=None, headers=None) -> JSONResponse:
    """The JSON error answer of ``code`` (counted in the metrics)."""
    state.metrics.errors.labels(code).inc()
    return JSONResponse(error_body(code, message, field, kind), status_code=ERROR_STATUS[code], headers=headers)


def api_error_response(state: ServerState, request: Request, error: BaseException) -> JSONResponse:
    """The JSON error answer to an exception of a memory call (logged, by its route template, when it is
    not the caller's fault)."""
    code, message, field = classify(error)
    route = route_of(request.scope)  # never the path: it holds user names and memory ids
    if code == "internal":
        logger.error("memnets server: %s %s failed", request.method, route, exc_info=error)
    elif code == "unavailable":
        logger.warning("memnets server: %s %s: the store is unavailable: %s", request.method, route, error)
    elif code == "insufficient_storage":
        logger.warning("memnets server: %s %s: the store's disk is full: %s", request.method, route, error)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if code == "unavailable" else None
    kind = None if code in ("internal", "unavailable", "insufficient_storage") else _kind(error)
    return error_response(state, code, message, field, kind, headers)


def _kind(error: BaseException) -> str:
    """The exception class the client raises again: the store's own, else the built-in one (an
    OverflowError is a ValueError to it; an ArgumentValueError is the ValueError it derives from)."""
    if isinstance(error, StoreError):
        return type(error).__name__
    builtin = next(base for base in type(error).__mro__ if base.__module__ == "builtins")
    return "ValueError" if builtin is OverflowError else builtin.__name__


def install(app: FastAPI, state: ServerState) -> None:
    """The app's exception handlers: auth, the server's own errors, unreadable requests, the API's errors."""

    @app.exception_handler(AuthError)
    async def auth_error(request: Request, error: AuthError):
        code = "unauthorized" if error.status == 401 else "forbidden"
        headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
        field = "authorization" if error.status == 401 else "user"
        return error_response(state, code, str(error), field, "PermissionError", headers)

    @app.exception_handler(ServerError)
    async def server_error(request: Request, error: ServerError):
        kind = "KeyError" if error.code == "not_found" else None
        return error_response(state, error.code, str(error), error.field, kind, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError):
        first = error.errors()[0] if error.errors() else {}
        loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path")]
        field = ".".join(loc) or "body"
        if first.get("type") == "json_invalid":
            field = "body"
        if first.get("type") in ("json_invalid", "model_attributes_type", "dict_type"):
            return error_response(state, "malformed_request", f"{field}: {first.get('msg', 'not valid JSON')}", field)
        return error_response(state, "invalid_argument", f"{field}: {first.get('msg', 'invalid')}", field, "ValueError")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        code = {404: "not_found", 405: "malformed_request", 413: "too_large"}.get(
            error.status_code, "malformed_request"
        )
        response = error_response(state, code, f"{request.method} {request.url.path}: {error.detail}")
        response.status_code = error.status_code
        return response

    async def api_error(request: Request, error: Exception):
        return api_error_response(state, request, error)

    for handled in (ValueError, TypeError, LookupError, ArithmeticError, StoreError, RuntimeError, OSError):
        app.add_exception_handler(handled, api_error)  # each class by name: handled inside the middleware stack
