"""The report's section on encoding speed: every MemoryEncoder backend beside sentence-transformers'
torch, ONNX and ONNX-int8 paths (bench/encoding.py), with the targets of issue 34 (memnets' fastest against sentence-transformers'
fastest, in one run)."""

from __future__ import annotations

from pathlib import Path

from bench.figures import fmt, table

TITLE = "Encoding speed"
# issue 34: memnets' fastest side against sentence-transformers' fastest (bench.encoding's ratios)
THROUGHPUT_TARGET_X = 1.25  # texts/s at batch 64, at least
P50_TARGET_X = 0.8  # batch-1 p50, at most


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
    for line in r.get("header", []):  # the CPU's instruction sets, auto's choice, fp16/bf16
        lines.append(f"- {line}")
    ratios = r.get("ratios") or {}
    if "texts_per_s" in ratios:
        best = ratios["texts_per_s"]
        targets.append(
            [
                f"encoding: memnets' fastest >= {THROUGHPUT_TARGET_X:g}x sentence-transformers' fastest texts/s at batch 64",
                f"{best['ratio']:.2f}x ({best['memnets']} / {best['st']})",
                "met" if best["ratio"] >= THROUGHPUT_TARGET_X else "missed",
            ]
        )
    if "p50" in ratios:
        quick = ratios["p50"]
        targets.append(
            [
                f"encoding: memnets' batch-1 p50 <= {P50_TARGET_X:g}x sentence-transformers' lowest",
                f"{quick['ratio']:.2f}x ({quick['memnets']} / {quick['st']})",
                "met" if quick["ratio"] <= P50_TARGET_X else "missed",
            ]
        )
    return lines
