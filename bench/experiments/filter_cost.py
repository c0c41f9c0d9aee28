"""One user's expensive filter against another user's search latency (issue 35, break 6).

A store evaluates a metadata filter in Python on every candidate row of the user, under its lock,
so another user's search waits for it. The second security review found a ``$in`` of 200,000
values: another user's search took 0.02 s alone and 16.4 s meanwhile. memnets now bounds a filter
(docs/memory.md, "Filters": 128 clauses, 1,000 values per operand, ``$and``/``$or`` 8 deep) and
matches ``$in``/``$nin`` through a hash set.

One embedded Archive (SQLite + FAISS) holds ``--heavy-rows`` memories of user "heavy" (each with a
``tag``) and ``--other-rows`` of user "other". For each filter, a thread runs ``--repeats`` searches
of "heavy" with it back to back while the main thread times searches of "other" (no filter); the
same is timed with no heavy thread ("alone"). Filters:

- ``review``: the review's ``{"metadata": {"tag": {"$in": [200,000 values]}}}`` (refused now);
- ``bound``: the most expensive filter still allowed: 128 ``$nin`` clauses of 1,000 values on the
  field every row has (``$nin`` of absent values holds, so no clause cuts the evaluation short).

The script uses only ``Archive``, ``upsert``, ``search`` and ``MemoryFilter.parse``, so it runs
unchanged in an older checkout for the "before" figures::

    python -m bench.experiments.filter_cost --label after --out docs/results
    PYTHONPATH=/path/to/old/checkout python -m bench.experiments.filter_cost --label before --out docs/results
"""

from __future__ import annotations

import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.common import parser, write_result

FILTERS = {
    "review": {"metadata": {"tag": {"$in": [f"absent-{i}" for i in range(200_000)]}}},
    "bound": {"metadata": {"$and": [{"tag": {"$nin": [f"absent-{c}-{i}" for i in range(1_000)]}} for c in range(128)]}},
}


def build(folder: Path, heavy_rows: int, other_rows: int, dim: int):
    """The archive with both users' memories (random unit vectors); returns it open."""
    from memnets.records import Memory
    from memnets.store.archive import Archive

    rng = np.random.default_rng(0)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    archive = Archive(folder, dim)
    for owner, rows in (("heavy", heavy_rows), ("other", other_rows)):
        vectors = rng.normal(size=(rows, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        memories = [
            Memory(
                id=f"{owner}-{i}",
                owner=owner,
                t=t0 + timedelta(seconds=i),
                content=f"memory {i} of {owner}",
                metadata={"tag": f"t{i % 50}"},
            )
            for i in range(rows)
        ]
        archive.upsert(memories, vectors)
    return archive


def other_latencies(archive, query: np.ndarray, until: threading.Event | None, count: int) -> list[float]:
    """Seconds of searches of user "other": ``count`` of them, and on until ``until`` is set (when given)."""
    times: list[float] = []
    while len(times) < count or (until is not None and not until.is_set()):
        start = time.perf_counter()
        archive.search(query, 10, "other")
        times.append(time.perf_counter() - start)
    return times


def run_filter(archive, query: np.ndarray, spec: dict, repeats: int) -> dict:
    """The other user's latency while user "heavy" searches with ``spec`` ``repeats`` times; or why it was refused."""
    from memnets.store.filters import MemoryFilter

    try:
        parsed = MemoryFilter.parse(spec)
    except ValueError as error:
        return {"refused": str(error)}
    done = threading.Event()
    heavy: list[float] = []

    def search_heavy() -> None:
        for _ in range(repeats):
            start = time.perf_counter()
            archive.search(query, 10, "heavy", filters=parsed)
            heavy.append(time.perf_counter() - start)
        done.set()

    worker = threading.Thread(target=search_heavy)
    worker.start()
    times = other_latencies(archive, query, done, 1)
    worker.join()
    return {
        "heavy_search_s": float(np.median(heavy)),
        "other_searches": len(times),
        "other_p50_s": float(np.median(times)),
        "other_max_s": float(max(times)),
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("filter_cost", __doc__.splitlines()[0])
    p.add_argument("--heavy-rows", type=int, default=100, help="memories of the user with the expensive filter")
    p.add_argument("--other-rows", type=int, default=1_000, help="memories of the other user")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2, help="searches of the heavy user per filter")
    p.add_argument("--label", default="after", help="names the result file: filter_cost-<label>.json")
    args = p.parse_args(argv)
    rng = np.random.default_rng(1)
    query = rng.normal(size=args.dim).astype(np.float32)
    query /= np.linalg.norm(query)
    with tempfile.TemporaryDirectory(prefix="memnets-filter-cost-") as folder:
        archive = build(Path(folder) / "archive", args.heavy_rows, args.other_rows, args.dim)
        try:
            alone = other_latencies(archive, query, None, 50)
            results = {"alone": {"other_p50_s": float(np.median(alone)), "other_max_s": float(max(alone))}}
            print(f"{args.label}: other user's search alone: p50 {np.median(alone) * 1e3:.1f} ms")
            for name, spec in FILTERS.items():
                row = results[name] = run_filter(archive, query, spec, args.repeats)
                if "refused" in row:
                    print(f"{args.label}: filter {name!r}: refused: {row['refused']}")
                else:
                    print(
                        f"{args.label}: filter {name!r}: heavy search {row['heavy_search_s']:.3f} s; other user's "
                        f"search meanwhile p50 {row['other_p50_s'] * 1e3:.1f} ms, max {row['other_max_s'] * 1e3:.1f} ms "
                        f"({row['other_searches']} searches)"
                    )
        finally:
            archive.close()
    settings = {k: getattr(args, k) for k in ("heavy_rows", "other_rows", "dim", "repeats", "label")}
    path = write_result(args.out, f"filter_cost-{args.label}", settings, results)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
