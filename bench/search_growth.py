"""Search as an archive grows (``python -m bench.search --growth``): the default index,
``FaissRetriever(dim, "auto")`` as ``memnets.open`` builds it, fed the way an agent feeds it.

For each add size (1k, 100k, everything at once) one retriever grows to each checkpoint (10k,
100k, 300k, 1M memories; an add is cut at a checkpoint so that each one is reached exactly). At a
checkpoint, recall@10 against exact search and batch-1 p50 / p99 are measured twice: right after
the add (what an agent sees, background upkeep possibly in flight) and after ``wait()``. While it
grows, an "agent" thread searches at batch 1 every few milliseconds; its calls are split into those
made during a rebuild, during an add, and otherwise, so that a search stalled by a rebuild shows in
their p99 and maximum. The retriever's rebuilds (when, why, how long each phase: the copy and swap
under the lock, the build outside it) come from its log records. "Everything at once" builds a new
retriever at each checkpoint from one call.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time

import faiss
import numpy as np

from bench.common import K, latency_summary, recall_against, time_calls
from bench.vector_sets import CLUSTERS, DRIFT_SPREAD, LOOSE_SPREAD, QUERY_NOISE, TIGHT_SPREAD, VECTOR_SETS, vector_set

OWNER = "bench"
CHECKPOINTS = (10_000, 100_000, 300_000, 1_000_000)
QUICK_CHECKPOINTS = (10_000, 60_000)
ADDS = (1_000, 100_000, 0)  # 0: everything at once
QUICK_ADDS = (1_000, 10_000, 0)
RECALL_QUERIES = 1_000  # queries for recall@10 (a batch search)
LATENCY_CALLS = 200  # batch-1 calls for p50 / p99 at a checkpoint
SWEEP_NPROBES = (8, 16, 32, 64)  # at each checkpoint, recall@10 and p50 at these probe counts too (IVF)
SWEEP_CALLS = 100
AGENT_INTERVAL_S = 0.01  # the agent thread's pause between its batch-1 searches


def adds_label(adds: int) -> str:
    return "all at once" if adds == 0 else f"adds of {adds:,}"


class UpkeepLog(logging.Handler):
    """Collects the retriever's upkeep log records: rebuild start and end times and phases."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.events: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        upkeep = getattr(record, "upkeep", None)
        if upkeep is not None:
            self.events.append({**upkeep, "t": time.perf_counter()})

    def rebuilds(self, origin: float) -> list[dict]:
        """One entry per rebuild: start and end (s since origin), reason-free phases and result."""
        out, open_start = [], None
        for event in self.events:
            if event["event"] == "start":
                open_start = event["t"]
            elif open_start is not None:
                out.append(
                    {
                        "start_s": open_start - origin,
                        "end_s": event["t"] - origin,
                        **{k: v for k, v in event.items() if k not in ("t", "owner")},
                    }
                )
                open_start = None
        if open_start is not None:
            out.append({"start_s": open_start - origin, "end_s": None, "event": "unfinished"})
        return out


class Agent(threading.Thread):
    """Batch-1 searches every ``interval`` seconds until stopped; records (start, seconds) per call."""

    def __init__(self, retriever, queries: np.ndarray, interval: float) -> None:
        super().__init__(daemon=True, name="bench-agent")
        self.retriever, self.queries, self.interval = retriever, queries, interval
        self.calls: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.paused = threading.Event()  # set while a checkpoint is measured (its own timed calls)

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            if self.paused.is_set():
                self.stop.wait(self.interval)
                continue
            q = self.queries[i % len(self.queries)][None, :]
            start = time.perf_counter()
            self.retriever.search(q, K, OWNER)
            self.calls.append((start, time.perf_counter() - start))
            i += 1
            self.stop.wait(self.interval)


def exact_top(index: faiss.IndexFlatIP, queries: np.ndarray) -> list[list[str]]:
    _, found = index.search(queries, K)
    return [[f"m{i}" for i in row] for row in found]


def measure(retriever, queries: np.ndarray, truth: list[list[str]]) -> dict:
    """recall@10 (one batch search), batch-1 latency, and the owner's index as it is now."""
    in_flight, stats = not retriever.wait(timeout=0), retriever.stats(OWNER)  # a swap may follow
    found, _ = retriever.search(queries, K, OWNER)
    latency = time_calls(lambda q: retriever.search(q, K, OWNER), queries, LATENCY_CALLS)
    out = {
        "recall@10": recall_against(found, truth),
        "latency": latency,
        "upkeep_in_flight": in_flight,
        **{key: stats.get(key) for key in ("kind", "live", "trained_size", "nlist", "nprobe")},
    }
    if "nlist" in stats:  # what other probe counts would give on the same index, now
        out["by_nprobe"] = {
            p: {
                "recall@10": recall_against(retriever.search(queries, K, OWNER, nprobe=p)[0], truth),
                "p50_ms": time_calls(lambda q, p=p: retriever.search(q, K, OWNER, nprobe=p), queries, SWEEP_CALLS)[
                    "p50_ms"
                ],
            }
            for p in SWEEP_NPROBES
            if p != stats["nprobe"] and p <= stats["nlist"]
        }
    return out


def split_calls(calls: list[tuple[float, float]], rebuilds: list[dict], adds: list[tuple[float, float]], origin):
    """Agent calls by what ran when they started: a rebuild (its build or swap), an add, or nothing."""
    groups: dict[str, list[float]] = {"during a rebuild": [], "during an add": [], "otherwise": []}
    spans = [(r["start_s"] + origin, (r["end_s"] or 1e18) + origin) for r in rebuilds]
    for start, seconds in calls:
        if any(a <= start <= b for a, b in spans):
            groups["during a rebuild"].append(seconds)
        elif any(a <= start <= b for a, b in adds):
            groups["during an add"].append(seconds)
        else:
            groups["otherwise"].append(seconds)
    return {name: {**latency_summary(s), "max_ms": 1000 * max(s)} for name, s in groups.items() if s}


def grow(data: np.ndarray, queries_for, adds: int, checkpoints, *, agent: bool, exact_below: int | None = None) -> dict:
    """One add size: the retriever grown to every checkpoint, measured right after and after wait()
    on the queries ``queries_for(checkpoint)``."""
    from memnets.retrieval.faiss_retriever import FaissRetriever

    dim = data.shape[1]
    handler = UpkeepLog()
    retriever_log = logging.getLogger("memnets.retrieval.faiss_retriever")
    retriever_log.addHandler(handler)
    retriever_log.setLevel(logging.INFO)
    exact = faiss.IndexFlatIP(dim)
    retriever = FaissRetriever(dim, "auto", use_gpu=False, exact_below=exact_below)
    thread = Agent(retriever, queries_for(checkpoints[0]), AGENT_INTERVAL_S) if agent else None
    origin, done, add_spans, points = time.perf_counter(), 0, [], []
    try:
        if thread is not None:
            thread.start()
        for target in checkpoints:
            add_seconds = 0.0
            while done < target:
                stop = min(target, done + adds) if adds else target
                start = time.perf_counter()
                retriever.add([f"m{i}" for i in range(done, stop)], data[done:stop], OWNER)
                add_spans.append((start, time.perf_counter()))
                add_seconds += add_spans[-1][1] - start
                exact.add(data[done:stop])
                done = stop
            queries = queries_for(target)
            truth = exact_top(exact, queries)
            if thread is not None:
                thread.paused.set()
            after_add = measure(retriever, queries, truth)
            if thread is not None:
                thread.paused.clear()
            start = time.perf_counter()
            retriever.wait()  # the agent searches on while upkeep finishes
            waited = time.perf_counter() - start
            if thread is not None:
                thread.paused.set()
            after_wait = measure(retriever, queries, truth)
            if thread is not None:
                thread.paused.clear()
            point = {
                "n": target,
                "add_s": add_seconds,
                "t_s": time.perf_counter() - origin,
                "after_add": after_add,
                "wait_s": waited,
                "after_wait": after_wait,
            }
            points.append(point)
            log_point(adds, point)
    finally:
        if thread is not None:
            thread.stop.set()
            thread.join()
        retriever.wait()
        retriever_log.removeHandler(handler)
    rebuilds = handler.rebuilds(origin)
    out = {"adds": adds, "points": points, "rebuilds": rebuilds, "total_s": time.perf_counter() - origin}
    if thread is not None:
        out["agent"] = split_calls(thread.calls, rebuilds, add_spans, origin)
    return out


def all_at_once(data: np.ndarray, queries_for, checkpoints, exact_below: int | None = None) -> dict:
    """A new retriever per checkpoint, filled in one call (a bulk load: its index built in the add)."""
    from memnets.retrieval.faiss_retriever import FaissRetriever

    points = []
    for n in checkpoints:
        gc.collect()
        exact = faiss.IndexFlatIP(data.shape[1])
        exact.add(data[:n])
        queries = queries_for(n)
        truth = exact_top(exact, queries)
        del exact
        retriever = FaissRetriever(data.shape[1], "auto", use_gpu=False, exact_below=exact_below)
        start = time.perf_counter()
        retriever.add([f"m{i}" for i in range(n)], data[:n], OWNER)
        add_seconds = time.perf_counter() - start
        after_add = measure(retriever, queries, truth)
        start = time.perf_counter()
        retriever.wait()
        waited = time.perf_counter() - start
        point = {
            "n": n,
            "add_s": add_seconds,
            "after_add": after_add,
            "wait_s": waited,
            "after_wait": measure(retriever, queries, truth),
        }
        points.append(point)
        log_point(0, point)
        del retriever
    return {"adds": 0, "points": points, "rebuilds": []}


def log_point(adds: int, point: dict) -> None:
    a, w = point["after_add"], point["after_wait"]
    print(
        f"[growth] {adds_label(adds)} n={point['n']:,}: after add recall@10 {a['recall@10']:.3f} p50 "
        f"{a['latency']['p50_ms']:.2f} ms ({a['kind']}, nlist {a['nlist']}, nprobe {a['nprobe']}, trained "
        f"{a['trained_size']}, upkeep {'running' if a['upkeep_in_flight'] else 'idle'}); after wait "
        f"({point['wait_s']:.1f} s) recall@10 {w['recall@10']:.3f} p50 {w['latency']['p50_ms']:.2f} ms "
        f"(nlist {w['nlist']}, trained {w['trained_size']}); by nprobe after add "
        f"{a.get('by_nprobe')}; load {os.getloadavg()[0]:.2f}",
        file=sys.stderr,
        flush=True,
    )


def run_growth(
    real: tuple[np.ndarray, np.ndarray],
    checkpoints,
    adds_list,
    *,
    sets=VECTOR_SETS,
    agent: bool = True,
    exact_below: int | None = None,
):
    """Every vector set and add size over the checkpoints; returns (results, notes). ``real``: the
    LoCoMo (memory, question) vectors; ``exact_below``: the retriever's flat -> IVF switch (None:
    its default, AUTO_EXACT_BELOW)."""
    results = {"k": K, "checkpoints": list(checkpoints), "sets": {}}
    for name in sets:
        gc.collect()
        data, queries_for = vector_set(name, max(checkpoints), RECALL_QUERIES, real)
        runs = []
        for adds in adds_list:
            gc.collect()
            run = (
                all_at_once(data, queries_for, checkpoints, exact_below)
                if adds == 0
                else grow(data, queries_for, adds, checkpoints, agent=agent, exact_below=exact_below)
            )
            run["load"] = list(os.getloadavg())
            runs.append(run)
        results["sets"][name] = {"runs": runs}
        del data
    notes = [
        f"FaissRetriever(dim, 'auto') with its defaults (what memnets.open builds); recall@10 over "
        f"{RECALL_QUERIES:,} queries against exact search of the memories added so far; p50 / p99 of "
        f"{LATENCY_CALLS} batch-1 searches on one thread",
        "vector sets (bench/vector_sets.py): real = LoCoMo MiniLM vectors and noisy copies, LoCoMo questions "
        f"as queries; loose / tight = {CLUSTERS:,} Gaussian clusters in 384 dims, member noise {LOOSE_SPREAD} / "
        f"{TIGHT_SPREAD} of the centres' spread, shuffled; drift = the clusters at {DRIFT_SPREAD} in cluster "
        f"order (later adds from unseen clusters); synthetic queries: stored vectors plus noise {QUERY_NOISE}",
        "right after the add: what an agent sees at once (a background rebuild may be running); after "
        "wait(): once upkeep in flight has finished",
        f"agent: a thread searching at batch 1 every {AGENT_INTERVAL_S * 1000:.0f} ms while the archive "
        "grows, its calls split by what was running when they started",
    ]
    return results, notes


def growth_table(results: dict) -> str:
    """The Markdown table of a growth run: one row per add size and checkpoint."""
    from bench.figures import fmt, size, table

    rows = []
    for name, run in each_run(results):
        for point in run["points"]:
            a, w = point["after_add"], point["after_wait"]
            rows.append(
                [
                    name,
                    adds_label(run["adds"]),
                    size(point["n"]),
                    f"{a['recall@10']:.3f}",
                    fmt(a["latency"]["p50_ms"], 2),
                    fmt(a["latency"]["p99_ms"], 2),
                    f"{a['nlist'] or '-'} / {a['nprobe'] or '-'} / {size(a['trained_size'])}",
                    "yes" if a["upkeep_in_flight"] else "no",
                    fmt(point["wait_s"]),
                    f"{w['recall@10']:.3f}",
                    fmt(w["latency"]["p50_ms"], 2),
                    f"{w['nlist'] or '-'} / {w['nprobe'] or '-'} / {size(w['trained_size'])}",
                ]
            )
    return table(
        [
            "data",
            "adds",
            "n",
            "recall@10 after add",
            "p50 ms",
            "p99 ms",
            "lists / nprobe / trained at",
            "rebuild running",
            "wait s",
            "recall@10 after wait",
            "p50 ms",
            "lists / nprobe / trained at",
        ],
        rows,
    )


def rebuild_table(results: dict) -> str:
    """The rebuilds of each grown run and the agent's batch-1 searches during them."""
    from bench.figures import fmt, size, table

    rows = []
    for name, run in each_run(results):
        for r in run["rebuilds"]:
            phases = [r.get(key) for key in ("copy_s", "build_s", "replay_s", "swap_s")]
            rows.append(
                [
                    name,
                    adds_label(run["adds"]),
                    fmt(r["end_s"]),
                    size(r.get("trained_size") or 0) if r.get("trained_size") else r["event"],
                    fmt(r.get("copy_s"), 2),
                    fmt(r.get("build_s")),
                    fmt(r.get("replay_s"), 2),
                    fmt(r.get("replayed")),
                    fmt(r.get("swap_s"), 2),
                    fmt(r.get("replayed_under_lock")),
                    fmt(sum(phases)) if None not in phases else "-",
                ]
            )
    header = ["data", "adds", "swapped in at s", "rebuilt at", "copy s (lock)", "build s", "replay s", "replayed"]
    lines = [table([*header, "swap s (lock)", "replayed under lock", "whole s"], rows)]
    agent_rows = [
        [data, adds_label(run["adds"]), name, s["calls"], fmt(s["p50_ms"], 2), fmt(s["p99_ms"], 2), fmt(s["max_ms"], 1)]
        for data, run in each_run(results)
        for name, s in run.get("agent", {}).items()
    ]
    if agent_rows:
        lines += ["", table(["data", "adds", "agent search", "calls", "p50 ms", "p99 ms", "max ms"], agent_rows)]
    return "\n".join(lines)


def each_run(results: dict):
    """(vector set, run) pairs of a growth result, in order."""
    return [(name, run) for name, entry in results["sets"].items() for run in entry["runs"]]
