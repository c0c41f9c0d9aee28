"""`python -m bench` (or `memnets bench` from a checkout): run the benchmark scripts and write the report.

Each benchmark runs as its own process (``python -m bench.NAME --out OUT [--quick]``), so memory
held by one (a million vectors, an index) is gone before the next starts and RSS deltas are its
own. The scripts write ``OUT/NAME.json`` (their progress goes to ``OUT/logs/NAME.log``); this
command then writes ``OUT/report.md`` (tables and PNG plots in ``OUT/img/``) and
``OUT/results.json`` (all raw results, machine, versions, settings). A failing benchmark is
reported as such and does not stop the others.

The bench/ scripts live in the source tree, not in the installed wheel: run from the root of a
checkout. memnets never imports bench/; `memnets bench` starts this runner as a child process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench.common import DEFAULT_OUT, REPO_ROOT, script_env
from bench.report import write_report
from bench.sections import BENCHMARKS


def parse_only(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark(s) {unknown or value!r}; choose from {', '.join(BENCHMARKS)}"
        )
    return names


def run_benchmark(name: str, out: Path, quick: bool) -> tuple[bool, float, str]:
    """Run one script in a child process, its stderr (progress, errors) logged to OUT/logs/NAME.log;
    (succeeded, seconds, the last line of the log if it failed)."""
    command = [sys.executable, "-m", f"bench.{name}", "--out", str(out), *(["--quick"] if quick else [])]
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"memnets bench: {name} ... (log: {log})", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with log.open("w") as stream:
        code = subprocess.run(command, cwd=REPO_ROOT, env=script_env(), stderr=stream, check=False).returncode
    seconds = time.perf_counter() - start
    if code != 0:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        print(
            f"memnets bench: {name} FAILED (exit {code}) after {seconds:.0f} s:\n" + "\n".join(lines[-15:]),
            file=sys.stderr,
        )
        return False, seconds, lines[-1] if lines else f"exit {code}"
    print(f"memnets bench: {name} done in {seconds:.0f} s", file=sys.stderr)
    return True, seconds, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memnets bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a few minutes in all")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="folder for the report and raw JSON (default bench/results)",
    )
    parser.add_argument(
        "--only", type=parse_only, default=BENCHMARKS, help=f"comma-separated subset of {','.join(BENCHMARKS)}"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="do not run anything; rewrite the report from the JSON files already in --out",
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    failures, timings = {}, {}
    if not args.report_only:
        for name in args.only:
            (out / f"{name}.json").unlink(missing_ok=True)  # never report a stale result as this run's
            ok, seconds, error = run_benchmark(name, out, args.quick)
            timings[name] = seconds
            if not ok:
                failures[name] = error
    payloads = {}
    for name in args.only:
        path = out / f"{name}.json"
        if path.is_file():
            payloads[name] = json.loads(path.read_text()) | {"wall_s": timings.get(name)}
    if not payloads:
        print(f"memnets bench: no results in {out}", file=sys.stderr)
        return 1
    report = write_report(payloads, out, quick=args.quick, failures=failures)
    print(f"memnets bench: wrote {report} and {out / 'results.json'}", file=sys.stderr)
    return 1 if failures else 0
