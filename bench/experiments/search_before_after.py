"""Search latency of two checkouts in one process, interleaved call type by call type: is a change slower?

``python -m bench.experiments.search_before_after --before FOLDER [--after FOLDER] [--rounds N]``

``bench.compare`` runs each side's benchmark as a subprocess, one after the other; calls of a few
hundred microseconds then move by 10-20 % with what else the machine runs in between. Here both
checkouts' ``memnets`` are imported into this one process (each import's modules are kept apart
and put back in ``sys.modules`` before that side runs, so imports made inside functions resolve to
the same checkout), each side builds the same stores from the same vectors, and the calls alternate
side by side in small blocks: before, after, after, before, ... Printed: per call, the median over
every call on each side and after / before (``search_before_after.json`` and ``.md`` under ``--out``).

The calls are those of ``bench.store`` and ``bench.api`` that moved between f6ce896 and the store
core of issue 30:

- ``archive search`` / ``archive filtered``: ``Archive.search(vector, 10, owner)`` over one owner's
  ``--memories`` memories (default 10,000, bench.store --quick's size), without a filter and with
  ``kind = "plan"`` (1 memory in 100);
- ``api search`` / ``api search_kind`` / ``api search_metadata``: ``AgentMemory.search(question,
  user=..., k=5)`` over 3 users of ``--per-user`` memories (default 1,000, bench.api --quick's
  size; one in 50 a plan, a ``topic`` of 0-9), with no filter, ``{"kind": "plan"}`` and
  ``{"metadata": {"topic": 3}}``, through an encoder that looks the query vectors up (the API's
  path without the encoder);
- ``api search_reranked``: the same search re-ranked by a LearnedScorer (default weights, no
  importance head), as a pack's scorer re-ranks: ``fetch_factor * k`` candidates and their vectors.

Vectors are random unit vectors (d=384): what is timed is everything but the ranking's quality.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.common import REPO_ROOT, parser, single_thread, write_result

DIM = 384
START = datetime(2024, 1, 1, tzinfo=UTC)
USERS = 3
BLOCK = 20  # calls of one kind per side before the other side runs the same calls
_IN_USE: list[dict] = []  # the modules dict of the checkout whose modules are in sys.modules


class LookupEncoder:
    """Pre-computed query vectors by text: the API's search without the encoder's cost."""

    dim, tokenizer, fingerprint = DIM, None, f"bench-lookup:{DIM}"

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table

    def encode(self, texts, kind: str = "memory"):
        return np.stack([self.table[text] for text in texts])


def import_checkout(root: Path) -> dict:
    """The ``memnets`` modules of the checkout at ``root``, imported apart from any other checkout's."""
    _stash()
    sys.path.insert(0, str(root))
    try:
        import memnets.api
        import memnets.records
        import memnets.scoring
        import memnets.store  # noqa: F401
    finally:
        sys.path.remove(str(root))
    modules = {n: m for n, m in sys.modules.items() if n == "memnets" or n.startswith("memnets.")}
    _IN_USE[:] = [modules]
    return modules


def use(modules: dict) -> None:
    """Put one checkout's modules (from :func:`import_checkout`) in ``sys.modules``, so that imports
    inside its functions find them."""
    _stash()
    sys.modules.update(modules)
    _IN_USE[:] = [modules]


def _stash() -> None:
    """Take the ``memnets`` modules out of ``sys.modules``, keeping those imported since (inside the
    checkout's functions) in the dict of the checkout in use, so that none is imported twice."""
    names = [n for n in sys.modules if n == "memnets" or n.startswith("memnets.")]
    if _IN_USE:
        _IN_USE[0].update((n, sys.modules[n]) for n in names)
    for name in names:
        del sys.modules[name]


def memories(memory_class, first: int, last: int, owner: str, plan_every: int) -> list:
    return [
        memory_class(
            id=f"bulk-{i}",
            owner=owner,
            t=START + timedelta(minutes=i),
            content=f"memory text number {i} about the day",
            importance=0.5,
            kind="plan" if i % plan_every == 0 else "observation",
            metadata={"topic": i % 10},
        )
        for i in range(first, last)
    ]


def build(modules: dict, folder: Path, vectors: np.ndarray, per_user: int, queries: dict) -> dict:
    """One side's stores: the archive of ``bench.store`` and the AgentMemory of ``bench.api``; its calls."""
    use(modules)
    Memory = modules["memnets.records"].Memory
    open_store = modules["memnets.store"].open_store
    AgentMemory = modules["memnets.api"].AgentMemory
    archive = open_store(folder / "archive", DIM)
    n = len(vectors) - USERS * per_user
    for first in range(0, n, 2_000):
        last = min(n, first + 2_000)
        archive.upsert(memories(Memory, first, last, "owner", 100), vectors[first:last])
    api_store = open_store(folder / "api", DIM)
    for u in range(USERS):
        first = n + u * per_user
        api_store.upsert(memories(Memory, first, first + per_user, f"user{u}", 50), vectors[first : first + per_user])
    encoder = LookupEncoder(queries)
    memory = AgentMemory(api_store, encoder, owns_store=True)
    scoring = modules["memnets.scoring"]
    reranked = AgentMemory(api_store, encoder, scorer=scoring.LearnedScorer(encoder, scoring.ScorerWeights()))
    texts = list(queries)
    calls = {
        "archive search": lambda i: archive.search(queries[texts[i]], 10, "owner"),
        "archive filtered": lambda i: archive.search(queries[texts[i]], 10, "owner", filters={"kind": "plan"}),
        "api search": lambda i: memory.search(texts[i], user=f"user{i % USERS}", k=5),
        "api search_kind": lambda i: memory.search(texts[i], user=f"user{i % USERS}", k=5, filters={"kind": "plan"}),
        "api search_metadata": lambda i: memory.search(
            texts[i], user=f"user{i % USERS}", k=5, filters={"metadata": {"topic": 3}}
        ),
        "api search_reranked": lambda i: reranked.search(texts[i], user=f"user{i % USERS}", k=5),
    }
    for call in calls.values():  # warm up: the indexes caught up, the caches filled
        call(0)
    return {"calls": calls, "close": lambda: (archive.close(), memory.close())}


def timed_block(call, indices) -> list[float]:
    out = []
    for i in indices:
        start = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - start)
    return out


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.search_before_after", __doc__)
    p.add_argument("--before", type=Path, required=True, help="the folder of the checkout compared against")
    p.add_argument(
        "--after", type=Path, default=REPO_ROOT, help="the folder of the changed checkout (default: this one)"
    )
    p.add_argument("--memories", type=int, default=10_000, help="the archive's memories (default 10000)")
    p.add_argument("--per-user", type=int, default=1_000, help="memories per API user (default 1000)")
    p.add_argument("--queries", type=int, default=None, help="queries per round (default 200; --quick 60)")
    p.add_argument("--rounds", type=int, default=None, help="rounds over the queries (default 5; --quick 2)")
    args = p.parse_args(argv)
    count = args.queries or (60 if args.quick else 200)
    rounds = args.rounds or (2 if args.quick else 5)
    rng = np.random.default_rng(0)

    def unit(n: int) -> np.ndarray:
        v = rng.normal(size=(n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    vectors = unit(args.memories + USERS * args.per_user)
    queries = {f"question {i}": q for i, q in enumerate(unit(count))}
    sides = {"before": import_checkout(args.before.resolve()), "after": import_checkout(args.after.resolve())}
    work = Path(tempfile.mkdtemp(prefix="memnets-before-after-"))
    built = {}
    try:
        for label, modules in sides.items():
            built[label] = build(modules, work / label, vectors, args.per_user, queries)
        times = {label: {name: [] for name in built[label]["calls"]} for label in sides}
        with single_thread():
            for r in range(rounds):
                for name in built["before"]["calls"]:
                    for start in range(0, count, BLOCK):
                        indices = range(start, min(count, start + BLOCK))
                        order = ("before", "after") if (r + start // BLOCK) % 2 == 0 else ("after", "before")
                        for label in order:
                            use(sides[label])
                            times[label][name] += timed_block(built[label]["calls"][name], indices)
    finally:
        for label in built:
            use(sides[label])
            built[label]["close"]()
        shutil.rmtree(work, ignore_errors=True)
    results = {}
    for name in times["before"]:
        before, after = (1000 * statistics.median(times[label][name]) for label in ("before", "after"))
        results[name] = {"before_p50_ms": before, "after_p50_ms": after, "ratio": after / before}
    settings = {
        "before": str(args.before),
        "after": str(args.after),
        "memories": args.memories,
        "per_user": args.per_user,
        "users": USERS,
        "queries": count,
        "rounds": rounds,
    }
    notes = ["p50 over every call of both sides, interleaved in blocks of 20 calls; ratio = after / before"]
    path = write_result(args.out, "search_before_after", settings, results, notes)
    lines = ["| call | before p50 ms | after p50 ms | after / before |", "|---|---|---|---|"]
    lines += [
        f"| {name} | {row['before_p50_ms']:.3f} | {row['after_p50_ms']:.3f} | {row['ratio']:.2f} |"
        for name, row in results.items()
    ]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {path} and {path.with_suffix('.md')}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
