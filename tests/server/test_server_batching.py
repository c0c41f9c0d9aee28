"""BatchingEncoder: concurrent encode calls share forward passes (bounded wait), each caller gets
exactly the rows a direct encode gives, kinds share a pass only when the encoder embeds one of them
as given (the other by its prefix), and an error reaches its callers.
Through the app (in process, a real tiny encoder): adds go through it too, and a search encodes its
query once, its score breakdown included, with batching and without."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memnets.server.batching import BatchingEncoder


class CountingEncoder:
    """The real tiny encoder, with the sizes of its forward passes recorded (a spy)."""

    def __init__(self, encoder):
        self.encoder, self.passes, self.kinds, self.texts = encoder, [], [], []
        self.dim, self.tokenizer = encoder.dim, encoder.tokenizer

    def __getattr__(self, name):  # fingerprint, window, ... of the real encoder (memnets.open needs them)
        if name == "encoder":
            raise AttributeError(name)
        return getattr(self.encoder, name)

    def encode(self, texts, kind="memory"):
        self.passes.append(len(texts))
        self.kinds.append(kind)
        self.texts.append(list(texts))
        if "explode" in texts:
            raise RuntimeError("the model failed")
        return self.encoder.encode(texts, kind=kind)


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def prefixed(tiny_model_dir):
    """An encoder with a prefix for each kind: no kind is embedded as given, so kinds never share a pass."""
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir, query_prefix="query: ", memory_prefix="passage: ")


@pytest.fixture(scope="module")
def query_prefixed(tiny_model_dir):
    """An encoder with a query prefix only: memories are embedded as given, queries as prefix + text."""
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir, query_prefix="query: ")


def _concurrently(function, arguments):
    results, barrier = [None] * len(arguments), threading.Barrier(len(arguments))

    def run(n):
        barrier.wait()
        try:
            results[n] = function(*arguments[n])
        except Exception as error:  # returned, to be checked
            results[n] = error

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(arguments))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_concurrent_calls_share_forward_passes_and_get_their_own_rows(encoder):
    spy = CountingEncoder(encoder)
    batching = BatchingEncoder(spy, max_wait_s=0.2, max_batch=64)
    texts = [[f"text number {n}", f"another {n}"] for n in range(16)]
    results = _concurrently(lambda t: batching.encode(t, kind="memory"), [(t,) for t in texts])
    assert sum(spy.passes) == 32 and len(spy.passes) < 16  # fewer passes than calls
    for got, given in zip(results, texts):
        np.testing.assert_allclose(np.asarray(got), np.asarray(encoder.encode(given, kind="memory")), atol=1e-5)
    batching.close()


def test_kinds_with_two_prefixes_are_never_mixed_and_batches_are_bounded(prefixed):
    spy = CountingEncoder(prefixed)
    batching = BatchingEncoder(spy, max_wait_s=0.2, max_batch=4)
    calls = [([f"q{n}"], "query" if n % 2 else "memory") for n in range(12)]
    results = _concurrently(batching.encode, calls)
    assert all(not isinstance(r, Exception) for r in results)
    assert max(spy.passes) <= 4 and sum(spy.passes) == 12
    for kind, texts in zip(spy.kinds, spy.texts):  # every text of a pass is of the pass's kind, as given
        assert {"query" if int(text[1:]) % 2 else "memory" for text in texts} == {kind}
    for (texts, kind), got in zip(calls, results):
        np.testing.assert_allclose(np.asarray(got), np.asarray(prefixed.encode(texts, kind=kind)), atol=1e-5)
    batching.close()


def _hold_first_pass(spy: CountingEncoder) -> tuple[threading.Event, threading.Event]:
    """(entered, gate): the spy's first forward pass sets ``entered`` and blocks until ``gate`` is set,
    so that a test can queue calls while the encoder is busy."""
    entered, gate = threading.Event(), threading.Event()
    real_encode = spy.encode

    def encode(texts, kind="memory"):
        if not entered.is_set():
            entered.set()
            gate.wait(timeout=30)
        return real_encode(texts, kind=kind)

    spy.encode = encode
    return entered, gate


def _queue_during_first_pass(batching: BatchingEncoder, calls: list) -> tuple[threading.Thread, list, dict]:
    """Start a call whose pass blocks (see :func:`_hold_first_pass`), then queue ``calls`` in order
    behind it: (the first call's thread, the calls' threads, their results by index)."""
    first = threading.Thread(target=batching.encode, args=(["first"], "query"))
    first.start()
    assert batching.encoder.entered.wait(timeout=30)  # the batcher is in the first call's pass
    results: dict = {}
    threads = []
    for n, (texts, kind) in enumerate(calls):
        threads.append(threading.Thread(target=lambda n=n, t=texts, k=kind: results.update({n: batching.encode(t, k)})))
        threads[-1].start()
        while batching._queue.qsize() < n + 1:
            time.sleep(0.001)
    return first, threads, results


def test_a_batch_takes_every_waiting_call_of_its_kind_past_calls_of_the_other(prefixed):
    """Searches (queries) and adds (memories) interleaved in the queue: one pass per kind, not one per
    switch of kind (which held the server's mean batch at ~3 under 50 clients with 20% adds)."""
    spy = CountingEncoder(prefixed)
    spy.entered, gate = _hold_first_pass(spy)
    batching = BatchingEncoder(spy, max_wait_s=0.0, max_batch=64)
    calls = [([f"text {n}"], "query" if n % 2 else "memory") for n in range(12)]
    first, threads, results = _queue_during_first_pass(batching, calls)  # memory, query, memory, ...
    gate.set()
    for thread in [first, *threads]:
        thread.join(timeout=30)
    assert sorted(spy.passes[1:]) == [6, 6] and set(spy.kinds[1:]) == {"query", "memory"}
    for n, (texts, kind) in enumerate(calls):
        np.testing.assert_allclose(np.asarray(results[n]), np.asarray(prefixed.encode(texts, kind=kind)), atol=1e-5)
    batching.close()


@pytest.mark.parametrize("plain", ["memory", "query"])
def test_kinds_share_a_pass_when_the_encoder_embeds_one_as_given(tiny_model_dir, query_prefixed, plain):
    """Searches and adds queued together go through one pass (not one per kind) when one kind has no
    prefix: the other's texts go in as prefix + text under the plain kind, and every caller gets the
    rows a direct encode of its own kind gives (within float tolerance: the pass pads differently)."""
    from memnets.nn.encoder import MemoryEncoder

    encoder = (
        query_prefixed if plain == "memory" else MemoryEncoder.from_pretrained(tiny_model_dir, memory_prefix="m: ")
    )
    spy = CountingEncoder(encoder)
    spy.entered, gate = _hold_first_pass(spy)
    batching = BatchingEncoder(spy, max_wait_s=0.0, max_batch=64)
    calls = [([f"text {n}", f"more {n}"], "query" if n % 3 else "memory") for n in range(9)]
    first, threads, results = _queue_during_first_pass(batching, calls)
    gate.set()
    for thread in [first, *threads]:
        thread.join(timeout=30)
    assert spy.passes[1:] == [18] and spy.kinds[1:] == [plain] and encoder.plain_kind == plain
    assert spy.texts[1] == [encoder.prefix(kind) + text for texts, kind in calls for text in texts]
    for n, (texts, kind) in enumerate(calls):
        np.testing.assert_allclose(np.asarray(results[n]), np.asarray(encoder.encode(texts, kind=kind)), atol=1e-5)
    batching.close()


def test_calls_queued_during_a_pass_start_the_next_without_the_window(encoder):
    """Only a call that finds the encoder idle waits max_wait_s for company; the calls that queued
    while a pass ran start the next pass at once (waiting there left the encoder idle ~7% of its time
    at 50 clients). Counted through on_batch's ``waited``, as the server's metrics count it."""
    spy = CountingEncoder(encoder)
    spy.entered, gate = _hold_first_pass(spy)
    passes: list[tuple[int, bool]] = []
    seconds: list[float] = []

    def on_batch(size: int, waited: bool, took: float) -> None:
        passes.append((size, waited))
        seconds.append(took)

    batching = BatchingEncoder(spy, max_wait_s=0.05, on_batch=on_batch)
    first, threads, _ = _queue_during_first_pass(batching, [([f"query {n}"], "query") for n in range(3)])
    time.sleep(0.1)
    gate.set()
    for thread in [first, *threads]:
        thread.join(timeout=30)
    assert passes == [(1, True), (3, False)]
    assert seconds[0] >= 0.1 and seconds[1] < seconds[0]  # the first pass was held 0.1 s, the next was not
    batching.close()


def test_an_error_reaches_the_callers_of_its_batch_only(encoder):
    spy = CountingEncoder(encoder)
    batching = BatchingEncoder(spy, max_wait_s=0.0)
    with pytest.raises(RuntimeError, match="the model failed"):
        batching.encode(["explode"])
    assert np.asarray(batching.encode(["fine"])).shape == (1, encoder.dim)  # the batcher goes on
    batching.close()


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's OS name is read from Linux's /proc")
def test_the_encoders_thread_carries_its_name_in_the_os(encoder):
    """The batching thread names itself for the operating system (the load benchmark tells the encoder's
    CPU apart from the request threads' by it); in Python alone, /proc showed the process's name."""

    class Naming(CountingEncoder):
        def encode(self, texts, kind="memory"):
            self.named = Path("/proc/thread-self/comm").read_text().strip()
            return super().encode(texts, kind)

    spy = Naming(encoder)
    batching = BatchingEncoder(spy, max_wait_s=0.0)
    batching.encode(["hello"])
    batching.close()
    assert spy.named == "memnets-encode"
    assert Path("/proc/thread-self/comm").read_text().strip() != "memnets-encode"  # the caller's is left alone


@pytest.mark.parametrize(("option", "value"), [("max_wait_s", -1), ("max_wait_s", 5), ("max_batch", 0)])
def test_bad_settings_are_named(encoder, option, value):
    with pytest.raises(ValueError, match=option):
        BatchingEncoder(encoder, **{option: value})


@pytest.mark.parametrize("batching", [True, False])
def test_the_app_encodes_adds_through_it_and_a_search_query_once(encoder, tmp_path, batching):
    """Before: the write path kept the encoder the memory opened with, so adds bypassed the batcher
    (and its metrics); without batching the search route encoded the query again for ``_explain``."""
    from starlette.testclient import TestClient

    import memnets
    from memnets.server.app import create_app
    from memnets.server.testing import wait_until_ready

    spy = CountingEncoder(encoder)
    app = create_app(lambda wrap: memnets.open(str(tmp_path / "memory"), encoder=wrap(spy)), batching=batching)
    with TestClient(app) as client:
        wait_until_ready(client)
        for text in ("ann walks her beagle in the park", "ann's sister lives in lyon"):
            assert client.post("/v1/memories", json={"user": "ann", "text": text}).status_code == 200
        assert spy.kinds.count("memory") == 2
        metrics = client.get("/metrics").text
        assert "memnets_encode_batch_size_sum 2.0" in metrics, metrics  # both adds' texts went through it
        busy = [line for line in metrics.splitlines() if line.startswith("memnets_encode_seconds_total ")]
        assert len(busy) == 1 and float(busy[0].split()[1]) > 0, metrics  # the two passes' time
        spy.kinds.clear()
        found = client.post("/v1/search", json={"user": "ann", "query": "the dog", "k": 2}).json()
        assert spy.kinds == ["query"]  # the hits and their score parts from one encode
        query = np.asarray(encoder.encode(["the dog"], kind="query"), dtype=np.float32)[0]
        for hit in found["results"]:
            stored = np.asarray(encoder.encode([hit["memory"]["content"]], kind="memory"), dtype=np.float32)[0]
            assert hit["parts"]["relevance"] == pytest.approx(float(query @ stored), abs=1e-4)
