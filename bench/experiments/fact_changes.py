"""A user's day of fact changes, replayed through ``memnets.open``: every current fact must be the latest one.

Held-out by construction (hand-written here, not LoCoMo): one user tells the memory, in the course
of a day, facts that then change one detail at a time - a time, a number, a name - the way an
assistant hears them ("my flight leaves at 10:30" ... "my flight leaves at 11:30"), among facts
that do not change. Each text goes through ``AgentMemory.add`` without an id, as a chat agent
adds what it is told. Afterwards, for every fact:

- the current memory (the one its first statement created) holds the latest statement;
- its history holds every earlier statement, oldest first, and the latest last;
- no other current memory still holds an earlier statement (so search cannot return it);
- ``add`` said "added" for the first statement and "updated" for each change.

``replay`` returns the per-fact findings and a list of failures (empty when all hold);
``python -m bench.experiments.fact_changes`` runs it on the bundled all-MiniLM-L6-v2 (its measured
near-match threshold) and writes bench/results/fact_changes.json; tests/bench/test_fact_changes.py runs it
on the tiny test encoder (``--encoder DIR --duplicate-threshold T``).
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import timedelta

from bench.common import DAY, DAY_START, STEADY, parser, statements, write_result


def replay(memory, user: str = "ann") -> dict:
    """Replay the day into ``memory`` (an AgentMemory) for ``user`` and check every fact; see the module docstring."""
    events = sorted(
        [(minute, fact, text) for minute, fact, text in DAY] + [(minute, None, text) for minute, text in STEADY]
    )
    first_id: dict[str, str] = {}
    outcomes: dict[str, list[str]] = {}
    for minute, fact, text in events:
        added = memory.add(text, user=user, t=DAY_START + timedelta(minutes=minute))
        if fact is not None:
            first_id.setdefault(fact, added.id)
            outcomes.setdefault(fact, []).append(added.outcome)
    current = {m.id: m.content for m in memory.list_memories(user=user, limit=None)}
    failures, facts = [], {}
    for fact, memory_id in first_id.items():
        said = statements(fact)
        history = [m.content for m in memory.history(memory_id, user=user)]
        stale = sorted(text for text in current.values() if text in said[:-1])
        expected = ["added"] + ["updated"] * (len(said) - 1)
        facts[fact] = {"said": said, "current": current.get(memory_id), "history": history, "outcomes": outcomes[fact]}
        if current.get(memory_id) != said[-1]:
            failures.append(f"{fact}: the current memory holds {current.get(memory_id)!r}, not the latest {said[-1]!r}")
        if history != said:
            failures.append(f"{fact}: history {history!r} is not every statement in order {said!r}")
        if stale:
            failures.append(f"{fact}: earlier statements are still current memories: {stale!r}")
        if outcomes[fact] != expected:
            failures.append(f"{fact}: add said {outcomes[fact]} where {expected} was due")
    for _, text in STEADY:
        if text not in current.values():
            failures.append(f"a fact that never changed is no current memory any more: {text!r}")
    return {"facts": facts, "current": len(current), "failures": failures}


def threshold_or_none(value: str) -> float | None:
    """A near-match threshold in (0, 1], or None for "none" (the consistency check off)."""
    if value == "none":
        return None
    threshold = float(value)
    if not 0 < threshold <= 1:
        raise argparse.ArgumentTypeError(f"a threshold in (0, 1] or 'none', got {value!r}")
    return threshold


def main(argv=None) -> None:
    p = parser("experiments.fact_changes", __doc__.splitlines()[0])
    p.add_argument("--encoder", default=None, help="encoder folder (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument(
        "--duplicate-threshold",
        type=threshold_or_none,
        default=argparse.SUPPRESS,
        help="memnets.open's near-match threshold, 'none' for no consistency check (default: the encoder's)",
    )
    args = p.parse_args(argv)
    import memnets

    options = {key: value for key, value in vars(args).items() if key == "duplicate_threshold"}
    if args.encoder:
        from memnets.nn.encoder import MemoryEncoder

        options["encoder"] = MemoryEncoder.from_pretrained(args.encoder)
    with tempfile.TemporaryDirectory() as folder, memnets.open(folder, **options) as memory:
        result = replay(memory)
        threshold = memory.config.duplicate_threshold
    settings = {"encoder": args.encoder or "untrained all-MiniLM-L6-v2", "duplicate_threshold": threshold}
    path = write_result(args.out, "fact_changes", settings, result)
    for fact, found in result["facts"].items():
        print(f"{fact:8s} {' -> '.join(found['outcomes'])}; current: {found['current']!r}")
    print(f"{len(result['failures'])} failures" + "".join(f"\n  {line}" for line in result["failures"]))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
