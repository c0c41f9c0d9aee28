"""The encoder's fast inference paths on ONNX Runtime: the exact graph (``"onnx"``) and its int8
version (``"int8"``).

``export_onnx`` turns a :class:`~memnets.nn.encoder.MemoryEncoder`'s whole ``forward`` (backbone,
mean pooling, projection, L2 normalisation) into one ONNX graph with ``torch.onnx.export``
(eager attention, so that ONNX Runtime's BERT optimizer can fuse attention, LayerNorm and GELU),
fuses it, and for ``"int8"`` quantises its weights to int8 (per channel, 7 bits) with ONNX
Runtime's dynamic quantisation (activations quantised per batch at run time). The files are ONNX protobufs, not
pickles: loading them executes no code. ``OnnxRunner`` runs one.

ONNX Runtime, onnx and onnxscript come with the ``[onnx]`` extra; without them these functions
raise an ImportError that names it.
"""

from __future__ import annotations

import copy
import logging
import tempfile
from pathlib import Path

import numpy as np
import torch

logger = logging.getLogger(__name__)

ONNX_DIR = "onnx"  # inside an encoder folder
ONNX_FILES = {"onnx": "model.onnx", "int8": "model_int8.onnx"}
OPSET = 17


def require_onnxruntime():
    """The onnxruntime module, or an ImportError naming the extra to install."""
    try:
        import onnxruntime
    except ImportError:
        raise ImportError(
            "the encoder backends 'onnx' and 'int8' need ONNX Runtime of the extra [onnx]: pip install 'memnets[onnx]'"
        ) from None
    return onnxruntime


class _Forward(torch.nn.Module):
    """The encoder's forward with its two inputs named, for the exporter."""

    def __init__(self, encoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids, attention_mask)


def export_onnx(encoder, folder: str | Path, backend: str) -> Path:
    """Write ``folder/onnx/model.onnx`` (``backend="onnx"``) or ``folder/onnx/model_int8.onnx``
    (``"int8"``) for ``encoder`` and return its path. Takes seconds for MiniLM."""
    if backend not in ONNX_FILES:
        raise ValueError(f"export_onnx: backend must be one of {sorted(ONNX_FILES)}, got {backend!r}")
    require_onnxruntime()
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    out = Path(folder) / ONNX_DIR
    out.mkdir(parents=True, exist_ok=True)
    config = encoder.backbone.config
    exported = copy.deepcopy(encoder).eval()  # the same weights with eager attention (fusable)
    exported.backbone.set_attn_implementation("eager")
    sample = encoder.tokenize(["an example memory to trace the graph with", "and a second one"])
    with tempfile.TemporaryDirectory(prefix="memnets-onnx-") as scratch:
        raw, fused = Path(scratch) / "raw.onnx", Path(scratch) / "fused.onnx"
        with torch.inference_mode():
            torch.onnx.export(
                _Forward(exported),
                (sample["input_ids"], sample["attention_mask"]),
                str(raw),
                input_names=["input_ids", "attention_mask"],
                output_names=["embedding"],
                dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}},
                opset_version=OPSET,
                dynamo=False,
            )
        optimized = optimize_model(
            str(raw), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size
        )
        logger.info("fused the encoder graph: %s", optimized.get_fused_operator_statistics())
        target = out / ONNX_FILES[backend]
        if backend == "onnx":
            optimized.save_model_to_file(str(target))
        else:
            optimized.save_model_to_file(str(fused))
            # int8 weights per output channel in 7 bits: full-range int8 saturates the u8 x s8 products of
            # AVX2 / AVX-512 without VNNI (measured on MiniLM and 256 LoCoMo turns: mean cosine to the exact
            # vectors 0.991 this way, 0.853 with per-tensor 7-bit weights, 0.954 with full-range int8)
            quantize_dynamic(
                str(fused),
                str(target),
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=True,
                extra_options={"DefaultTensorType": 1},
            )
    return target


class OnnxRunner:
    """One ONNX Runtime session of an exported encoder: token ids and mask in, unit vectors out."""

    def __init__(self, path: str | Path, *, threads: int | None = None) -> None:
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or torch.get_num_threads()
        self.path = Path(path)
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        feeds = {"input_ids": input_ids.numpy().astype(np.int64), "attention_mask": attention_mask.numpy()}
        return torch.from_numpy(self.session.run(None, feeds)[0])
