"""The report's section on both stores through the store contract (bench/store.py)."""

from __future__ import annotations

from pathlib import Path

from bench.figures import fmt, size, table

TITLE = "Stores: embedded and PostgreSQL"


def write(payload: dict, out: Path, targets: list) -> list[str]:
    rows = payload["results"]["rows"]
    lines = [
        "Both stores through the store contract, in one run: bulk load (upsert in batches of 1,000) and one "
        "index build, batch-1 `search` (k=10) with and without a selective filter (kind, 1 memory in 100), "
        "recall@10 against exact search over the same vectors, then live upserts into the built index.",
        "",
        table(
            [
                "store",
                "n",
                "load s",
                "index build s",
                "bulk ingest /s",
                "live upsert /s",
                "search p50 ms",
                "search p99 ms",
                "recall@10",
                "filtered p50 ms",
                "filtered recall@10",
                "filtered filled",
                "bytes / vector",
            ],
            [
                [
                    row["store"],
                    size(row["n"]),
                    fmt(row["load_s"]),
                    fmt(row["index_build_s"]),
                    fmt(row["bulk_ingest_per_s"], 0),
                    fmt(row["live_upsert_per_s"], 0),
                    fmt(row["search"]["p50_ms"], 2),
                    fmt(row["search"]["p99_ms"], 2),
                    fmt(row["search"]["recall_at_10"], 3),
                    fmt(row["filtered"]["p50_ms"], 2),
                    fmt(row["filtered"]["recall_at_10"], 3),
                    fmt(row["filtered"]["filled"], 2),
                    fmt(row.get("bytes_per_vector"), 0),
                ]
                for row in rows
            ],
        ),
    ]
    sweeps = [
        f"{size(row['n'])}: "
        + ", ".join(
            f"ef_search={key[9:]} p50 {fmt(value['p50_ms'], 2)} ms recall@10 {fmt(value['recall_at_10'], 3)}"
            for key, value in row.items()
            if key.startswith("search_ef")
        )
        for row in rows
        if "search_ef100" in row
    ]
    if sweeps:
        default = payload["settings"].get("pg_hnsw", {}).get("ef_search_default", 40)
        lines += [
            "",
            f"PostgreSQL by `hnsw.ef_search` (the table's row ran at the store default, {default}): "
            + "; ".join(sweeps)
            + ".",
        ]
    filled = min(row["filtered"]["filled"] for row in rows)
    targets.append(
        [
            "store contract: a selective filter still returns k results (both stores)",
            f"filled {filled:.2f} of k",
            "met" if filled == 1.0 else "missed",
        ]
    )
    return lines
