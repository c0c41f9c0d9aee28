"""The report's section on memnets' encoder against sentence-transformers (bench/encoding.py)."""

from __future__ import annotations

from pathlib import Path

from bench.figures import fmt, table

TITLE = "Encoding speed"


def write(payload: dict, out: Path, targets: list) -> list[str]:
    s = payload["settings"]
    lines = [
        f"Model: {s['model']}; texts: the first {s['texts']} LoCoMo turns; batch size {s['batch_size']}; "
        f"{s['repeats']} interleaved repetitions per side (order alternating); memories/s and the ratio from "
        "each side's best repetition (noise on a shared machine only adds time), and the median of the "
        "paired per-repetition ratios.",
        "",
    ]
    rows = []
    for run in payload["results"]["runs"]:
        mps = run["memories_per_s"]
        rows.append(
            [
                run["device"],
                fmt(mps["memnets"]),
                fmt(mps["sentence-transformers"]),
                f"{run['ratio_memnets_over_st']:.2f}",
                f"{run['paired_ratio_median']:.2f}",
                " / ".join(f"{x:.2f}" for x in run["seconds"]["memnets"]),
                " / ".join(f"{x:.2f}" for x in run["seconds"]["sentence-transformers"]),
                f"{run['max_abs_diff']:.1e}",
            ]
        )
        targets.append(
            [
                f"encoding on {run['device']}: memnets / sentence-transformers >= 1.0",
                f"{run['ratio_memnets_over_st']:.2f}",
                "met" if run["ratio_memnets_over_st"] >= 1.0 else "missed",
            ]
        )
    lines.append(
        table(
            [
                "device",
                "memnets (mem/s)",
                "sentence-transformers (mem/s)",
                "ratio (best)",
                "ratio (paired median)",
                "memnets s per rep",
                "ST s per rep",
                "max abs diff",
            ],
            rows,
        )
    )
    return lines
