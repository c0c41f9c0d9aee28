"""Facts that stay current: changes of fact told in everyday words, replayed through ``memnets.open``.

For each labelled pair (older statement, newer statement, the question an agent asks; the format of
data/supersession/README.md) one user's memory gets the older statement, then the older statements of
:data:`FILLERS` other pairs (the user's other facts), then the newer statement a month later, through
plain ``add`` or through ``add(messages=...)`` with an assistant's reply after each user turn. Then:

- a change (label 1): is the newer statement the first hit for the question (k = 1), and above the
  older one at k = 3 and 10 (present, and the older one absent or below it)?
- a pair that is no change (label 0): was the older statement ended (a false ending)? Look-alikes
  (another person's news, an unrelated statement sharing words) are counted apart.
- every filler: was it ended (a false ending among the other memories)?
- the cost: the p50 time of the newer statement's ``add``, with the step and without it (one run each).

``--conversation conv-50`` replays a whole LoCoMo conversation through ``add(messages=...)`` and counts
the memories ended, those a mined pair labels a change (``--mined``) apart from the rest (false).
Only the public API is used, so ``PYTHONPATH=<an older checkout>`` measures the code before a change.

    python -m bench.experiments.fact_currency --pairs data/supersession/written/test.jsonl \\
        --mined data/supersession/locomo_mined.jsonl --split test --conversation conv-50
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import memnets
from bench.common import parser, write_result

FILLERS = 6
ACKS = ("Got it!", "Noted.", "Thanks for telling me.", "Fun!", "Okay, I'll remember that.", "Sounds good.")
LOOK_ALIKES = ("other_person", "unrelated")
START = datetime(2024, 3, 1, 9, tzinfo=UTC)


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


def replay_pairs(memory, rows: list[dict], path: str, seed: int = 0) -> dict:
    """Replay every pair of ``rows`` into its own user of ``memory`` by ``path``; the per-pair findings."""
    rng = random.Random(seed)
    found, add_seconds, filler_ended, fillers = [], [], 0, 0
    for n, row in enumerate(rows):
        user = f"u{n}-{path}"
        others = [r for r in rows if r["domain"] != row["domain"] and r["older"] != row["older"]]
        chosen = rng.sample(others, min(FILLERS, len(others)))
        older_id, _ = write(memory, user, row["older"], row["speaker"], START, path, n)
        filler_ids = [
            write(memory, user, other["older"], row["speaker"], START + timedelta(days=1 + i), path, n + i)[0]
            for i, other in enumerate(chosen)
        ]
        newer_id, took = write(memory, user, row["newer"], row["speaker"], START + timedelta(days=30), path, n)
        add_seconds.append(took)
        current = {m.id: m for m in memory.list_memories(user=user, limit=None)}
        ended = current[older_id].valid_to is not None if older_id in current else None
        fillers += len(filler_ids)
        filler_ended += sum(current[i].valid_to is not None for i in filler_ids if i in current)
        ranks = {}
        for k in (1, 3, 10):
            ids = [hit.memory.id for hit in memory.search(row["question"], user=user, k=k)]
            new_at = ids.index(newer_id) if newer_id in ids else None
            old_at = ids.index(older_id) if older_id in ids else None
            ranks[k] = {"newer": new_at, "older": old_at}
        found.append({"id": row["id"], "label": row["label"], "kind": row["kind"], "ended": ended, "ranks": ranks})
    return {"pairs": found, "add_seconds": add_seconds, "fillers": fillers, "fillers_ended": filler_ended}


def summary(replayed: dict) -> dict:
    """The table's row of one replay: current first at k = 1, above the stale fact at k = 3 and 10, false endings."""
    pairs = replayed["pairs"]
    changes = [p for p in pairs if p["label"] == 1]
    kept = [p for p in pairs if p["label"] == 0]
    looks = [p for p in kept if p["kind"] in LOOK_ALIKES]

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
        "fillers": replayed["fillers"],
        "fillers_ended": replayed["fillers_ended"],
        "add_p50_ms": round(1000 * statistics.median(replayed["add_seconds"]), 1),
    }


def replay_conversation(memory, data: Path, conversation: str, mined: list[dict]) -> dict:
    """A whole LoCoMo conversation through ``add(messages=...)``, a session a call; the memories ended,
    those of a mined change (older turn ended by its newer turn) apart from the rest."""
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
        "mined_changes": len(changes),
        "false_endings": [
            {"older": ids.get(m.id), "newer": ids.get(m.invalidated_by), "text": m.content[:100]} for m in wrong
        ],
    }


def main(argv=None) -> None:
    p = parser("experiments.fact_currency", __doc__.splitlines()[0])
    p.add_argument("--pairs", type=Path, nargs="*", default=[], help="written pairs (JSON lines)")
    p.add_argument("--mined", type=Path, help="mined LoCoMo pairs (JSON lines with a 'split')")
    p.add_argument("--split", default="test", help="the split of --mined replayed (default: test)")
    p.add_argument("--conversation", help="a LoCoMo conversation to replay whole (e.g. conv-50)")
    p.add_argument("--data", type=Path, default=Path("data/locomo/locomo8.json"))
    p.add_argument("--pack", help="a pack folder (its encoder, scorer and judge)")
    p.add_argument("--supersession", choices=("default", "auto", "off"), default="default",
                   help="default: memnets.open's own default; auto; off")  # fmt: skip
    p.add_argument(
        "--judge", type=Path, help="a judge folder (memnets fit supersession's output) in place of --supersession"
    )
    p.add_argument("--paths", nargs="+", default=["plain", "messages"], choices=("plain", "messages"))
    p.add_argument("--name", default="fact_currency")
    args = p.parse_args(argv)
    options = {} if args.supersession == "default" else {"supersession": None if args.supersession == "off" else "auto"}
    if args.judge:
        from memnets.nn.change_judge import ChangeJudge

        options = {"supersession": ChangeJudge.load(args.judge)}
    sets = {str(path): read_rows(path) for path in args.pairs}
    mined = read_rows(args.mined, args.split) if args.mined else []
    if mined:
        sets[f"{args.mined}:{args.split}"] = [
            r | {"id": f"{r['conversation']}:{r['older_dia_id']}>{r['newer_dia_id']}", "domain": r["older_dia_id"]}
            for r in mined
        ]
    results = {}
    for name, rows in sets.items():
        for path in args.paths:
            with tempfile.TemporaryDirectory() as folder:
                memory = memnets.open(folder, pack=args.pack, **options)
                row = summary(replay_pairs(memory, rows, path))
                memory.close()
            results[f"{name} | {path}"] = row
            print(f"{name} | {path}: {json.dumps(row)}", flush=True)
    if args.conversation:
        with tempfile.TemporaryDirectory() as folder:
            memory = memnets.open(folder, pack=args.pack, **options)
            results[f"{args.conversation} | messages"] = replay_conversation(
                memory, args.data, args.conversation, mined
            )
            memory.close()
        print(json.dumps(results[f"{args.conversation} | messages"])[:2000])
    settings = vars(args) | {"pairs": [str(x) for x in args.pairs], "mined": str(args.mined), "data": str(args.data)}
    write_result(args.out, args.name, {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()}, results)


if __name__ == "__main__":
    main()
