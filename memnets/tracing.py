"""OpenTelemetry spans of memnets' calls, and nothing at all when OpenTelemetry is not installed.

With the extra ``otel`` (opentelemetry-api and -sdk) installed, :func:`span` opens a span of the
tracer ``"memnets"`` as a child of the current one, and :func:`traced_methods` wraps calls of a
class in one each. In the server, :func:`request_span` opens each request's span, whose parent is
the caller's W3C ``traceparent`` header, so a client's trace runs on through the server's add,
search, encode, store and LLM spans (docs/server.md, "Tracing", lists them). Spans exist only once
the application set a ``TracerProvider`` (the SDK's, with an exporter; e.g.
``opentelemetry-instrument memnets serve http``); until then no span is started.

Attributes carry counts, sizes and names of code only (and what a call did: an add's outcome, a
search's k and hit count, :mod:`memnets.memory.spans`): never a memory's text, a query, a user or
any other value a caller wrote. A string attribute is refused (ValueError) unless its name is in
:data:`TEXT_ATTRIBUTES`, so that one cannot slip in later. Errors keep that promise too: an exception's
message often quotes a user or a text, so it is never recorded (OpenTelemetry's default records it as
an event with its stack and as the status); a failed span's status is ERROR described by the
exception's type name, with the type in ``error.type`` and its ``code``, when it has a short one, in
``memnets.error.code``.

Without OpenTelemetry, :func:`traced_methods` returns the class it was given and
:func:`span` a shared empty context manager; with the API but no provider, :func:`span` checks for
one and returns that empty context manager.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
from collections.abc import Callable, Iterator, Mapping

try:
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
except ModuleNotFoundError:  # the extra [otel] is not installed: no spans, no cost
    _propagate = _trace = None

TRACER_NAME = "memnets"
ERROR_TYPE = "error.type"  # OpenTelemetry's attribute of a failure's class
ERROR_CODE = "memnets.error.code"  # an exception's stable code (its ``code``: "unavailable", 503)
# the only attributes that may hold a string: names of code, routes and settings, never data a caller wrote
TEXT_ATTRIBUTES = frozenset(
    {"memnets.class", "memnets.kind", "memnets.outcome", "http.request.method", "http.route", ERROR_TYPE, ERROR_CODE}
)
_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # what a code looks like: a word, never a message
_NO_SPAN = contextlib.nullcontext()

Attributes = Mapping[str, int | float | bool | str | None]
Describe = Callable[[object, Mapping[str, object]], Attributes]  # (a call's result, its arguments) -> attributes


def enabled() -> bool:
    """Whether the OpenTelemetry API is installed (spans are started once a provider is set)."""
    return _trace is not None


def span(name: str, attributes: Attributes | None = None):
    """A context manager: the span ``name`` with ``attributes`` (None values left out), current inside;
    an exception marks it failed by its type only (:func:`_current_span`) and is raised on."""
    if not _provider_set():
        return _NO_SPAN
    return _current_span(name, attributes=_checked(attributes))


@contextlib.contextmanager
def _current_span(name: str, **options) -> Iterator:
    """The span ``name`` (``options``: the tracer's ``start_as_current_span``'s), current inside.

    OpenTelemetry's defaults are off: an exception's message and stack (which quote texts and users)
    are neither recorded as an event nor put in the status. The status is ERROR described by the
    exception's type name, with :func:`_error_attributes`; the exception is raised on.
    """
    tracer = _trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(name, record_exception=False, set_status_on_exception=False, **options) as now:
        try:
            yield now
        except BaseException as error:
            now.set_status(_trace.Status(_trace.StatusCode.ERROR, type(error).__name__))
            now.set_attributes(_error_attributes(error))
            raise


def _error_attributes(error: BaseException) -> dict:
    """The attributes of a failure: its type's qualified name and, when it has one, its ``code`` (a number,
    or a short word such as the server's "unavailable"; anything longer might be a message, and is left out)."""
    attributes: dict = {ERROR_TYPE: type(error).__qualname__}
    code = getattr(error, "code", None)
    if (isinstance(code, int) and not isinstance(code, bool)) or (isinstance(code, str) and _CODE.fullmatch(code)):
        attributes[ERROR_CODE] = code
    return attributes


def traced_methods(
    prefix: str, *methods: str, results: Mapping[str, Describe] | None = None, **renamed: str
) -> Callable[[type], type]:
    """A class decorator: each of ``methods`` runs inside the span ``f"{prefix}.{method}"`` (``renamed``:
    method -> the name after the prefix), with the attribute ``memnets.class``, the instance's class
    (``Archive``, ``PgVectorStore``), and what ``results[method](result, arguments)`` makes of a call that
    returned (what it did: an outcome, counts; ``arguments`` by name). One line on a class whose calls are
    the spans (the store contract, ``AgentMemory``'s add and search, an LLM's complete); the class itself
    without OpenTelemetry."""

    def decorate(cls: type) -> type:
        if _trace is None:
            return cls
        for method, name in {**{method: method for method in methods}, **renamed}.items():
            describe = (results or {}).get(method)
            setattr(cls, method, _traced_method(getattr(cls, method), f"{prefix}.{name}", describe))
        return cls

    return decorate


def _traced_method(function: Callable, name: str, describe: Describe | None = None) -> Callable:
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapper(self, *args, **kwargs):
        if not _provider_set():  # the hot path of every store and API call: no span, no attributes built
            return function(self, *args, **kwargs)
        with span(name, {"memnets.class": type(self).__name__}) as current:
            result = function(self, *args, **kwargs)
            if describe is not None and current is not None:
                bound = signature.bind(self, *args, **kwargs)
                bound.apply_defaults()
                current.set_attributes(_checked(describe(result, bound.arguments)))
            return result

    return wrapper


@contextlib.contextmanager
def request_span(method: str, headers: Mapping[str, str]) -> Iterator[Callable[[str, int], None]]:
    """A server request's span (kind SERVER), the child of the W3C trace context in ``headers``
    (``traceparent``, ``tracestate``), current inside; yields ``finish(route, status)``, which names
    the span by the route template (never the path: it holds ids and user names) and sets the status."""
    if not _provider_set():
        yield lambda route, status: None
        return
    parent = _propagate.extract(headers)
    with _current_span(
        method, context=parent, kind=_trace.SpanKind.SERVER, attributes={"http.request.method": method}
    ) as current:

        def finish(route: str, status: int) -> None:
            current.update_name(f"{method} {route}")
            current.set_attributes(_checked({"http.route": route, "http.response.status_code": status}))
            if status >= 500:
                current.set_status(_trace.Status(_trace.StatusCode.ERROR))

        yield finish


def _provider_set() -> bool:
    """Whether the application set a tracer provider. Until it does, the API's spans would record
    nothing, yet cost tens of microseconds each (nested context managers, the context's copy): none is
    started then, so that an installed API (FastAPI depends on it) costs one check per span site."""
    if _READ_PROVIDER_DIRECTLY:
        return _trace._TRACER_PROVIDER is not None
    return _trace is not None and not isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider)


# The public getter looks the environment up for a provider's name on every call while none is set (a
# KeyError raised and caught inside os.environ: ~1 us, three times per search), so the check reads
# OpenTelemetry's global itself. It takes the public getter where that global is missing (another
# OpenTelemetry version) or where the environment names a provider, which the getter loads on first use.
_READ_PROVIDER_DIRECTLY = (
    _trace is not None and hasattr(_trace, "_TRACER_PROVIDER") and "OTEL_PYTHON_TRACER_PROVIDER" not in os.environ
)


def _checked(attributes: Attributes | None) -> dict:
    out = {}
    for name, value in (attributes or {}).items():
        if value is None:
            continue
        if isinstance(value, str) and name not in TEXT_ATTRIBUTES:
            raise ValueError(
                f"span attribute {name!r}: a string attribute may hold only the name of code or a setting "
                f"({', '.join(sorted(TEXT_ATTRIBUTES))}), never data a caller wrote"
            )
        out[name] = value
    return out


__all__ = [
    "TEXT_ATTRIBUTES",
    "TRACER_NAME",
    "enabled",
    "request_span",
    "span",
    "traced_methods",
]
