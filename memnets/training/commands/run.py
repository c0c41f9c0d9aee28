"""`memnets run -c pipeline/cpu`: the whole pipeline from one config.

A pipeline config is data: named steps in order, each the argv of one `memnets` command
(prepare data, fit the encoder and both heads, export the pack, evaluate). Each step runs as its
own process (`python -m memnets ...`), so that a DDP step can launch its ranks as it would from a
shell, and a failure stops the run with the step's name and exit code. The GPU pipeline is the same
command with another config. The config is a file or a packaged config name (see memnets.training.configs).

Every run records its timing table in checkpoints/run.json (``--record``), rewritten after each
step so that a stopped run leaves what it did: per step its argv, seconds and status, and the
machine (CPU model, cores, instruction sets, torch's threads), so runs on two machines compare.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.table import Table

from memnets.commands.options import DATA_HELP, add_data_option
from memnets.console import CommandParser, add_output_options, parse_args, print_table
from memnets.machine import describe
from memnets.training.configs import load_config

DEFAULT_RECORD = Path("checkpoints") / "run.json"


def load_steps(path: str | Path) -> list[tuple[str, list[str]]]:
    """[(name, argv)] from a pipeline YAML `steps: {name: [memnets argv ...], ...}`, in file order.

    Steps are a mapping so that a pipeline can start from another with `base:` and replace only the
    steps that differ (pipeline/gpu is pipeline/cpu with the GPU encoder config).
    """
    config = load_config(path)
    steps = config.get("steps")
    if not isinstance(steps, dict) or not steps:
        raise ValueError(f"{path}: expected a non-empty mapping under 'steps' (step name: [memnets argv ...])")
    parsed = []
    for name, argv in steps.items():
        if not (isinstance(argv, list) and argv):
            raise ValueError(f"{path}: step {name!r} should be a non-empty list of memnets arguments, got {argv!r}")
        parsed.append((str(name), [str(arg) for arg in argv]))
    return parsed


# the commands whose steps read conversations, and so take `memnets run --data FILE`
READS_CONVERSATIONS = {
    ("data", "prepare"),
    ("fit",),
    ("eval", "retrieval"),
    ("eval", "heads"),
    ("export",),
    ("replay",),
    ("baseline", "st-mnrl"),
}


def with_data(argv: list[str], data: Path | None) -> list[str]:
    """A step's argv with ``--data FILE`` appended when the step reads conversations and a file was given."""
    if data is None or not {tuple(argv[:1]), tuple(argv[:2])} & READS_CONVERSATIONS:
        return argv
    return [*argv, "--data", str(data)]


def select(
    steps: list[tuple[str, list[str]]], start: str | None, only: list[str] | None, path: str
) -> list[tuple[str, list[str]]]:
    names = [name for name, _ in steps]
    for name in ([start] if start else []) + (only or []):
        if name not in names:
            raise ValueError(f"{path}: no step {name!r}; steps are {names}")
    if start:
        steps = steps[names.index(start) :]
    if only:
        steps = [step for step in steps if step[0] in only]
    return steps


def parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-c",
        "--config",
        default="pipeline/cpu",
        help="pipeline YAML file or packaged config name (default pipeline/cpu)",
    )
    parser.add_argument("--from", dest="start", default=None, help="start at this step (resume)")
    parser.add_argument("--only", nargs="+", default=None, help="run only these steps")
    parser.add_argument("--dry-run", action="store_true", help="print the steps without running them")
    parser.add_argument(
        "--record",
        type=Path,
        default=DEFAULT_RECORD,
        help=f"JSON file of the run's timing table and machine (default {DEFAULT_RECORD})",
    )
    add_data_option(parser, DATA_HELP + "; passed to every step that reads conversations")
    return add_output_options(parser)


def main(argv: list[str]) -> int:
    command = parser()
    args = parse_args(command, argv)
    try:
        steps = select(load_steps(args.config), args.start, args.only, args.config)
    except (OSError, ValueError) as error:
        command.error(str(error))

    timings: list[tuple[str, list[str], float, int]] = []
    started_at = datetime.now(UTC)
    for name, step_argv in steps:
        step_argv = with_data(step_argv, args.data)
        command = [sys.executable, "-m", "memnets", *step_argv]
        print(f"\n=== step {name}: memnets {' '.join(step_argv)}", flush=True)
        if args.dry_run:
            continue
        started = time.perf_counter()
        code = subprocess.call(command)
        timings.append((name, step_argv, time.perf_counter() - started, code))
        write_record(args.record, args.config, started_at, timings, [n for n, _ in steps[len(timings) :]])
        if code != 0:
            print(
                f"memnets run: step {name!r} failed with exit code {code}; resume with --from {name}", file=sys.stderr
            )
            break
    if timings:
        table = Table(title=f"pipeline {args.config} (timings in {args.record})")
        for column in ("step", "seconds", "status"):
            table.add_column(column, justify="right" if column == "seconds" else "left")
        for name, _, seconds, code in timings:
            table.add_row(name, f"{seconds:.0f}", status(code))
        table.add_row("total", f"{sum(t for _, _, t, _ in timings):.0f}", "")
        print_table(table)
    return next((code for *_, code in timings if code != 0), 0)


def status(code: int) -> str:
    return "ok" if code == 0 else f"failed ({code})"


def write_record(
    path: Path, config: str, started_at: datetime, timings: list[tuple[str, list[str], float, int]], pending: list[str]
) -> None:
    """The run so far as JSON at ``path`` (see the module docstring); ``pending``: the steps not run yet."""
    import torch  # here, not at import: `memnets run --help` stays fast

    record = {
        "config": config,
        "started_at": started_at.isoformat(),
        "total_s": round(sum(seconds for _, _, seconds, _ in timings), 1),
        "steps": [
            {"step": name, "argv": argv, "seconds": round(seconds, 1), "status": status(code)}
            for name, argv, seconds, code in timings
        ]
        + [{"step": name, "argv": None, "seconds": None, "status": "not run"} for name in pending],
        "machine": {
            **describe(),
            "torch_threads": torch.get_num_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
