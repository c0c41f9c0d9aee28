"""The report's section on the memory manager's cost as the archive grows (bench/manager.py)."""

from __future__ import annotations

from pathlib import Path

from bench.figures import fmt, plt, save_plot, size, style_axes, table
from bench.sections import TARGET_N

TITLE = "Memory manager as the archive grows"


def write(payload: dict, out: Path, targets: list) -> list[str]:
    r = payload["results"]
    rows = r["rows"]
    lines = [
        table(
            [
                "archived",
                "index",
                "ingest s",
                "ingest mem/s",
                "observe p50 ms",
                "observe p99 ms",
                "query p50 ms",
                "query p99 ms",
                "recall pre-encoded p50 ms",
                "archive search p50 ms",
                "RSS delta MB",
            ],
            [
                [
                    size(row["n"]),
                    row["index"],
                    fmt(row["ingest_s"]),
                    fmt(row["ingested"] / row["ingest_s"]) if row["ingest_s"] > 0 else "-",
                    fmt(row["observe"]["p50_ms"]),
                    fmt(row["observe"]["p99_ms"]),
                    fmt(row["query"]["p50_ms"]),
                    fmt(row["query"]["p99_ms"]),
                    fmt(row["recall_pre_encoded"]["p50_ms"], 2),
                    fmt(row["archive_search"]["p50_ms"], 2),
                    fmt(row["rss_delta_mb"], 0),
                ]
                for row in rows
            ],
        )
    ]
    if r["growth"]:
        lines += [
            "",
            "Growth between sizes (a ratio below the size ratio is sublinear):",
            "",
            table(
                ["from", "to", "size x", "query p50 x", "recall pre-encoded p50 x", "archive search p50 x"],
                [
                    [
                        size(g["from"]),
                        size(g["to"]),
                        fmt(g["size_x"]),
                        f"{g['query_p50_x']:.2f}",
                        f"{g['recall_pre_encoded_p50_x']:.2f}",
                        f"{g['search_p50_x']:.2f}",
                    ]
                    for g in r["growth"]
                ],
            ),
        ]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ns = [row["n"] for row in rows]
    for key, label in (
        ("observe", "observe"),
        ("query", "query (recall)"),
        ("recall_pre_encoded", "recall, pre-encoded query"),
        ("archive_search", "archive search"),
    ):
        ax.plot(ns, [row[key]["p50_ms"] for row in rows], marker="o", label=label)
    style_axes(ax, "archived memories", "p50 ms per call", log_y=True)
    lines += ["", f"![manager cost]({save_plot(fig, out, 'manager')})"]
    by_n = {row["n"]: row for row in rows}
    if 10_000 in by_n and TARGET_N in by_n:
        ratio = by_n[TARGET_N]["query"]["p50_ms"] / by_n[10_000]["query"]["p50_ms"]
        bare = by_n[TARGET_N]["recall_pre_encoded"]["p50_ms"] / by_n[10_000]["recall_pre_encoded"]["p50_ms"]
        targets.append(
            [
                "manager: query time grows sublinearly from 10k to 1M (ratio < 100)",
                f"query p50 x{ratio:.2f}, pre-encoded recall p50 x{bare:.2f} for 100x memories",
                "met" if ratio < 100 and bare < 100 else "missed",
            ]
        )
    else:
        targets.append(
            ["manager: query time grows sublinearly from 10k to 1M", "10k and 1M not both run", "not measured"]
        )
    return lines
