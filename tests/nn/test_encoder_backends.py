"""The encoder's backends against the exact torch path: ONNX, int8 (ONNX Runtime), fp16/bf16 on a
GPU; the pack that carries the int8 encoder; memnets.open(backend=)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch

from memnets.nn.backend_choice import has_vnni
from memnets.nn.encoder import MemoryEncoder
from memnets.nn.onnx_encoder import ONNX_DIR, ONNX_FILES
from memnets.training.data.locomo import load_locomo

pytest.importorskip("onnxruntime", reason="the [onnx] extra is part of the dev install")

# the tiny random model's vectors sit closer together than a trained model's, so the same int8
# error costs more cosine there: the real MiniLM's bound is in the slow test
TINY_BOUNDS = {"onnx": 0.9999, "int8": 0.99, "int8_vnni": 0.99, "int8_vnni_ffn": 0.99}
MINILM_BOUNDS = {"onnx": 0.9999, "int8": 0.98, "int8_vnni": 0.98, "int8_vnni_ffn": 0.975}
NEEDS_VNNI = pytest.mark.skipif(not has_vnni(), reason="int8_vnni loads only on a CPU with VNNI; this one has none")
ONNX_BACKENDS = [
    "onnx",
    "int8",
    pytest.param("int8_vnni", marks=NEEDS_VNNI),
    pytest.param("int8_vnni_ffn", marks=NEEDS_VNNI),
]


@pytest.fixture(scope="module")
def turns() -> list[str]:
    return [turn.content for conv in load_locomo()[:2] for turn in conv.turns][:200]


def _cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(dim=1)


@pytest.mark.parametrize("backend", ONNX_BACKENDS)
def test_onnx_backends_agree_with_torch_on_real_texts(tiny_model_dir, turns, backend):
    exact = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64, query_prefix="query: ")
    fast = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64, query_prefix="query: ", backend=backend)
    assert exact.backend == "torch" and fast.backend == backend and fast._runner is not None
    for kind in ("memory", "query"):
        want, got = exact.encode(turns, kind), fast.encode(turns, kind, batch_size=32)
        assert got.shape == want.shape and got.dtype == torch.float32
        torch.testing.assert_close(got.norm(dim=1), torch.ones(len(turns)), atol=1e-4, rtol=0)
        assert _cosines(got, want).min() >= TINY_BOUNDS[backend]


def test_bad_backend_is_named_and_fp16_needs_a_gpu(tiny_model_dir):
    with pytest.raises(ValueError, match="backend must be one of"):
        MemoryEncoder.from_pretrained(tiny_model_dir, backend="int4")
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, backend="fp16")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="needs the encoder on a CUDA device"):
            encoder.encode(["a memory"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16/bf16 run on a CUDA device; none here")
@pytest.mark.parametrize("backend", ["fp16", "bf16"])
def test_gpu_half_backends_agree_with_torch(tiny_model_dir, turns, backend):
    exact = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    half = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64, backend=backend).to("cuda")
    assert _cosines(half.encode(turns), exact.encode(turns)).min() >= 0.99


def test_pack_carries_the_int8_encoder_verified_and_loads_it(tiny_model_dir, tmp_path, turns):
    import onnx

    from memnets.pack import PackError, export_pack, load_pack, verify_pack

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    pack = export_pack(tmp_path / "pack", encoder, backends=("int8",))
    name = f"encoder/{ONNX_DIR}/{ONNX_FILES['int8']}"
    assert name in verify_pack(pack)["files"]
    onnx.load(str(pack / name))  # a protobuf the onnx parser reads, no pickle inside
    assert (pack / name).read_bytes()[:1] != b"\x80"
    loaded = load_pack(pack, backend="int8")
    assert loaded.encoder.backend == "int8"  # served without torch, on the graph the pack carries
    assert loaded.encoder._session.path.relative_to(loaded.encoder.folder) == Path(ONNX_DIR, ONNX_FILES["int8"])
    assert _cosines(torch.as_tensor(loaded.encoder.encode(turns)), encoder.encode(turns)).min() >= TINY_BOUNDS["int8"]
    data = bytearray((pack / name).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (pack / name).write_bytes(bytes(data))
    with pytest.raises(PackError, match="model_int8.onnx"):
        load_pack(pack, backend="int8")


def test_an_encoder_already_on_onnx_runtime_exports_a_pack(tiny_model_dir, tmp_path, turns):
    from memnets.pack import export_pack, load_pack

    running = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64, backend="int8")
    pack = export_pack(tmp_path / "pack", running, backends=("onnx",))  # copied its session: a TypeError before
    loaded = load_pack(pack, backend="onnx")
    exact = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    assert _cosines(torch.as_tensor(loaded.encoder.encode(turns)), exact.encode(turns)).min() >= TINY_BOUNDS["onnx"]


def test_memnets_open_takes_a_backend(tiny_model_dir, tmp_path):
    import memnets

    memory = memnets.open(tmp_path / "store", encoder=tiny_model_dir, backend="onnx", search="dense")  # the cosine
    try:
        assert memory.encoder.backend == "onnx"
        memory.add("Alice adopted a cat named Miso.", user="alice")
        hits = memory.search("what is the cat called?", user="alice", k=1)
        assert [hit.memory.content for hit in hits] == ["Alice adopted a cat named Miso."]
        exact = MemoryEncoder.from_pretrained(tiny_model_dir)
        cosine = float(
            exact.encode(["Alice adopted a cat named Miso."]) @ exact.encode(["what is the cat called?"], "query").T
        )
        assert hits[0].score == pytest.approx(cosine, abs=1e-4)  # the ONNX graph embedded both sides
    finally:
        memory.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ONNX_BACKENDS)
def test_real_minilm_backends_agree_with_torch(turns, backend):
    exact = MemoryEncoder.from_pretrained()
    fast = MemoryEncoder.from_pretrained(backend=backend)
    cosines = _cosines(fast.encode(turns), exact.encode(turns))
    assert cosines.min() >= MINILM_BOUNDS[backend], json.dumps({"min": float(cosines.min())})


@pytest.mark.parametrize("kind", ["dense_int8", "learned_int8"])
def test_the_retrieval_evaluation_ranks_with_the_fast_path(tiny_model_dir, tmp_path, kind):
    from memnets.pack import export_pack
    from memnets.scoring import ScorerWeights
    from memnets.training.retrieval.rankers import build_ranker

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    pack = export_pack(tmp_path / "pack", encoder, scorer_weights=ScorerWeights(relevance=2.0))
    ranker = build_ranker(kind, str(pack / "encoder" if kind == "dense_int8" else pack))
    fast = ranker.encoder if kind == "dense_int8" else ranker.scorer.encoder
    assert fast.backend == "int8" and fast._runner is not None
    conversation = load_locomo()[0]
    rankings = ranker.rank(conversation, ["where did they go?", "what did she paint?"])
    assert len(rankings) == 2 and sorted(rankings[0]) == sorted(turn.dia_id for turn in conversation.turns)


def test_int8_keeps_attention_and_the_ffn_down_projections_in_float32(tiny_model_dir, tmp_path):
    import onnx

    from memnets.nn.onnx_encoder import FP32_NODES, export_onnx

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    graph = onnx.load(str(export_onnx(encoder, tmp_path, "int8"))).graph
    ops = {node.name: node.op_type for node in graph.node}
    layers = encoder.backbone.config.num_hidden_layers
    kept = [name for name, op in ops.items() if FP32_NODES.search(name)]
    assert len(kept) == layers and all(ops[name] == "MatMul" for name in kept)  # one per layer, float32
    assert list(ops.values()).count("Attention") == layers and "QAttention" not in ops.values()
    quantised = [op for op in ops.values() if op in ("MatMulInteger", "DynamicQuantizeMatMul")]
    assert len(quantised) >= 2 * layers  # the attention output and FFN up-projections of every layer


@NEEDS_VNNI
def test_int8_vnni_quantises_attention_with_signed_weights_and_keeps_the_ffn_down_projections(tiny_model_dir, tmp_path):
    import onnx
    from onnx import TensorProto, numpy_helper

    from memnets.nn.onnx_encoder import FP32_NODES, export_onnx

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    graph = onnx.load(str(export_onnx(encoder, tmp_path, "int8_vnni"))).graph
    ops = {node.name: node.op_type for node in graph.node}
    layers = encoder.backbone.config.num_hidden_layers
    assert list(ops.values()).count("QAttention") == layers and "Attention" not in ops.values()
    assert sum(op == "MatMul" and FP32_NODES.search(name) is not None for name, op in ops.items()) == layers
    eight_bit = [t for t in graph.initializer if t.data_type in (TensorProto.INT8, TensorProto.UINT8)]
    big = [t for t in eight_bit if numpy_helper.to_array(t).size > 1]  # the weights, not zero points
    assert big and all(t.data_type == TensorProto.INT8 for t in big)  # s8: the u8 x s8 products VNNI computes


@NEEDS_VNNI
def test_int8_vnni_ffn_quantises_all_but_the_first_ffn_down_projection(tiny_model_dir, tmp_path):
    import onnx

    from memnets.nn.onnx_encoder import FP32_NODES, export_onnx

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    graph = onnx.load(str(export_onnx(encoder, tmp_path, "int8_vnni_ffn"))).graph
    ops = {node.name: node.op_type for node in graph.node}
    layers = encoder.backbone.config.num_hidden_layers
    kept = [name for name, op in ops.items() if op == "MatMul" and FP32_NODES.search(name)]
    assert len(kept) == 1 and "layer.0/" in kept[0]  # the first layer's FFN down-projection in float32
    quantised = {n for n, op in ops.items() if op == "MatMulInteger" and re.search(r"layer\.\d+/output/dense/", n)}
    assert len(quantised) == layers - 1  # every other layer's in s8
    assert list(ops.values()).count("QAttention") == layers


@pytest.mark.parametrize("backend", ["int8_vnni", "int8_vnni_ffn"])
def test_a_vnni_backend_falls_back_to_int8_with_one_log_line_without_vnni(
    tiny_model_dir, turns, monkeypatch, caplog, backend
):
    import memnets.nn.backend_choice as choice

    monkeypatch.setattr(choice, "instruction_sets", lambda: ["avx", "avx2", "fma"])  # an AVX2-only CPU's flags
    with caplog.at_level(logging.INFO, logger="memnets.nn.backend_choice"):
        encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64, backend=backend)
    assert encoder.backend == "int8" and encoder.fingerprint.startswith("int8:")
    (record,) = [r for r in caplog.records if r.name == "memnets.nn.backend_choice"]
    assert record.levelno == logging.WARNING
    assert f"{backend!r} needs a CPU with one of avx512_vnni, avx_vnni, amx_int8 (its flags: avx avx2 fma)" in (
        record.getMessage()
    )
    exact = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    assert _cosines(encoder.encode(turns), exact.encode(turns)).min() >= TINY_BOUNDS["int8"]
    assert not has_vnni(["avx512f", "avx512bw"]) and has_vnni(["avx2", "avx_vnni"])  # AVX-VNNI alone is enough


@pytest.mark.parametrize("backend", ["onnx", "int8"])
def test_the_graph_runs_layernorm_and_gelu_unfused(tiny_model_dir, tmp_path, backend):
    """ONNX Runtime's SkipLayerNormalization and BiasGelu kernels took 4x the time of Add +
    LayerNormalization and Add + Gelu: neither the exported graph nor the session's has them."""
    import onnx

    from memnets.nn.onnx_encoder import OnnxRunner, export_onnx, session_options

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    exported = export_onnx(encoder, tmp_path, backend)
    options = session_options()
    options.optimized_model_filepath = str(tmp_path / "as_run.onnx")  # the graph after ONNX Runtime's own fusions
    OnnxRunner(exported, options=options)
    layers = encoder.backbone.config.num_hidden_layers
    for path in (exported, tmp_path / "as_run.onnx"):
        ops = [node.op_type for node in onnx.load(str(path)).graph.node]
        assert "SkipLayerNormalization" not in ops and "BiasGelu" not in ops
        assert ops.count("LayerNormalization") == 2 * layers and "Attention" in ops


def test_the_session_spins_only_when_the_environment_asks(monkeypatch):
    """Idle threads sleep by default (a shared machine); MEMNETS_ONNX_SPINNING=1 makes them spin while
    a run lasts and stop at its end (a machine whose cores serve the encoder); other values are refused."""
    from memnets.nn.onnx_encoder import SPINNING_ENV, session_options

    monkeypatch.delenv(SPINNING_ENV, raising=False)
    default = session_options()
    assert default.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    monkeypatch.setenv(SPINNING_ENV, "1")
    spinning = session_options()
    assert spinning.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert spinning.get_session_config_entry("session.force_spinning_stop") == "1"
    monkeypatch.setenv(SPINNING_ENV, "yes")
    with pytest.raises(ValueError, match="MEMNETS_ONNX_SPINNING must be '0' or '1', got 'yes'"):
        session_options()
