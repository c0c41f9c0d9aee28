"""A search's own likely replacements, chosen on validation: the judge's ``query_threshold`` x the cosine margin x the
bound on the pairs a search judges (``--pairs``; the shipped bound unless told).

A search reads likely replacements among its first hits (:meth:`memnets.memory.supersession.Supersession.search_links`):
a newer hit that answers the question within a margin of an older one's cosine, judged at ``query_threshold`` or
more, answers in its place. This script measures each setting on what it may cost and gain, with the judge memnets
ships (or ``--judge FOLDER``):

- the written validation pairs (writers C and J, 520) replayed once per path as ``judge_validation`` replays them
  (:mod:`bench.fact_replay`), each pair's question searched at k = 10 under every setting (k = 1 and 3 are its
  first answers: a search reads the same first hits at every k): current first at k = 1, above the stale fact
  at k = 3 and 10, and the older fact that holds first (what a wrong reading costs);
- LoCoMo's validation conversation (conv-49) replayed whole through messages, its questions of categories 1-4
  searched under every setting: the share of evidence turns in the first 1, 5 and 10 answers (what a reading costs
  in a real chat, where most turns are no statements of fact).

``none`` is the search without readings of its own (the write path's decisions alone). ``--split test`` replays the
test part (writer D, conv-50) instead: for reporting the setting chosen, never for choosing.

    python -m bench.experiments.search_links --out docs/results
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import memnets
from bench.common import parser, write_result
from bench.fact_replay import WRITTEN_PAIRS, read_rows, summary, write_conversation, write_pair
from memnets.memory.supersession import SEARCH_PAIRS

CONVERSATION = {"validation": "conv-49", "test": "conv-50"}
THRESHOLDS = ("none", "0.3", "0.5", "0.625", "0.7", "0.85")
MARGINS = (0.05, 0.1, 0.2, 0.35)
KS = (1, 3, 10)


Setting = tuple[float | None, float, int | None]  # query_threshold (None: no reading), margin, pairs bound (None: all)


def settings(thresholds, margins, bounds=(SEARCH_PAIRS,)) -> list[Setting]:
    """The settings measured: ``none`` once, every other threshold at each margin and each bound on the pairs a search
    judges (``search_pairs``; ``none``: every pair in the margin)."""
    bounds = [None if bound == "none" else int(bound) for bound in bounds]
    measured = [(float(t), m, b) for t in thresholds if t != "none" for m in margins for b in bounds]
    return [(None, 0.0, None)] * ("none" in thresholds) + measured


def name(setting: Setting) -> str:
    threshold, margin, bound = setting
    if threshold is None:
        return "none"
    return f"{threshold}@{margin}" + ("" if bound == SEARCH_PAIRS else f"/{bound or 'all'}")


def reading(memory, setting: Setting) -> None:
    """Make ``memory``'s searches read likely replacements by ``setting`` (its supersession step's three values)."""
    step = memory.supersession  # the write path's step, whose judge the searches read with
    step.query_threshold, step.search_margin, step.search_pairs = setting


def replay_pairs(memory, rows: list[dict], path: str, chosen: list, seed: int = 0) -> dict[str, dict]:
    """Each pair written as :func:`bench.fact_replay.replay_pairs` writes it (:func:`~bench.fact_replay.write_pair`),
    its question searched under every setting of ``chosen``: {setting's name: :func:`~bench.fact_replay.summary`'s
    row}."""
    rng = random.Random(seed)
    found: dict[str, list] = {name(s): [] for s in chosen}
    took = []
    for n, row in enumerate(rows):
        user, older, _, newer, seconds = write_pair(memory, rows, n, path, rng)
        took.append(seconds)
        record = next(m for m in memory.list_memories(user=user, limit=None) if m.id == older)
        for setting in chosen:
            reading(memory, setting)
            ids = [hit.memory.id for hit in memory.search(row["question"], user=user, k=max(KS))]
            ranks = {
                k: {"newer": ids[:k].index(newer) if newer in ids[:k] else None,
                    "older": ids[:k].index(older) if older in ids[:k] else None}
                for k in KS
            }  # fmt: skip
            found[name(setting)].append(
                {
                    "id": row["id"],
                    "label": row["label"],
                    "kind": row["kind"],
                    "ended": record.valid_to is not None,
                    "linked": record.likely_replaced_by is not None,
                    "ranks": ranks,
                }
            )
    empty = {"add_seconds": took, "fillers": 0, "fillers_ended": 0, "fillers_linked": 0}
    return {setting: summary({"pairs": pairs, **empty}) for setting, pairs in found.items()}


def conversation_recall(memory, data: Path, conversation: str, chosen: list) -> dict[str, dict]:
    """``conversation`` replayed whole through messages, its questions (categories 1-4) searched under every setting:
    {setting's name: the mean share of evidence turns among the first 1, 5 and 10 answers, in %}."""
    sample, turns_of = write_conversation(memory, data, conversation)
    questions = [q for q in sample["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")]
    out = {}
    for setting in chosen:
        reading(memory, setting)
        shares = {1: [], 5: [], 10: []}
        for question in questions:
            answered = [turns_of.get(hit.memory.id) for hit in memory.search(question["question"], user="talk", k=10)]
            evidence = set(question["evidence"])
            for k, found in shares.items():
                found.append(len(evidence & set(answered[:k])) / len(evidence))
        out[name(setting)] = {f"evidence_at_{k}": round(100 * sum(v) / len(v), 1) for k, v in shares.items()}
        out[name(setting)]["questions"] = len(questions)
    return out


def main(argv=None) -> None:
    p = parser("experiments.search_links", __doc__.splitlines()[0])
    p.add_argument("--judge", help="a judge folder (default: the one memnets ships)")
    p.add_argument("--split", choices=sorted(WRITTEN_PAIRS), default="validation")
    p.add_argument("--thresholds", nargs="+", default=list(THRESHOLDS), help="query_threshold values, or 'none'")
    p.add_argument("--margins", nargs="+", type=float, default=list(MARGINS))
    p.add_argument(
        "--pairs", nargs="+", default=[str(SEARCH_PAIRS)], help="bounds on the pairs a search judges, or 'none'"
    )
    p.add_argument("--data", type=Path, default=Path("data/locomo/locomo8.json"))
    p.add_argument("--name", default="search_links")
    args = p.parse_args(argv)
    from memnets.nn.loading import load_default_judge
    from memnets.nn.serving_judge import ServingJudge

    judge = ServingJudge.load(args.judge) if args.judge else load_default_judge()
    rows = [row for path in WRITTEN_PAIRS[args.split] for row in read_rows(Path(path))]
    if args.quick:
        rows = rows[:: max(1, len(rows) // 24)][:24]
    chosen = settings(args.thresholds, args.margins, args.pairs)
    results: dict[str, dict] = {}
    for path in ("plain", "messages"):
        with tempfile.TemporaryDirectory() as folder, memnets.open(folder, supersession=judge) as memory:
            results[path] = replay_pairs(memory, rows, path, chosen)
        print(f"{path}: {json.dumps(results[path])}", flush=True)
    if not args.quick:
        conversation = CONVERSATION[args.split]
        with tempfile.TemporaryDirectory() as folder, memnets.open(folder, supersession=judge) as memory:
            results[conversation] = conversation_recall(memory, args.data, conversation, chosen)
        print(f"{conversation}: {json.dumps(results[conversation])}", flush=True)
    for setting in chosen:
        row = [results[path][name(setting)] for path in ("plain", "messages")]
        print(
            f"{name(setting):>14}  current first k=1 {row[0]['current_first_k1']:5.1f} / {row[1]['current_first_k1']:5.1f}"
            f"  above k=10 {row[0]['current_above_k10']:5.1f} / {row[1]['current_above_k10']:5.1f}"
            f"  older that holds first {row[0]['held_first_k1']:5.1f} / {row[1]['held_first_k1']:5.1f}"
        )
    chosen_settings = {"judge": args.judge or "shipped", "split": args.split, "pairs": len(rows),
                       "settings": [name(s) for s in chosen]}  # fmt: skip
    print(f"wrote {write_result(args.out, args.name, chosen_settings, results)}")


if __name__ == "__main__":
    main()
