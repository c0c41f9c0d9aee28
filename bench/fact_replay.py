"""The replay of labelled change-of-fact pairs through ``memnets.open``, shared by the scripts that measure a
change judge: ``bench.experiments.fact_currency`` (the test part, reported) and
``bench.experiments.judge_validation`` (the validation part, chosen on).

For each pair (data/supersession/README.md's format) one user's memory gets the older statement, the older
statements of :data:`~memnets.training.lit.supersession.OTHER_FACTS` other pairs (the user's other facts),
then the newer statement a month later, through plain ``add`` or through ``add(messages=...)`` with an
assistant's reply after each user turn; then the pair's question at k = 1, 3, 10 (:func:`replay_pairs`,
:func:`summary`). :func:`replay_conversation` replays a whole LoCoMo conversation through messages and counts
the memories ended (and those linked to a likely replacement, ``likely_replaced_by``, which rank below it).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memnets.training.lit.supersession import OTHER_FACTS, other_facts

ACKS = ("Got it!", "Noted.", "Thanks for telling me.", "Fun!", "Okay, I'll remember that.", "Sounds good.")
LOOK_ALIKES = ("other_person", "unrelated")
BOTH_HOLD = ("restatement", "addition")  # non-changes whose newer statement answers the question too
START = datetime(2024, 3, 1, 9, tzinfo=UTC)
WRITTEN_PAIRS = {  # the written pairs of each held-out split (data/supersession/README.md: who wrote which)
    "validation": ("data/supersession/written/validation.jsonl", "data/supersession/written/validation_j.jsonl"),
    "test": ("data/supersession/written/test.jsonl",),
}


def read_rows(path: Path, split: str | None = None) -> list[dict]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split is None or r.get("split", split) == split]


def message(text: str, speaker: str, when: datetime) -> dict:
    out = {"role": "user", "content": text, "time": when.isoformat()}
    return out | ({"name": speaker} if speaker and speaker != "user" else {})


def write(memory, user: str, text: str, speaker: str, when: datetime, path: str, n: int):
    """Write one statement of ``speaker`` by ``path``; (its memory's id, seconds the call took)."""
    began = time.perf_counter()
    if path == "plain":
        own = memory.add(text, user=user, t=when)
    else:
        reply = {"role": "assistant", "content": ACKS[n % len(ACKS)], "time": (when + timedelta(seconds=5)).isoformat()}
        own = memory.add(messages=[message(text, speaker, when), reply], user=user)[0].memory  # the user's turn
    return own.id, time.perf_counter() - began


def write_pair(memory, rows: list[dict], n: int, path: str, rng: random.Random, others: int = OTHER_FACTS):
    """Row ``n`` of ``rows`` written by ``path`` into its own user: the older statement, ``others`` other facts of the
    user (:func:`~memnets.training.lit.supersession.other_facts`, drawn by ``rng``) a day apart, the newer statement a
    month later; (the user, the older one's id, the other facts' ids, the newer one's id, seconds its add took)."""
    row, user = rows[n], f"u{n}-{path}"
    chosen = other_facts(rows, row, rng, others)
    older_id, _ = write(memory, user, row["older"], row["speaker"], START, path, n)
    filler_ids = [
        write(memory, user, other["older"], row["speaker"], START + timedelta(days=1 + i), path, n + i)[0]
        for i, other in enumerate(chosen)
    ]
    newer_id, took = write(memory, user, row["newer"], row["speaker"], START + timedelta(days=30), path, n)
    return user, older_id, filler_ids, newer_id, took


def replay_pairs(memory, rows: list[dict], path: str, seed: int = 0, others: int = OTHER_FACTS) -> dict:
    """Replay every pair of ``rows`` into its own user of ``memory`` by ``path``, with ``others`` other facts of the
    user between its two statements (fewer where ``rows`` hold fewer of other subjects); the per-pair findings."""
    rng = random.Random(seed)
    found, add_seconds, filler_ended, filler_linked, fillers = [], [], 0, 0, 0
    for n, row in enumerate(rows):
        user, older_id, filler_ids, newer_id, took = write_pair(memory, rows, n, path, rng, others)
        add_seconds.append(took)
        current = {m.id: m for m in memory.list_memories(user=user, limit=None)}
        ended = current[older_id].valid_to is not None if older_id in current else None
        linked = current[older_id].likely_replaced_by is not None if older_id in current else None
        fillers += len(filler_ids)
        filler_ended += sum(current[i].valid_to is not None for i in filler_ids if i in current)
        filler_linked += sum(current[i].likely_replaced_by is not None for i in filler_ids if i in current)
        ranks = {}
        for k in (1, 3, 10):
            ids = [hit.memory.id for hit in memory.search(row["question"], user=user, k=k)]
            new_at = ids.index(newer_id) if newer_id in ids else None
            old_at = ids.index(older_id) if older_id in ids else None
            ranks[k] = {"newer": new_at, "older": old_at}
        found.append(
            {
                "id": row["id"],
                "label": row["label"],
                "kind": row["kind"],
                "ended": ended,
                "linked": linked,
                "ranks": ranks,
            }
        )
    return {
        "pairs": found,
        "add_seconds": add_seconds,
        "fillers": fillers,
        "fillers_ended": filler_ended,
        "fillers_linked": filler_linked,
    }


def summary(replayed: dict) -> dict:
    """The table's row of one replay: current first at k = 1, above the stale fact at k = 3 and 10, false endings."""
    pairs = replayed["pairs"]
    changes = [p for p in pairs if p["label"] == 1]
    kept = [p for p in pairs if p["label"] == 0]
    looks = [p for p in kept if p["kind"] in LOOK_ALIKES]
    held = [p for p in kept if p["kind"] not in BOTH_HOLD]  # the older fact alone answers the question

    def current_first(p, k):
        r = p["ranks"][k]
        return r["newer"] == 0 if k == 1 else r["newer"] is not None and (r["older"] is None or r["newer"] < r["older"])

    def share(items, test):
        return round(100 * sum(map(test, items)) / len(items), 1) if items else None

    return {
        "changes": len(changes),
        "current_first_k1": share(changes, lambda p: current_first(p, 1)),
        "current_above_k3": share(changes, lambda p: current_first(p, 3)),
        "current_above_k10": share(changes, lambda p: current_first(p, 10)),
        "changes_ended": share(changes, lambda p: bool(p["ended"])),
        "no_change_pairs": len(kept),
        "no_change_ended": sum(bool(p["ended"]) for p in kept),
        "look_alikes": len(looks),
        "look_alikes_ended": sum(bool(p["ended"]) for p in looks),
        "changes_linked": share(changes, lambda p: bool(p["linked"])),
        "no_change_linked": sum(bool(p["linked"]) for p in kept),
        "look_alikes_linked": sum(bool(p["linked"]) for p in looks),
        "held": len(held),
        "held_first_k1": share(held, lambda p: p["ranks"][1]["older"] == 0),
        "fillers": replayed["fillers"],
        "fillers_ended": replayed["fillers_ended"],
        "fillers_linked": replayed["fillers_linked"],
        "add_p50_ms": round(1000 * statistics.median(replayed["add_seconds"]), 1),
    }


def write_conversation(memory, data: Path, conversation: str) -> tuple[dict, dict[str, str]]:
    """LoCoMo's ``conversation`` (in ``data``) written for the user "talk" through ``add(messages=...)``, a session a
    call, each turn with its photo's caption; (its sample, {memory id: the turn's dia_id})."""
    sample = next(s for s in json.loads(Path(data).read_text(encoding="utf-8")) if s["sample_id"] == conversation)
    talk = sample["conversation"]
    sessions = sorted(
        (int(key.split("_")[1]) for key in talk if key.startswith("session_") and key.count("_") == 1),
    )
    ids: dict[str, str] = {}
    for number in sessions:
        when = datetime.strptime(talk[f"session_{number}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
        messages = []
        for i, turn in enumerate(talk[f"session_{number}"]):
            text = turn["text"] + (f" [shares a photo of {turn['blip_caption']}]" if turn.get("blip_caption") else "")
            messages.append(message(text, turn["speaker"], when + timedelta(seconds=30 * i)))
        for outcome in memory.add(messages=messages, user="talk"):
            if outcome.memory is not None:
                ids[outcome.memory.id] = talk[f"session_{number}"][outcome.index]["dia_id"]
    return sample, ids


def replay_conversation(memory, data: Path, conversation: str, mined: list[dict]) -> dict:
    """A whole LoCoMo conversation through ``add(messages=...)``, a session a call; the memories ended,
    those of a mined change (older turn ended by its newer turn) apart from the rest."""
    _, ids = write_conversation(memory, data, conversation)
    changes = {(r["older_dia_id"], r["newer_dia_id"]) for r in mined if r["label"] == 1}
    memories = memory.list_memories(user="talk", limit=None)
    ended = [m for m in memories if m.invalidated_by is not None]
    right = [m for m in ended if (ids.get(m.id), ids.get(m.invalidated_by)) in changes]
    wrong = [m for m in ended if m not in right]
    return {
        "memories": len(memories),
        "ended": len(ended),
        "ended_as_mined": len(right),
        "ended_falsely": len(wrong),
        "linked": sum(m.likely_replaced_by is not None for m in memories),  # ranked below a likely replacement
        "mined_changes": len(changes),
        "false_endings": [
            {"older": ids.get(m.id), "newer": ids.get(m.invalidated_by), "text": m.content[:100]} for m in wrong
        ],
    }
