"""The report's section on encoding speed: every MemoryEncoder backend beside sentence-transformers'
torch, ONNX and ONNX-int8 paths (bench/encoding.py), with the fast path's targets."""

from __future__ import annotations

from pathlib import Path

from bench.figures import fmt, table

TITLE = "Encoding speed"
FAST = "memnets-int8"  # the fast CPU path the targets are about
THROUGHPUT_TARGET_X = 2.0  # texts/s at batch 64, against sentence-transformers' torch path


def write(payload: dict, out: Path, targets: list) -> list[str]:
    s, r = payload["settings"], payload["results"]
    sides = r["sides"]
    lines = [
        f"Model: {s['model']}; texts: the first {s['texts']} LoCoMo turns; {s['repeats']} interleaved repetitions "
        f"(side order rotating). texts/s: every text at batch {s['batch_size']}, best repetition; batch 1: "
        f"{s['single']} texts one per call, over all repetitions. Cosine: to the exact torch vectors of the "
        "same library.",
        "",
        table(
            ["side", "texts/s (batch 64)", "batch-1 p50 ms", "batch-1 p99 ms", "cosine mean", "cosine min"],
            [
                [
                    name,
                    fmt(side["texts_per_s"], 0),
                    fmt(side["single"]["p50_ms"], 2),
                    fmt(side["single"]["p99_ms"], 2),
                    f"{side['cosine_to_exact']['mean']:.4f}",
                    f"{side['cosine_to_exact']['min']:.4f}",
                ]
                for name, side in sides.items()
            ],
        ),
        "",
        f"memnets torch and sentence-transformers torch differ by at most "
        f"{r['max_abs_diff_memnets_torch_vs_st_torch']:.1e} (the same computation).",
    ]
    fast, st_torch, st_int8 = sides.get(FAST), sides.get("st-torch"), sides.get("st-onnx-int8")
    if fast and st_torch:
        ratio = fast["texts_per_s"] / st_torch["texts_per_s"]
        targets.append(
            [
                f"encoding: {FAST} >= {THROUGHPUT_TARGET_X:g}x sentence-transformers torch texts/s at batch 64",
                f"{ratio:.2f}x",
                "met" if ratio >= THROUGHPUT_TARGET_X else "missed",
            ]
        )
    if fast and st_int8:
        targets.append(
            [
                f"encoding: {FAST} batch-1 p50 <= sentence-transformers ONNX-int8",
                f"{fast['single']['p50_ms']:.2f} ms vs {st_int8['single']['p50_ms']:.2f} ms",
                "met" if fast["single"]["p50_ms"] <= st_int8["single"]["p50_ms"] else "missed",
            ]
        )
    return lines
