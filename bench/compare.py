"""Two checkouts' benchmarks side by side, in one run on one machine: is the change any slower?

``python -m bench.compare --before REV [--after REV_OR_DIR] [--quick] [--rounds N] -- store api``

``--before`` (and ``--after``, default this checkout) is a git revision, checked out with ``git
worktree add`` in a temporary folder (removed afterwards), or the folder of a checkout. Each named
benchmark (``python -m bench.NAME --quick``, extra arguments with ``--with NAME="ARGS"``) runs from
each checkout in turn, its own code first on the path, interleaved: round 1 runs before then after,
round 2 after then before, and so on, so that neither side always runs on a warmer cache or a quieter
machine. Both checkouts share this checkout's embedding cache (bench/results/cache), so neither
computes the MiniLM vectors inside a timing.

Printed and saved (``--out``, default docs/results/compare-DATE.json and .md): per benchmark, every
timing figure of its JSON (keys ending ``_ms``, ``_s``, ``per_s``, ``qps``), the median over the
rounds on each side, and after / before, with which way is better. The machine's load before and
after is saved beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.common import CACHE_DIR, REPO_ROOT, machine, script_env
from bench.figures import table

LOWER_IS_BETTER = ("_ms", "_s")
HIGHER_IS_BETTER = ("per_s", "qps")
ROW_LABELS = ("store", "method", "n", "setting", "nprobe", "efSearch", "ef_search")  # what names a row of a list


def parse_with(value: str) -> tuple[str, list[str]]:
    """``NAME="ARGS"`` of --with: (NAME, ARGS split as a shell splits them)."""
    name, _, args = value.partition("=")
    if not name or not args:
        raise argparse.ArgumentTypeError(f'--with takes NAME="ARGS", got {value!r}')
    return name, shlex.split(args)


def checkout(spec: str, work: Path, label: str) -> tuple[Path, bool]:
    """(folder of the checkout, whether this run created it): a folder as it is, else a ``git worktree
    add`` of the revision ``spec`` under ``work``."""
    if Path(spec).is_dir():
        return Path(spec).resolve(), False
    folder = work / label
    done = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(folder), spec],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"python -m bench.compare: {spec!r} is neither a folder nor a revision: {done.stderr.strip()}")
    return folder, True


def share_cache(root: Path) -> None:
    """Point ``root``'s embedding cache at this checkout's, so the vectors are computed at most once."""
    cache = root / "bench" / "results" / "cache"
    if root == REPO_ROOT or cache.exists() or cache.is_symlink():
        return
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.symlink_to(CACHE_DIR, target_is_directory=True)


def run_once(root: Path, name: str, args: list[str], out: Path) -> dict:
    """``python -m bench.NAME ARGS --out OUT`` from ``root``; its JSON."""
    command = [sys.executable, "-m", f"bench.{name}", *args, "--out", str(out)]
    print(f"[compare] {root}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    subprocess.run(command, cwd=root, env=script_env(root), check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / f"{name}.json").read_text())


def timings(value, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], float]:
    """Every timing figure in a result, by its path (list items named by their store / method / size)."""
    found = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found |= timings(item, (*path, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            label = " ".join(f"{k}={item[k]}" for k in ROW_LABELS if k in item) if isinstance(item, dict) else ""
            found |= timings(item, (*path, label or str(i)))
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and path:
        if path[-1].endswith(LOWER_IS_BETTER + HIGHER_IS_BETTER):
            found[path] = float(value)
    return found


def better_when(key: str) -> str:
    """Which way a figure is better: "higher" for throughputs, "lower" for times."""
    return "higher" if key.endswith(HIGHER_IS_BETTER) else "lower"


def compare(runs: dict[str, dict[str, list[dict]]]) -> list[dict]:
    """Rows of (benchmark, figure, before, after, ratio): the medians over the rounds of each side."""
    rows = []
    for name, sides in runs.items():
        per_side = {side: [timings(payload["results"]) for payload in payloads] for side, payloads in sides.items()}
        for path in per_side["before"][0]:
            values = {side: [found[path] for found in rounds if path in found] for side, rounds in per_side.items()}
            if not values["before"] or not values["after"]:
                continue  # a figure only one side has (a new or removed measurement)
            before, after = statistics.median(values["before"]), statistics.median(values["after"])
            rows.append(
                {
                    "benchmark": name,
                    "figure": " / ".join(path),
                    "before": before,
                    "after": after,
                    "after_over_before": after / before if before else None,
                    "better": better_when(path[-1]),
                }
            )
    return rows


def markdown(rows: list[dict], header: dict) -> str:
    """The comparison as a Markdown table under a line saying what was compared, how, and the load."""
    lines = [
        f"before: {header['before']} ({header['before_commit']}); after: {header['after']} ({header['after_commit']}); "
        f"{header['rounds']} round(s), interleaved; medians; load {header['load_before']} -> {header['load_after']}",
        "",
    ]
    body = [
        [
            row["benchmark"],
            row["figure"],
            f"{row['before']:.4g}",
            f"{row['after']:.4g}",
            "-" if row["after_over_before"] is None else f"{row['after_over_before']:.2f}",
            row["better"],
        ]
        for row in rows
    ]
    return "\n".join(lines) + table(["benchmark", "figure", "before", "after", "after / before", "better"], body) + "\n"


def commit_of(root: Path) -> str:
    """The short commit of a checkout, with "+changes" when its tracked files differ from it."""
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return done.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="git revision or checkout folder measured as 'before'")
    p.add_argument("--after", default=str(REPO_ROOT), help="git revision or checkout folder (default: this checkout)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each benchmark per side, interleaved (default 2)")
    p.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    p.add_argument(
        "--with", dest="extra", type=parse_with, action="append", default=[], help='NAME="ARGS" for one benchmark'
    )
    p.add_argument(
        "--out", type=Path, default=None, help="JSON to write (default docs/results/compare-DATE.json; a .md beside it)"
    )
    p.add_argument("benchmarks", nargs="+", help="bench scripts to run from both checkouts, e.g. store api")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    extra = dict(args.extra)
    unknown = sorted(set(extra) - set(args.benchmarks))
    if unknown:
        p.error(f"--with names {unknown}, which are not among the benchmarks {args.benchmarks}")
    started = datetime.now(UTC)
    out = args.out or REPO_ROOT / "docs" / "results" / f"compare-{started:%Y-%m-%d-%H%M}.json"
    with tempfile.TemporaryDirectory(prefix="memnets-compare-") as folder:
        work = Path(folder)
        sides, created = {}, []
        try:
            for side, spec in (("before", args.before), ("after", args.after)):
                root, new = checkout(spec, work, side)
                sides[side] = root
                if new:
                    created.append(root)
                share_cache(root)
            load_before = os.getloadavg()
            runs = {name: {"before": [], "after": []} for name in args.benchmarks}
            for round_ in range(args.rounds):
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                for name in args.benchmarks:
                    options = [*(["--quick"] if args.quick else []), *extra.get(name, [])]
                    for side in order:
                        target = work / "out" / f"{side}-{round_}"
                        runs[name][side].append(run_once(sides[side], name, options, target))
            header = {
                "before": args.before,
                "after": args.after,
                "before_commit": commit_of(sides["before"]),
                "after_commit": commit_of(sides["after"]),
                "rounds": args.rounds,
                "arguments": {
                    name: [*(["--quick"] if args.quick else []), *extra.get(name, [])] for name in args.benchmarks
                },
                "load_before": [round(x, 2) for x in load_before],
                "load_after": [round(x, 2) for x in os.getloadavg()],
                "started": started.isoformat(timespec="seconds"),
                "machine": machine(),
            }
        finally:
            for root in created:
                subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(root)], check=False)
    rows = compare(runs)
    text = markdown(rows, header)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**header, "rows": rows, "runs": runs}, indent=1) + "\n")
    out.with_suffix(".md").write_text(text)
    print(text)
    print(f"wrote {out} and {out.with_suffix('.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
