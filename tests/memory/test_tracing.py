"""OpenTelemetry spans (memnets.tracing, the extra [otel]), read back with the SDK's in-memory exporter:
add, search, encode, the store's calls and LLM calls nest under one another and under the server's
request span, which continues the caller's W3C trace; no attribute holds a memory's text, a query or
a user; and without OpenTelemetry nothing is wrapped at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import memnets
from memnets import tracing
from memnets.argerrors import UnknownIdError
from memnets.llm import ExtractiveLLM
from memnets.server.testing import PACKAGE_PARENT, ServerProcess, wait_until_ready

USER = "zelda-" + uuid.uuid4().hex[:8]
SECRET = "quokka" + uuid.uuid4().hex[:6]  # a word of every text and query, found in no attribute
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN_ID = "00f067aa0ba902b7"


@pytest.fixture(scope="module")
def exporter():
    """The in-memory exporter of the process's SDK provider (set here unless a provider is set already)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    found = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(found))
    yield found
    found.shutdown()  # the provider stays (set once per process): later modules' spans are dropped, not kept


@pytest.fixture()
def spans(exporter):
    exporter.clear()
    return exporter


def only(finished, name: str):
    named = [span for span in finished if span.name == name]
    assert len(named) == 1, f"{len(named)} spans named {name!r} among {[s.name for s in finished]}"
    return named[0]


def children(finished, parent) -> set[str]:
    return {span.name for span in finished if span.parent is not None and span.parent.span_id == parent.context.span_id}


def assert_no_caller_data(finished) -> None:
    for span in finished:
        for name, value in span.attributes.items():
            text = str(value)
            assert SECRET not in text and USER not in text, f"span {span.name!r}: attribute {name}={value!r}"
        assert SECRET not in span.name and USER not in span.name, span.name


def test_add_and_search_spans_nest_their_encode_and_store_calls(location, encoder, spans):
    where, options = location
    with memnets.open(where, encoder=encoder, **options) as memory:
        memory.add(f"ann keeps a {SECRET} in the garden", user=USER)
        memory.add_many([f"the {SECRET} eats leaves", "ann waters the roses"], user=USER)
        spans.clear()  # the searches alone from here
        hits = memory.search(f"what does the {SECRET} eat?", user=USER, k=2)
    assert hits
    finished = spans.get_finished_spans()
    search = only(finished, "memnets.search")
    assert children(finished, search) >= {"memnets.encode", "memnets.store.search"}
    assert only(finished, "memnets.encode").attributes["memnets.kind"] == "query"
    store_class = only(finished, "memnets.store.search").attributes["memnets.class"]
    assert store_class == ("Archive" if options == {} else "PgVectorStore")
    assert_no_caller_data(finished)


def test_an_add_is_one_span_over_its_encode_and_its_store_write(location, encoder, spans):
    where, options = location
    with memnets.open(where, encoder=encoder, **options) as memory:
        spans.clear()  # the opening's own store calls left out
        memory.add(f"ann keeps a {SECRET} in the garden", user=USER)
        finished = spans.get_finished_spans()
        add = only(finished, "memnets.add")
        assert add.parent is None
        assert children(finished, add) >= {"memnets.encode", "memnets.store.upsert"}
        assert only(finished, "memnets.encode").attributes["memnets.texts"] == 1
        spans.clear()
        memory.add_many([f"the {SECRET} eats leaves", "ann waters the roses"], user=USER)
        finished = spans.get_finished_spans()
    batch = only(finished, "memnets.add_many")
    assert "memnets.encode" in children(finished, batch)
    assert max(s.attributes["memnets.texts"] for s in finished if s.name == "memnets.encode") == 2  # one batch
    assert_no_caller_data(finished)


def test_spans_say_what_a_call_did_in_counts_and_fixed_words(location, encoder, spans):
    """An add's outcome, a transcript's or add_many's count per outcome, a search's k, users and hits: what
    happened, beside how long; still no text, query or user (memnets.memory.spans)."""
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=0.9999, **options) as memory:
        spans.clear()
        memory.add(f"ann keeps a {SECRET} in the garden", user=USER)
        memory.add(f"ann keeps a {SECRET} in the garden", user=USER)
        memory.add(
            messages=[
                {"role": "user", "content": f"the {SECRET} eats leaves"},
                {"role": "assistant", "content": "Fun!"},
            ],
            user=USER,
        )
        memory.add_many(["ann waters the roses", "ann waters the roses"], user=USER)
        memory.search(f"what does the {SECRET} eat?", user=USER, k=2)
        memory.search_many("roses", users=[USER, USER + "-nobody"], k=7)
        finished = spans.get_finished_spans()
    adds = [dict(s.attributes) for s in finished if s.name == "memnets.add"]
    assert [a.get("memnets.outcome") for a in adds] == ["added", "unchanged", None]
    assert {k: adds[2][k] for k in ("memnets.added", "memnets.skipped", "memnets.unchanged")} == {
        "memnets.added": 1,
        "memnets.skipped": 1,
        "memnets.unchanged": 0,
    }
    batch = only(finished, "memnets.add_many").attributes
    assert (batch["memnets.added"], batch["memnets.unchanged"]) == (1, 1)
    searches = [s.attributes for s in finished if s.name == "memnets.search"]
    assert [(a["memnets.k"], a["memnets.users"], a["memnets.hits"]) for a in searches] == [(2, 1, 2), (7, 2, 3)]
    assert_no_caller_data(finished)


def test_a_server_request_continues_the_callers_trace(encoder, tmp_path, spans):
    """The request span is the child of the caller's traceparent and the parent of the memory's spans
    (which run in a worker thread); it is named by the route template, never by the path."""
    from starlette.testclient import TestClient

    from memnets.server.app import create_app

    app = create_app(lambda wrap: memnets.open(str(tmp_path / "memory"), encoder=wrap(encoder)))
    traceparent = {"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN_ID}-01"}
    with TestClient(app) as client:
        wait_until_ready(client)
        spans.clear()
        body = {"user": USER, "text": f"ann keeps a {SECRET} in the garden"}
        added = client.post("/v1/memories", json=body, headers=traceparent)
        assert added.status_code == 200, added.text
        memory_id = added.json()["memory"]["id"]
        assert client.get(f"/v1/memories/{memory_id}", params={"user": USER}).status_code == 200
        found = client.post("/v1/search", json={"user": USER, "query": SECRET, "k": 1}, headers=traceparent)
        assert found.status_code == 200, found.text
    finished = spans.get_finished_spans()
    request = only(finished, "POST /v1/memories")
    assert request.kind is trace.SpanKind.SERVER
    assert format(request.context.trace_id, "032x") == TRACE_ID
    assert format(request.parent.span_id, "016x") == CALLER_SPAN_ID and request.parent.is_remote
    assert request.attributes["http.route"] == "/v1/memories"
    assert request.attributes["http.response.status_code"] == 200
    add = only(finished, "memnets.add")
    assert add.parent.span_id == request.context.span_id
    assert children(finished, add) >= {"memnets.encode", "memnets.store.upsert"}
    search = only(finished, "memnets.search")
    assert search.parent.span_id == only(finished, "POST /v1/search").context.span_id
    assert format(search.context.trace_id, "032x") == TRACE_ID
    get = only(finished, "GET /v1/memories/{id:path}")  # no traceparent: a trace of its own
    assert format(get.context.trace_id, "032x") != TRACE_ID and get.parent is None
    assert memory_id not in get.name
    assert_no_caller_data(finished)


SERVER_TRACING = """
import os
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

out = open(os.environ["MEMNETS_TEST_SPANS"], "a", buffering=1)
exporter = ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\\n")
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
"""


def test_a_real_server_process_traces_a_request_under_the_callers_traceparent(tiny_model_dir, tmp_path):
    """`memnets serve http` with a tracer provider set at startup (a sitecustomize, as an
    ``opentelemetry-instrument`` launcher would): uvicorn, the batching encoder, the worker threads."""
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "sitecustomize.py").write_text(SERVER_TRACING)
    written = tmp_path / "spans.jsonl"
    env = {"PYTHONPATH": f"{tmp_path / 'hooks'}:{PACKAGE_PARENT}", "MEMNETS_TEST_SPANS": str(written)}
    with ServerProcess(tmp_path / "memory", "--encoder", str(tiny_model_dir), env=env) as server:
        server.wait_ready()
        answer = httpx.post(
            f"{server.url}/v1/memories",
            json={"user": USER, "text": f"ann keeps a {SECRET} in the garden"},
            headers={"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN_ID}-01"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
    finished = [json.loads(line) for line in written.read_text().splitlines()]
    (request,) = [s for s in finished if s["name"] == "POST /v1/memories"]
    assert request["context"]["trace_id"] == f"0x{TRACE_ID}" and request["parent_id"] == f"0x{CALLER_SPAN_ID}"
    (add,) = [s for s in finished if s["name"] == "memnets.add"]
    assert add["parent_id"] == request["context"]["span_id"]
    under_add = {s["name"] for s in finished if s["parent_id"] == add["context"]["span_id"]}
    assert under_add >= {"memnets.encode", "memnets.store.upsert"}
    for span in finished:
        assert SECRET not in json.dumps(span["attributes"]) and USER not in json.dumps(span["attributes"]), span


def test_an_llm_call_is_a_span_without_its_prompt(spans):
    ExtractiveLLM().complete(f"Summarise: ann keeps a {SECRET}. The {SECRET} eats leaves.")
    call = only(spans.get_finished_spans(), "memnets.llm.complete")
    assert call.attributes["memnets.class"] == "ExtractiveLLM"
    assert_no_caller_data([call])


class CodedError(RuntimeError):
    """An error with a stable code beside a message that quotes a user and a text."""

    code = "unavailable"


def assert_failed_by_type_only(failed, kind: type) -> None:
    """``failed`` is an ERROR span whose only trace of the error is its type (no event, no message)."""
    assert failed.status.status_code is trace.StatusCode.ERROR and failed.status.description == kind.__name__
    assert failed.attributes["error.type"] == kind.__qualname__ and failed.events == ()
    exported = failed.to_json()  # everything an exporter sends: name, attributes, events, status, links
    assert SECRET not in exported and USER not in exported, exported


def test_an_error_marks_its_span_by_its_type_never_by_its_message(location, encoder, spans):
    """An exception's message quotes users and texts ("user 'alice' has no memory ..."): OpenTelemetry's
    defaults put it, with its stack, in an event and the status of every span it went through."""
    where, options = location
    with memnets.open(where, encoder=encoder, **options) as memory:
        spans.clear()
        with pytest.raises(UnknownIdError, match=USER):  # the API's own error names the user
            memory.add(f"ann keeps a {SECRET} in the garden", user=USER, replaces="no-such-memory")
    assert_failed_by_type_only(only(spans.get_finished_spans(), "memnets.add"), UnknownIdError)
    spans.clear()
    with pytest.raises(CodedError), tracing.span("memnets.search", {"memnets.texts": 1}):
        raise CodedError(f"user {USER!r} asked about the {SECRET}")
    failed = only(spans.get_finished_spans(), "memnets.search")
    assert_failed_by_type_only(failed, CodedError)
    assert failed.attributes["memnets.error.code"] == "unavailable" and failed.attributes["memnets.texts"] == 1
    spans.clear()
    with pytest.raises(CodedError), tracing.request_span("POST", {}):  # a server request's span alike
        raise CodedError(f"user {USER!r} asked about the {SECRET}")
    assert_failed_by_type_only(only(spans.get_finished_spans(), "POST"), CodedError)


def test_a_string_attribute_must_be_a_name_of_code():
    """So that a user name or a text cannot become an attribute later by mistake."""
    with pytest.raises(ValueError, match="'memnets.user'"), tracing.span("memnets.add", {"memnets.user": USER}):
        pass
    with tracing.span("memnets.add", {"memnets.texts": 3, "memnets.kind": "memory", "memnets.skipped": None}):
        pass


def run_python(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script], env={"PYTHONPATH": str(PACKAGE_PARENT)}, capture_output=True, text=True
    )


def test_without_a_tracer_provider_no_span_is_started():
    """The API alone (FastAPI depends on it) starts no span until the application sets a provider."""
    script = """
from memnets import tracing
assert tracing.enabled()
assert tracing.span("memnets.add") is tracing.span("memnets.search")  # the shared no-op
print("no spans")
"""
    done = run_python(script)
    assert done.returncode == 0 and done.stdout.strip() == "no spans", done.stderr


def test_spans_start_once_a_provider_is_set_in_code_or_named_in_the_environment():
    """The provider check reads OpenTelemetry's global itself; a provider set after import, and one that
    only the environment names (``opentelemetry-instrument`` sets it; the getter loads it), both count."""
    in_code = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from memnets import tracing
before = tracing.span("memnets.search") is tracing.span("memnets.add")  # the shared no-op: no provider yet
trace.set_tracer_provider(TracerProvider())
print(before, tracing.span("memnets.search") is tracing.span("memnets.add"))
"""
    done = run_python(in_code)
    assert done.returncode == 0 and done.stdout.split() == ["True", "False"], done.stderr
    from_environment = """
from memnets import tracing
print(tracing.span("memnets.search") is tracing.span("memnets.add"))
"""
    done = subprocess.run(
        [sys.executable, "-c", from_environment],
        env={"PYTHONPATH": str(PACKAGE_PARENT), "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.split() == ["False"], done.stderr


def test_without_opentelemetry_nothing_is_wrapped():
    """Zero cost without the extra: the decorators return what they were given, span() a shared no-op."""
    script = """
import sys
sys.modules["opentelemetry"] = None  # as if the extra [otel] were not installed
from memnets import tracing
from memnets.api import AgentMemory
from memnets.store.core import SqlStore
assert not tracing.enabled()
assert not hasattr(AgentMemory.add, "__wrapped__") and not hasattr(SqlStore.search, "__wrapped__")
class Calls:
    def call(self): ...
assert tracing.traced_methods("memnets", "call")(Calls).call is Calls.__dict__["call"]
assert tracing.span("x", {"memnets.texts": 1}) is tracing.span("y")
with tracing.request_span("GET", {}) as finish:
    finish("/v1/users", 200)
print("no spans")
"""
    done = run_python(script)
    assert done.returncode == 0 and done.stdout.strip() == "no spans", done.stderr
    from memnets.api import AgentMemory

    assert hasattr(AgentMemory.add, "__wrapped__")  # and with it, wrapped


def test_the_otel_extra_installs_opentelemetry_instrument_and_an_exporter():
    """``pip install memnets[otel]`` then ``opentelemetry-instrument memnets serve http`` (docs/server.md):
    the command comes with opentelemetry-distro, its default OTLP exporter with the distro's ``otlp`` extra."""
    import tomllib

    extra = tomllib.loads((PACKAGE_PARENT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["otel"]
    assert any(requirement.startswith("opentelemetry-distro[otlp]") for requirement in extra), extra


def test_opentelemetry_instrument_exports_memnets_spans_with_what_they_did(tmp_path, tiny_model_dir):
    """The command the extra installs, on a script: memnets' spans reach its (console) exporter."""
    pytest.importorskip("opentelemetry.distro", reason="the extra [otel]'s opentelemetry-distro is not installed")
    script = tmp_path / "run.py"
    script.write_text(
        "import memnets\n"
        f"with memnets.open({str(tmp_path / 'm')!r}, encoder={str(tiny_model_dir)!r}) as m:\n"
        "    m.add('ann keeps bees', user='ann')\n"
        "    m.search('bees?', user='ann', k=3)\n"
    )
    environment = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
    run = subprocess.run(
        [sys.executable, "-c", "from opentelemetry.instrumentation.auto_instrumentation import run; run()"]
        + [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **environment, "PYTHONPATH": os.pathsep.join([str(PACKAGE_PARENT), *sys.path])},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert '"memnets.outcome": "added"' in run.stdout and '"memnets.hits": 1' in run.stdout
