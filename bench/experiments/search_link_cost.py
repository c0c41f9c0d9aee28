"""What a search's own likely replacements cost: search latency with and without them, one after the other.

One user holds every statement of the written validation pairs (older and newer, a month apart, through plain
``add`` with the judge memnets ships), and each pair's question is searched once (k = 5) with the search reading no
likely replacements (``query_threshold`` None), then once reading them as shipped, then once judging every pair in
the margin (no ``search_pairs`` bound), the judge's kept scores cleared before each, so every pair a search reads is
judged then. Printed and saved: p50 / p95 / max of each in ms, and how many pairs the searches read.

    python -m bench.experiments.search_link_cost --out docs/results
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import memnets
from bench.common import parser, write_result
from bench.fact_replay import START, WRITTEN_PAIRS, read_rows


class CountingJudge:
    """The judge, with the pairs it reads counted (a spy, not a mock)."""

    def __init__(self, judge):
        self.judge, self.threshold, self.read = judge, judge.threshold, 0

    def scores(self, pairs):
        self.read += len(pairs)
        return self.judge.scores(pairs)

    def score(self, older: str, newer: str) -> float:
        return self.scores([(older, newer)])[0]


def timed_searches(memory, questions: list[str]) -> list[float]:
    """Each question searched once for the user "u": its wall time in ms."""
    took = []
    for question in questions:
        began = time.perf_counter()
        memory.search(question, user="u", k=5)
        took.append(1000 * (time.perf_counter() - began))
    return took


def figures(took: list[float]) -> dict:
    ordered = sorted(took)
    return {
        "searches": len(took),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "max_ms": round(ordered[-1], 2),
    }


def main(argv=None) -> None:
    p = parser("experiments.search_link_cost", __doc__.splitlines()[0])
    p.add_argument("--name", default="search_link_cost")
    args = p.parse_args(argv)
    rows = [row for path in WRITTEN_PAIRS["validation"] for row in read_rows(Path(path))]
    if args.quick:
        rows = rows[:40]
    results = {}
    with tempfile.TemporaryDirectory() as folder, memnets.open(folder, supersession="auto") as memory:
        for n, row in enumerate(rows):
            memory.add(row["older"], user="u", t=START + timedelta(minutes=n))
            memory.add(row["newer"], user="u", t=START + timedelta(days=30, minutes=n))
        step = memory.supersession  # the write path's step, whose judge the searches read with
        questions = [row["question"] for row in rows]
        shipped, step.judge = step.query_threshold, CountingJudge(step.judge)
        timed_searches(memory, questions[:10])  # warm: the query encoder's first calls
        step.query_threshold = None
        results["without"] = figures(timed_searches(memory, questions))
        step.query_threshold = shipped
        step._judged.clear()
        step.judge.read = 0
        results["with"] = figures(timed_searches(memory, questions)) | {"pairs_judged": step.judge.read}
        step.search_pairs, step.judge.read = None, 0  # every pair in the margin: what the bound saves
        step._judged.clear()
        results["uncapped"] = figures(timed_searches(memory, questions)) | {"pairs_judged": step.judge.read}
        results["memories"] = len(memory.list_memories(user="u", limit=None))
    for key in ("without", "with", "uncapped"):
        print(f"{key:>8}: {results[key]}")
    print(f"wrote {write_result(args.out, args.name, {'pairs': len(rows), 'k': 5}, results)}")


if __name__ == "__main__":
    main()
