"""ONNX Runtime for the encoder and the judge, without torch: the graph files' names, the int8
settings, quantisation and the session options.

What serves needs only this module, ``onnxruntime`` and ``onnx`` (the core install); tracing a torch
module to ONNX lives in :mod:`memnets.nn.onnx_encoder` (torch). The graphs are ONNX protobufs, not
pickles: loading one executes no code.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ONNX_DIR = "onnx"  # inside an encoder folder
ONNX_FILES = {
    "onnx": "model.onnx",
    "int8": "model_int8.onnx",
    "int8_vnni": "model_int8_vnni.onnx",
    "int8_vnni_ffn": "model_int8_vnni_ffn.onnx",
}
OPSET = 17
# How "int8" quantises the fused graph (docs/benchmarks.md, "Encoder backends"): 8-bit unsigned weights per
# output channel (u8 x u8 products: no saturation on AVX2, so no 7-bit reduce_range) on the MatMuls only,
# the fused Attention nodes (QKV projections, softmax) and the FFN down-projections (the widest
# activations, after GELU) left in float32. On the trained pack's encoder: mean cosine to the exact
# vectors 0.997 (256 LoCoMo turns) against 0.989 for full int8 at 7 bits, R@10 within 0.52 points on
# conv-49 and equal on conv-50.
# "int8_vnni" (docs/results/encoding-2026-12-02-vnni-under-load.md): signed 8-bit weights, the u8 x s8
# products that VNNI's VPDPBUSD computes in one instruction with 32-bit sums (no saturation there; on
# AVX2 the same products saturate 16-bit pairs, so the backend is offered only where VNNI is), per
# output channel, on the MatMuls and the fused Attention nodes (QAttention), the FFN down-projections
# still in float32. On a VNNI CPU's MiniLM, under load: 1.16x int8's texts/s at batch 64, 0.81x its
# batch-1 p50, mean cosine 0.9958 to the exact vectors (min 0.9905); R@10 of a trained pack 0.6 / 0.1
# points below exact on conv-49 (dense / learned) and 0.9 / 1.1 on conv-50 (docs/benchmarks.md).
# "int8_vnni_ffn": "int8_vnni" with the FFN down-projections in s8 too, all but the first layer's. Each
# layer's down-projection quantised alone cost MiniLM's mean cosine 0.0016 (layer 0), 0.0010 (layer 2),
# 0.0007 (layer 1) and at most 0.0003 (layers 3-5) on 1,024 LoCoMo turns; all six in s8 gave 0.9918,
# all but layer 0's 0.9934 (a trained pack's encoder: 0.9919 and 0.9934). docs/history.md, "The FFN
# down-projections in s8".
FP32_NODES = re.compile(r"layer\.\d+/output/dense/MatMul$")  # the FFN down-projections (not attention/output)
INT8_SETTINGS = {
    "int8": {
        "weight_type": "QUInt8",
        "per_channel": True,
        "reduce_range": False,
        "op_types": ("MatMul",),
        "fp32_nodes": FP32_NODES,
    },
    "int8_vnni": {
        "weight_type": "QInt8",
        "per_channel": True,
        "reduce_range": False,
        "op_types": ("MatMul", "Attention"),
        "fp32_nodes": FP32_NODES,
    },
    "int8_vnni_ffn": {
        "weight_type": "QInt8",
        "per_channel": True,
        "reduce_range": False,
        "op_types": ("MatMul", "Attention"),
        "fp32_nodes": re.compile(r"layer\.0/output/dense/MatMul$"),
    },
}
VNNI_BACKENDS = ("int8_vnni", "int8_vnni_ffn")  # s8 weights: offered only where the CPU has VNNI
# Fusions left out of the encoder graph, and ONNX Runtime's load-time transformers that would make them
# again: its SkipLayerNormalization (residual add + bias + LayerNorm in one node) and BiasGelu kernels
# took 4x the time of a plain Add + LayerNormalization and Add + Gelu on the same tensors (ORT 1.32's
# profiler, one thread, 256 LoCoMo turns at batch 64: 988 ms of a 2,802 ms s8 graph against 240 ms),
# a third of an int8 graph's time once its MatMuls are int8 (docs/history.md, "The FFN
# down-projections in s8, and the encoder's session around batch 1"). Attention and the embedding
# LayerNorm stay fused.
UNFUSED = ("enable_skip_layer_norm", "enable_bias_skip_layer_norm", "enable_bias_gelu")
UNFUSED_AT_LOAD = ["SkipLayerNormFusion", "BiasGeluFusion"]


def require_onnxruntime():
    """The onnxruntime module (a core dependency: the serving encoder runs on it)."""
    import onnxruntime

    return onnxruntime


def default_threads() -> int:
    """The intra-op threads of a session: torch's count where torch is loaded already (the threads its
    own passes use), else ``OMP_NUM_THREADS``, else the CPUs this process may run on."""
    if "torch" in sys.modules:
        return sys.modules["torch"].get_num_threads()
    given = os.environ.get("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def fp32_nodes(model_path: str | Path, backend: str = "int8") -> list[str]:
    """The nodes of a fused encoder graph that :func:`quantize_int8` leaves in float32 for ``backend``:
    those whose name matches its ``INT8_SETTINGS[backend]["fp32_nodes"]``."""
    import onnx

    pattern = INT8_SETTINGS[backend]["fp32_nodes"]
    return [node.name for node in onnx.load(str(model_path)).graph.node if pattern.search(node.name)]


def quantize_int8(fused: str | Path, target: str | Path, backend: str = "int8") -> Path:
    """Write ``target``: the fused float32 graph ``fused`` with ONNX Runtime's dynamic int8
    quantisation at ``INT8_SETTINGS[backend]`` (activations quantised per call at run time), the
    nodes :func:`fp32_nodes` picks, and every op type but those listed, kept in float32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    settings = INT8_SETTINGS[backend]
    quantize_dynamic(
        str(fused),
        str(target),
        weight_type=getattr(QuantType, settings["weight_type"]),
        per_channel=settings["per_channel"],
        reduce_range=settings["reduce_range"],
        op_types_to_quantize=list(settings["op_types"]),
        nodes_to_exclude=fp32_nodes(fused, backend),
        extra_options={"DefaultTensorType": 1},
    )
    return Path(target)


SPINNING_ENV = "MEMNETS_ONNX_SPINNING"  # "1": an encoder session's threads spin while it runs (see session_options)


def session_options(threads: int | None = None):
    """ONNX Runtime's settings for an encoder session: every graph optimisation, ``threads`` intra-op
    threads (default: :func:`default_threads`), and idle threads that sleep instead of spinning, unless the
    environment sets :data:`SPINNING_ENV` to ``"1"``: then they spin while a run lasts and stop at its end.

    Sleeping threads are the default because a spinning pool kept both cores busy after each call,
    so the torch, FAISS and SQLite work of the same query (or a concurrent request) waited for it
    (batch-1 p50 10.7 ms against 13.1 ms under load, texts/s at batch 64 equal). Where the cores serve
    the encoder alone, threads that spin during a run wake at once between its operators: a third
    off the batch-1 p50 on a quiet 2-core CPU, and 2.3-2.8x slower with other work on the cores
    (docs/history.md, "The FFN down-projections in s8, and the encoder's session around batch 1").
    """
    ort = require_onnxruntime()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads or default_threads()
    spinning = os.environ.get(SPINNING_ENV, "0")
    if spinning not in ("0", "1"):
        raise ValueError(f"{SPINNING_ENV} must be '0' or '1', got {spinning!r}")
    options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
    if spinning == "1":
        options.add_session_config_entry("session.force_spinning_stop", "1")  # no spinning between runs
    return options


class GraphSession:
    """One ONNX Runtime session of an encoder graph: token ids and mask in, its output (unit vectors) out.
    ``options`` (an ``onnxruntime.SessionOptions``) replaces :func:`session_options`' defaults; the
    session never makes the fusions of :data:`UNFUSED_AT_LOAD` (a graph that has them keeps them)."""

    def __init__(self, path: str | Path, *, threads: int | None = None, options=None) -> None:
        ort = require_onnxruntime()
        self.path = Path(path)
        self.session = ort.InferenceSession(
            str(path),
            options or session_options(threads),
            providers=["CPUExecutionProvider"],
            disabled_optimizers=UNFUSED_AT_LOAD,
        )

    def run(self, input_ids, attention_mask, **more):
        """The graph's first output for int64 ``[B, T]`` arrays (``more``: further inputs by name)."""
        import numpy as np

        feeds = {"input_ids": np.asarray(input_ids, dtype=np.int64), "attention_mask": np.asarray(attention_mask)}
        feeds.update({name: np.asarray(value, dtype=np.int64) for name, value in more.items()})
        return self.session.run(None, feeds)[0]
