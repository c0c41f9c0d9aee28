"""A server's encoder runs its passes through a traced graph (MemoryEncoder.trace_for_serving,
memnets.nn.traced): the same vectors and fingerprint as the eager module, whatever the batch, and
only on the torch backend on a CPU. Real models: a tiny random BERT with the MiniLM tokenizer, with
and without a projection, and the bundled all-MiniLM-L6-v2."""

from __future__ import annotations

import threading

import pytest
import torch

from memnets.nn.encoder import MemoryEncoder
from memnets.nn.traced import TracedRunner

# One word, short and long sentences, one past max_length (truncated), an empty string: batches padded every way.
TEXTS = [
    "hi",
    "I moved to Berlin last month and I like it",
    "word " * 400,
    "",
    *(f"memory number {i} " * (i % 7 + 1) for i in range(20)),
]
BATCHES = [TEXTS[:1], TEXTS[2:3], TEXTS[:2], TEXTS[:7], TEXTS]


def eager_and_traced(encoder: MemoryEncoder, kind: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    eager = [encoder.encode(batch, kind=kind) for batch in BATCHES]
    encoder.trace_for_serving()
    assert isinstance(encoder._runner, TracedRunner)
    return list(zip(eager, (encoder.encode(batch, kind=kind) for batch in BATCHES)))


@pytest.mark.parametrize("projection_dim", [None, 16])
@pytest.mark.parametrize("kind", ["memory", "query"])
def test_traced_passes_give_the_eager_vectors(tiny_model_dir, projection_dim, kind):
    encoder = MemoryEncoder.from_pretrained(
        tiny_model_dir, max_length=64, projection_dim=projection_dim, query_prefix="query: "
    )
    fingerprint = encoder.fingerprint
    for eager, traced in eager_and_traced(encoder, kind):
        assert traced.shape == eager.shape
        torch.testing.assert_close(traced, eager, rtol=0, atol=1e-6)
    assert encoder.fingerprint == fingerprint and encoder.backend == "torch"  # a store filled eager accepts it


@pytest.mark.slow
def test_the_bundled_encoder_traced_gives_the_eager_vectors():
    for eager, traced in eager_and_traced(MemoryEncoder.from_pretrained(), "memory"):
        torch.testing.assert_close(traced, eager, rtol=0, atol=1e-6)


def test_threads_share_one_traced_graph(tiny_model_dir):
    """The server without batching encodes in every request's thread at once."""
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    expected = [encoder.encode(batch) for batch in BATCHES]
    encoder.trace_for_serving()
    found: dict[int, list[torch.Tensor]] = {}

    def run(n: int) -> None:
        found[n] = [encoder.encode(batch) for batch in BATCHES * 3]

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(found) == [0, 1, 2, 3]
    for vectors in found.values():
        for got, want in zip(vectors, expected * 3):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_only_the_torch_backend_on_a_cpu_is_traced(tiny_model_dir):
    pytest.importorskip("onnxruntime")
    onnx = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64, backend="onnx")
    runner = onnx._runner
    assert onnx.trace_for_serving()._runner is runner  # its ONNX Runtime session, untouched
    traced = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64).trace_for_serving()
    graph = traced._runner
    assert traced.trace_for_serving()._runner is graph  # traced once


def test_the_server_encodes_through_the_traced_graph(tiny_model_dir, tmp_path):
    from starlette.testclient import TestClient

    import memnets
    from memnets.server.app import create_app
    from memnets.server.testing import wait_until_ready

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    app = create_app(lambda wrap: memnets.open(str(tmp_path / "memory"), encoder=wrap(encoder)))
    with TestClient(app) as client:
        wait_until_ready(client)
        assert client.post("/v1/memories", json={"user": "ann", "text": "ann walks her beagle"}).status_code == 200
        hits = client.post("/v1/search", json={"user": "ann", "query": "the dog", "k": 1}).json()["results"]
    assert isinstance(encoder._runner, TracedRunner)
    assert [hit["memory"]["content"] for hit in hits] == ["ann walks her beagle"]
