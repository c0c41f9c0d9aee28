"""The benchmark report: Markdown tables, PNG plots (matplotlib, Agg) and one combined JSON.

``write_report(results, out)`` takes the payloads the scripts wrote (``{name: payload}``, any of
quality, encoding, search, manager, training; missing ones are reported as not run) and writes
``out/report.md``, ``out/results.json`` and ``out/img/bench_*.png``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

SECTIONS = ("quality", "encoding", "search", "manager", "store", "api", "training")
IMG_DIR = "img"
SEARCH_P50_TARGET_MS = 2.0
SEARCH_RECALL_TARGET = 0.95
SEARCH_BUILD_TARGET_S = 120.0
SEARCH_DELETE_TARGET_MS = 50.0
TARGET_N = 1_000_000


def table(header: list[str], rows: list[list]) -> str:
    """A Markdown table (right-aligned numbers)."""
    align = ["---:" if rows and all(_numeric(r[i]) for r in rows) else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _numeric(value) -> bool:
    if isinstance(value, (int, float)):
        return True
    return (
        isinstance(value, str)
        and value.replace(".", "", 1).replace(",", "").replace("-", "", 1).replace("x", "").strip().isdigit()
    )


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return "-"
    if isinstance(value, int) or (isinstance(value, float) and value >= 1000):
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def size(n: int) -> str:
    return (
        f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)
    )


def style_axes(ax, xlabel: str, ylabel: str, *, log_y: bool = False, legend_size: int = 7) -> None:
    """The look every plot shares: log x axis (sizes, k, latency), labels, light grid, small legend."""
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size)


def save_plot(fig, out: Path, name: str) -> str:
    """Save a figure under out/img/ and return its relative path for the Markdown."""
    (out / IMG_DIR).mkdir(parents=True, exist_ok=True)
    path = out / IMG_DIR / f"bench_{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return f"{IMG_DIR}/{path.name}"


def header_lines(payloads: dict, quick: bool) -> list[str]:
    first = next(iter(payloads.values()))
    m, v = first["machine"], first["versions"]
    lines = [
        "# memnets benchmarks",
        "",
        f"Written by `memnets bench{' --quick' if quick else ''}` on "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from the benchmark results in its output "
        "folder (each benchmark's finish time is listed below). Every number comes from those runs; rerun the "
        "command to reproduce them. Raw results: `results.json` next to this report.",
        "",
        "## Machine and versions",
        "",
        table(
            ["item", "value"],
            [
                ["CPU", m["cpu"]],
                ["cores", m["cores"]],
                ["RAM (GB)", m["ram_gb"]],
                ["GPU", m["gpu"] or "none"],
                ["OS", m["os"]],
                ["Python", m["python"]],
                ["torch threads", m["torch_threads"]],
                *[[name, version or "-"] for name, version in v.items()],
            ],
        ),
        "",
        "Load average (1, 5, 15 min) when each benchmark finished — the machine is shared, so timings "
        "taken under load are slower and noisier than on an idle machine:",
        "",
        table(
            ["benchmark", "finished (UTC)", "load average"],
            [
                [name, p["finished_at"], " / ".join(str(x) for x in p["machine"]["loadavg"])]
                for name, p in payloads.items()
            ],
        ),
        "",
    ]
    return lines


def quality_section(payload: dict, out: Path, targets: list) -> list[str]:
    r = payload["results"]
    reports = r["reports"]
    lines = [
        f"Split `{r['split']}` ({', '.join(r['conversations'])}), QA categories 1-4, LoCoMo rule: per question, "
        "recall@k is the share of its evidence turns in the top k of its own conversation's turns.",
        "",
    ]
    if not reports:
        return lines + ["No retriever was evaluated."]
    first = next(iter(reports.values()))
    ks = [m for m in first["overall"] if m.startswith("recall@")]
    metrics = ks + ["mrr@10", "ndcg@10"]
    lines.append(f"Questions: {first['counts']['questions']}. Values in %.")
    lines.append("")
    lines.append(
        table(
            ["retriever", *[m.replace("recall", "R") for m in metrics], "seconds"],
            [
                [name, *[fmt(100 * rep["overall"][m]) for m in metrics], fmt(rep["seconds"])]
                for name, rep in reports.items()
            ],
        )
    )
    categories = sorted({c for rep in reports.values() for c in rep["by_category"]}, key=int)
    names = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
    lines += [
        "",
        "Recall@10 per category (questions):",
        "",
        table(
            [
                "retriever",
                *[f"{c} {names.get(c, '')} ({first['counts'].get('category_' + c, '')})" for c in categories],
            ],
            [
                [
                    name,
                    *[
                        fmt(100 * rep["by_category"][c]["recall@10"]) if c in rep["by_category"] else "-"
                        for c in categories
                    ],
                ]
                for name, rep in reports.items()
            ],
        ),
    ]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    k_values = [int(m.split("@")[1]) for m in ks]
    for name, rep in reports.items():
        ax.plot(k_values, [100 * rep["overall"][m] for m in ks], marker="o", label=name)
    style_axes(ax, "k", "recall@k (%)")
    ax.set_xticks(k_values, [str(k) for k in k_values])
    ax.set_title(f"LoCoMo {r['split']} split, categories 1-4")
    lines += ["", f"![recall@k curves]({save_plot(fig, out, 'quality_recall')})"]
    return lines


def encoding_section(payload: dict, out: Path, targets: list) -> list[str]:
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


def search_section(payload: dict, out: Path, targets: list) -> list[str]:
    r = payload["results"]
    rows = r["rows"]
    main = [row for row in rows if row.get("default", True)]  # exact rows, and each index at its default setting
    sweeps = [row for row in rows if "chosen" in row]

    def setting(row: dict) -> str:
        return (
            f"nprobe={row['nprobe']}" if "nprobe" in row else f"efSearch={row['efSearch']}" if "efSearch" in row else ""
        )

    lines = [
        (
            f"k = {r['k']}. Latency: batch 1 (one query per call), p50 / p99. Throughput: queries per second "
            f"of one batch of {payload['settings']['batch']} queries (brute force at 1M: a quarter of it). "
            "Recall@10 against exact search (FaissRetriever flat). Approximate indexes are shown at the "
            "retriever's default nprobe / efSearch for the size (full sweep below). Build = add (a new owner's "
            "first batch builds and trains its index) + first search."
        ),
        "",
    ]
    table_rows = []
    for row in main:
        per_memory = row.get("index_bytes_per_memory")
        table_rows.append(
            [
                size(row["n"]),
                row["method"] + (" = auto" if row.get("auto_default") else ""),
                setting(row),
                fmt(row["build_s"]),
                fmt(row["memory_mb"], 0),
                fmt(per_memory, 0) if per_memory is not None else "",
                fmt(row["latency"]["p50_ms"], 3),
                fmt(row["latency"]["p99_ms"], 3),
                row["latency"]["calls"],
                fmt(row["throughput"]["qps"], 0),
                row["throughput"]["batch"],
                f"{row['recall@10']:.3f}",
            ]
        )
    lines.append(
        table(
            [
                "n",
                "method",
                "setting",
                "build s",
                "memory MB",
                "index B/memory",
                "p50 ms",
                "p99 ms",
                "calls",
                "q/s",
                "batch",
                "recall@10",
            ],
            table_rows,
        )
    )
    deleted = [row for row in main if "delete" in row]
    if deleted:
        lines += [
            "",
            "After deleting memories (same index, default setting; nothing rebuilt before the first search):",
            "",
            table(
                [
                    "n",
                    "method",
                    "deleted",
                    "remove ms",
                    "first search ms",
                    "p50 ms after",
                    "deleted returned",
                    "rows short of k",
                    "tombstones",
                    "compaction s",
                ],
                [
                    [
                        size(row["n"]),
                        row["method"],
                        f"{row['delete']['deleted']:,}",
                        fmt(row["delete"]["remove_ms"], 1),
                        fmt(row["delete"]["first_search_ms"], 2),
                        fmt(row["delete"]["latency_after"]["p50_ms"], 3),
                        row["delete"]["deleted_returned"],
                        row["delete"]["short_rows"],
                        f"{row['delete']['tombstones']:,}",
                        fmt(row["delete"]["compact_s"], 1) if "compact_s" in row["delete"] else "",
                    ]
                    for row in deleted
                ],
            ),
        ]
    if sweeps:
        lines += [
            "",
            "Sweep of the approximate indexes (nprobe / efSearch given per search):",
            "",
            table(
                ["n", "method", "setting", "p50 ms", "p99 ms", "q/s", "recall@10"],
                [
                    [
                        size(row["n"]),
                        row["method"],
                        setting(row) + (" (default)" if row.get("default") else ""),
                        fmt(row["latency"]["p50_ms"], 3),
                        fmt(row["latency"]["p99_ms"], 3),
                        fmt(row["throughput"]["qps"], 0),
                        f"{row['recall@10']:.3f}",
                    ]
                    for row in sweeps
                ],
            ),
        ]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for method in dict.fromkeys(row["method"].split(" (")[0] for row in main):
        points = sorted((row["n"], row["latency"]["p50_ms"]) for row in main if row["method"].split(" (")[0] == method)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=method)
    ax.axhline(
        SEARCH_P50_TARGET_MS, color="grey", linestyle="--", linewidth=0.8, label=f"{SEARCH_P50_TARGET_MS:g} ms target"
    )
    style_axes(ax, "memories", "p50 latency, batch 1 (ms)", log_y=True)
    lines += ["", f"![search latency]({save_plot(fig, out, 'search_latency')})"]
    if sweeps:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for key in dict.fromkeys((row["method"], row["n"]) for row in sweeps):
            points = [row for row in sweeps if (row["method"], row["n"]) == key]
            ax.plot(
                [p["latency"]["p50_ms"] for p in points],
                [p["recall@10"] for p in points],
                marker="o",
                label=f"{key[0].replace('FaissRetriever ', '')} n={size(key[1])}",
            )
        ax.axhline(SEARCH_RECALL_TARGET, color="grey", linestyle="--", linewidth=0.8)
        style_axes(ax, "p50 latency, batch 1 (ms)", "recall@10 vs exact", legend_size=6)
        lines += ["", f"![recall against latency]({save_plot(fig, out, 'search_sweep')})"]
    search_target = f"search at 1M: p50 <= {SEARCH_P50_TARGET_MS:g} ms at batch 1 with recall@10 >= {SEARCH_RECALL_TARGET} (defaults)"
    build_target = f"index build at 1M (add + first search) <= {SEARCH_BUILD_TARGET_S:g} s (defaults)"
    delete_target = f"first search after deleting 1,000 at 1M <= {SEARCH_DELETE_TARGET_MS:g} ms, none returned"
    default = next((row for row in main if row["n"] == TARGET_N and row.get("auto_default")), None)
    if default is None:
        targets += [[target, "1M not run", "not measured"] for target in (search_target, build_target, delete_target)]
        return lines
    met = default["latency"]["p50_ms"] <= SEARCH_P50_TARGET_MS and default["recall@10"] >= SEARCH_RECALL_TARGET
    targets.append(
        [
            search_target,
            (
                f"{default['method']} {setting(default)}: p50 {default['latency']['p50_ms']:.2f} "
                f"ms, recall@10 {default['recall@10']:.3f}"
            ),
            "met" if met else "missed",
        ]
    )
    targets.append(
        [
            build_target,
            f"{default['build_s']:.0f} s",
            "met" if default["build_s"] <= SEARCH_BUILD_TARGET_S else "missed",
        ]
    )
    gone = default.get("delete")
    if gone:
        met = (
            gone["first_search_ms"] <= SEARCH_DELETE_TARGET_MS
            and gone["deleted_returned"] == 0
            and gone["short_rows"] == 0
        )
        targets.append(
            [
                delete_target,
                (
                    f"{gone['deleted']:,} deleted: first search {gone['first_search_ms']:.2f} ms, "
                    f"{gone['deleted_returned']} returned, {gone['short_rows']} rows short"
                ),
                "met" if met else "missed",
            ]
        )
    return lines


def manager_section(payload: dict, out: Path, targets: list) -> list[str]:
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


def store_section(payload: dict, out: Path, targets: list) -> list[str]:
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


def api_section(payload: dict, out: Path, targets: list) -> list[str]:
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


def training_section(payload: dict, out: Path, targets: list) -> list[str]:
    r = payload["results"]
    log = r.get("from_training_log")
    logged = (
        [
            "",
            f"The last real fit's own log (`{log['path']}`): {fmt(log['pairs_per_second'])} pairs/s over "
            f"{log['pairs_seen']} pairs in {fmt(log['train_step_seconds'])} s of training steps "
            f"({log['epochs_trained']} epochs, fit {fmt(log['fit_seconds'])} s).",
        ]
        if log
        else ["", "No training log at checkpoints/encoder/best/training.json: only the timed run above."]
    )
    return [
        "Timed run of the real training step (EncoderModule + RetrievalDataModule from the config, "
        "Lightning Trainer, no validation or checkpoints); the first step is warm-up and not counted.",
        "",
        table(
            [
                "config",
                "batch",
                "hard negatives",
                "max length",
                "steps timed",
                "median step s",
                "pairs/s",
                "texts/s",
                "train pairs",
                "epoch min (est.)",
            ],
            [
                [
                    r["config"],
                    r["batch_size"],
                    r["hard_negatives"],
                    r["max_length"],
                    r["steps"] - 1,
                    fmt(r["median_step_s"], 2),
                    fmt(r["pairs_per_s"]),
                    fmt(r["texts_per_s"]),
                    r["train_pairs"],
                    fmt(r["epoch_minutes_estimate"]),
                ]
            ],
        ),
    ] + logged


TITLES = {
    "quality": "Retrieval quality",
    "encoding": "Encoding speed",
    "search": "Vector search at scale",
    "manager": "Memory manager as the archive grows",
    "store": "Stores: embedded and PostgreSQL",
    "api": "memnets.open: add and search with many users",
    "training": "Encoder training speed",
}
WRITERS: dict[str, Callable[[dict, Path, list], list[str]]] = {
    "quality": quality_section,
    "encoding": encoding_section,
    "search": search_section,
    "manager": manager_section,
    "store": store_section,
    "api": api_section,
    "training": training_section,
}


def write_report(
    payloads: dict[str, dict], out: Path, *, quick: bool = False, failures: dict[str, str] | None = None
) -> Path:
    """Write report.md, results.json and the plots for the given payloads; returns the report path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    failures = failures or {}
    if not payloads:
        raise ValueError("write_report: no benchmark results to report")
    unknown = set(payloads) - set(SECTIONS)
    if unknown:
        raise ValueError(f"write_report: unknown benchmark results {sorted(unknown)}; expected some of {SECTIONS}")
    targets: list[list[str]] = []
    body: list[str] = []
    for name in SECTIONS:
        body += [f"## {TITLES[name]}", ""]
        if name not in payloads:
            body += [f"Not run{': ' + failures[name] if name in failures else ''}.", ""]
            continue
        payload = payloads[name]
        body += WRITERS[name](payload, out, targets)
        body += [""] + [f"- {note}" for note in payload.get("notes", [])] + [""]
    lines = header_lines(payloads, quick)
    lines += [
        "## Targets",
        "",
        table(["target", "measured", "verdict"], targets) if targets else "No target measured.",
        "",
    ]
    report = out / "report.md"
    report.write_text("\n".join(lines + body).rstrip() + "\n")
    (out / "results.json").write_text(
        json.dumps({"quick": quick, "failures": failures, "benchmarks": payloads}, indent=1) + "\n"
    )
    return report
