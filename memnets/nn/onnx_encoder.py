"""The encoder's fast inference paths on ONNX Runtime: the exact graph (``"onnx"``), its int8
version (``"int8"``) and, for CPUs with VNNI, int8 versions made for the VNNI kernels
(``"int8_vnni"``, and ``"int8_vnni_ffn"`` with more of its MatMuls in int8).

``export_onnx`` turns a :class:`~memnets.nn.encoder.MemoryEncoder`'s whole ``forward`` (backbone,
mean pooling, projection, L2 normalisation) into one ONNX graph with ``torch.onnx.export``
(eager attention, so that ONNX Runtime's BERT optimizer can fuse attention and the embedding
LayerNorm), fuses it (not the residual LayerNorms and GELU: :data:`UNFUSED`), and for the int8
backends quantises most of its weights to 8 bits (per channel; see :data:`INT8_SETTINGS`) with ONNX
Runtime's dynamic quantisation (activations quantised per batch at run time). The files are ONNX
protobufs, not pickles: loading them executes no code. ``OnnxRunner`` runs one.

ONNX Runtime and onnx are core dependencies (the serving encoder, :mod:`memnets.nn.serving_encoder`,
builds its graphs without torch); torch's exporter needs onnxscript, of the ``[onnx]`` extra.
"""

from __future__ import annotations

import copy
import logging
import tempfile
from pathlib import Path

import torch

from memnets.nn.onnx_runtime import (
    FP32_NODES,
    INT8_SETTINGS,
    ONNX_DIR,
    ONNX_FILES,
    OPSET,
    SPINNING_ENV,
    UNFUSED,
    VNNI_BACKENDS,
    GraphSession,
    fp32_nodes,
    quantize_int8,
    require_onnxruntime,
    session_options,
)

logger = logging.getLogger(__name__)


class _Forward(torch.nn.Module):
    """The encoder's forward with its two inputs named, for the exporter."""

    def __init__(self, encoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids, attention_mask)


def export_onnx(encoder, folder: str | Path, backend: str) -> Path:
    """Write ``folder/onnx/`` + :data:`ONNX_FILES` ``[backend]`` (``"onnx"``, ``"int8"``, ``"int8_vnni"``
    or ``"int8_vnni_ffn"``) for ``encoder`` and return its path. Takes seconds for MiniLM."""
    if backend not in ONNX_FILES:
        raise ValueError(f"export_onnx: backend must be one of {sorted(ONNX_FILES)}, got {backend!r}")
    require_onnxruntime()
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    out = Path(folder) / ONNX_DIR
    out.mkdir(parents=True, exist_ok=True)
    config = encoder.backbone.config
    with tempfile.TemporaryDirectory(prefix="memnets-onnx-") as scratch:
        raw, fused = Path(scratch) / "raw.onnx", Path(scratch) / "fused.onnx"
        trace_onnx(encoder, raw)
        fusions = FusionOptions("bert")
        for name in UNFUSED:
            setattr(fusions, name, False)
        optimized = optimize_model(
            str(raw),
            model_type="bert",
            num_heads=config.num_attention_heads,
            hidden_size=config.hidden_size,
            optimization_options=fusions,
        )
        logger.info("fused the encoder graph: %s", optimized.get_fused_operator_statistics())
        target = out / ONNX_FILES[backend]
        if backend == "onnx":
            optimized.save_model_to_file(str(target))
        else:
            optimized.save_model_to_file(str(fused))
            quantize_int8(fused, target, backend)
    return target


def trace_onnx(encoder, target: str | Path) -> Path:
    """Write ``target``: the encoder's forward traced to ONNX as it is, before ONNX Runtime's BERT
    optimizer fuses it (eager attention, so that the optimizer can)."""
    # The same weights with eager attention (fusable). An encoder that already runs on ONNX Runtime
    # holds a session, which cannot be copied: the copy goes without it (only forward is traced).
    exported = copy.deepcopy(encoder, memo={id(encoder._runner): None}).eval()
    exported.backbone.set_attn_implementation("eager")
    sample = encoder.tokenize(["an example memory to trace the graph with", "and a second one"])
    with torch.inference_mode():
        torch.onnx.export(
            _Forward(exported),
            (sample["input_ids"], sample["attention_mask"]),
            str(target),
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding"],
            dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}},
            opset_version=OPSET,
            dynamo=False,
        )
    return Path(target)


class OnnxRunner(GraphSession):
    """:class:`~memnets.nn.onnx_runtime.GraphSession` with torch tensors in and out (the MemoryEncoder's runner)."""

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.run(input_ids.numpy(), attention_mask.numpy()))


# the runtime's names re-exported: the encoder, the benchmarks and the tests import them from here
__all__ = [
    "FP32_NODES", "INT8_SETTINGS", "ONNX_DIR", "ONNX_FILES", "SPINNING_ENV", "VNNI_BACKENDS", "OnnxRunner",
    "export_onnx", "fp32_nodes", "quantize_int8", "require_onnxruntime", "session_options", "trace_onnx",
]  # fmt: skip
