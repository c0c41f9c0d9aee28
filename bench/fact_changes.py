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
``python -m bench.fact_changes`` runs it on the bundled all-MiniLM-L6-v2 and writes
bench/results/fact_changes.json; tests/test_fact_changes.py runs it on the tiny test encoder.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta

from bench.common import parser, write_result

DAY_START = datetime(2024, 5, 6, 7, 0, tzinfo=UTC)
# (minutes after DAY_START, fact, statement): a fact's statements in order, each changing one detail (a time, a number, a name, a negation)
DAY = [
    (0, "flight", "My flight to Berlin leaves at 10:30 on Monday"),
    (5, "phone", "My new phone number is 555-123-4567"),
    (12, "dog", "I adopted a beagle puppy named Rex"),
    (30, "meeting", "The team meeting with Priya is at 3 pm on Tuesday"),
    (41, "tickets", "I bought 2 tickets for the jazz concert on Friday"),
    (55, "dentist", "My dentist appointment is on May 14 at 9:00"),
    (70, "diet", "I am vegetarian and I cook every evening"),
    (95, "flight", "My flight to Berlin leaves at 11:30 on Monday"),
    (120, "phone", "My new phone number is 555-123-4568"),
    (150, "dog", "I adopted a beagle puppy named Max"),
    (200, "meeting", "The team meeting with Priya is at 4 pm on Tuesday"),
    (240, "tickets", "I bought 3 tickets for the jazz concert on Friday"),
    (300, "dentist", "My dentist appointment is on May 16 at 9:00"),
    (330, "diet", "I am not vegetarian and I cook every evening"),
    (360, "meeting", "The team meeting with Omar is at 4 pm on Tuesday"),
    (420, "flight", "My flight to Berlin leaves at 12:15 on Monday"),
    (480, "dentist", "My dentist appointment is on May 16 at 9:30"),
]
STEADY = [  # facts said once, which no change may touch
    (20, "I am allergic to peanuts"),
    (90, "My sister lives in Lisbon and plays the cello"),
    (250, "I started learning Portuguese this spring"),
]


def statements(fact: str) -> list[str]:
    """The statements of one fact of :data:`DAY`, in the order they are said."""
    return [text for _, name, text in DAY if name == fact]


FACTS = list(dict.fromkeys(fact for _, fact, _ in DAY))
CHANGES = [pair for fact in FACTS for pair in zip(statements(fact)[:-1], statements(fact)[1:])]  # (earlier, later)


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


def main(argv=None) -> None:
    args = parser("fact_changes", __doc__.splitlines()[0]).parse_args(argv)
    import memnets

    with tempfile.TemporaryDirectory() as folder, memnets.open(folder) as memory:
        result = replay(memory)
        threshold = memory.config.duplicate_threshold
    path = write_result(
        args.out, "fact_changes", {"encoder": "untrained all-MiniLM-L6-v2", "duplicate_threshold": threshold}, result
    )
    for fact, found in result["facts"].items():
        print(f"{fact:8s} {' -> '.join(found['outcomes'])}; current: {found['current']!r}")
    print(f"{len(result['failures'])} failures" + "".join(f"\n  {line}" for line in result["failures"]))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
