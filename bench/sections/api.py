"""The report's section on memnets.open with many users (bench/api.py)."""

from __future__ import annotations

from pathlib import Path

from bench.figures import fmt, size, table

TITLE = "memnets.open: add and search with many users"


def write(payload: dict, out: Path, targets: list) -> list[str]:
    r = payload["results"]
    calls = [
        ("add", "add"),
        ("search", "search"),
        ("search, kind filter", "search_kind"),
        ("search, metadata filter", "search_metadata"),
        ("encode one memory", "encode_memory"),
        ("encode one query", "encode_query"),
    ]
    lines = [
        f"`memnets.open` with {r['users']} users x {size(r['per_user'])} memories each in one embedded store "
        f"(bulk-loaded at {fmt(r['ingest_per_s'], 0)} memories/s). `add` and `search` (k={r['k']}) through "
        "`AgentMemory` with pre-computed vectors, so without the encoder; the encoder's cost per text beside "
        "them (untrained backbone, one thread). An add costs add + encode one memory, a search costs "
        "search + encode one query.",
        "",
        table(
            ["call", "p50 ms", "p99 ms", "mean ms", "calls"],
            [
                [name, fmt(r[key]["p50_ms"], 2), fmt(r[key]["p99_ms"], 2), fmt(r[key]["mean_ms"], 2), r[key]["calls"]]
                for name, key in calls
            ],
        ),
    ]
    total = r["search"]["p50_ms"] + r["encode_query"]["p50_ms"]
    targets.append(
        [
            f"api: search p50 at {size(r['per_user'])} memories per user, {r['users']} users, encoder included",
            f"{fmt(total, 1)} ms",
            "measured",
        ]
    )
    return lines
