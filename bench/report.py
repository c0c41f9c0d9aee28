"""The benchmark report: Markdown tables, PNG plots and one combined JSON.

``write_report(results, out)`` takes the payloads the scripts wrote (``{name: payload}``, any of
``bench.sections.BENCHMARKS``; missing ones are reported as not run), has each benchmark's section
module (``bench.sections.NAME``) write its section and targets, and writes ``out/report.md``,
``out/results.json`` and ``out/img/bench_*.png``.
"""

from __future__ import annotations

import importlib
import json
from datetime import UTC, datetime
from pathlib import Path

from bench.figures import table
from bench.sections import BENCHMARKS


def header_lines(payloads: dict, quick: bool) -> list[str]:
    first = next(iter(payloads.values()))
    m, v = first["machine"], first["versions"]
    lines = [
        "# memnets benchmarks",
        "",
        f"Written by `memnets bench{' --quick' if quick else ''}` on "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} from the benchmark results in its output "
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


def write_report(
    payloads: dict[str, dict], out: Path, *, quick: bool = False, failures: dict[str, str] | None = None
) -> Path:
    """Write report.md, results.json and the plots for the given payloads; returns the report path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    failures = failures or {}
    if not payloads:
        raise ValueError("write_report: no benchmark results to report")
    unknown = set(payloads) - set(BENCHMARKS)
    if unknown:
        raise ValueError(f"write_report: unknown benchmark results {sorted(unknown)}; expected some of {BENCHMARKS}")
    targets: list[list[str]] = []
    body: list[str] = []
    for name in BENCHMARKS:
        section = importlib.import_module(f"bench.sections.{name}")
        body += [f"## {section.TITLE}", ""]
        if name not in payloads:
            body += [f"Not run{': ' + failures[name] if name in failures else ''}.", ""]
            continue
        payload = payloads[name]
        body += section.write(payload, out, targets)
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
