"""Change judges side by side on validation only: what a choice of judge (or recipe) rests on.

For each judge folder (``memnets fit supersession``'s output; ``shipped``: the judge memnets ships):

- the written validation pairs (writers C and J, 520): the changes it ends at its threshold, the
  non-changes it ends, the look-alikes among them (another person's news, an unrelated statement);
- other subjects: each validation pair's newer statement beside the older statements of six pairs of
  other domains (drawn as the replay draws its fillers): what the write path meets, for it judges a new memory
  against its speaker's nearest memories however near (no cosine floor);
- the replay of those pairs through ``memnets.open`` (:func:`bench.fact_replay.replay_pairs`,
  all 520 in one set), through plain ``add`` and through ``add(messages=...)``: current first at k = 1, above
  the stale fact at k = 3 / 10, changes ended, false endings, other memories ended;
- with ``--conversation conv-49``: that validation conversation replayed whole through messages, the
  memories ended falsely (:func:`bench.fact_replay.replay_conversation`);
- with ``--order-thresholds``: each judge again at each of those scores for a likely replacement
  (``order_threshold``, :mod:`memnets.memory.supersession`; ``none``: the judge's own), named ``JUDGE@T``.

``labels`` in place of a folder is the judge that is always right (:class:`LabelJudge`: it reads the validation
pairs' labels): the ceiling that the write path's candidates and the search's order leave to any judge.

The test part (writer D, conv-50) is never read: ``python -m bench.experiments.fact_currency`` reports it.

    python -m bench.experiments.judge_validation shipped checkpoints/supersession/best --conversation conv-49
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

import memnets
from bench.common import parser, write_result
from bench.fact_replay import (
    LOOK_ALIKES,
    WRITTEN_PAIRS,
    read_rows,
    replay_conversation,
    replay_pairs,
    summary,
)

VALIDATION = WRITTEN_PAIRS["validation"]
MINED = Path("data/supersession/locomo_mined.jsonl")
QUICK = 24  # validation pairs with --quick, spread over the domains (a check of the script, not a figure)


class LabelJudge:
    """A judge that reads the labels: 1.0 for a labelled change's (older, newer) statements, as written or with a
    ``"label: "`` prefix off as the write path hands them, else 0.0. Not a model: the ceiling a perfect judge reaches."""

    threshold, order_threshold = 0.5, None

    def __init__(self, rows: list[dict]):
        from memnets.text import strip_speaker

        changes = [(row["older"], row["newer"]) for row in rows if row["label"] == 1]
        as_handed = [(strip_speaker(older), strip_speaker(newer)) for older, newer in changes]  # by the write path
        self.changes = {(older.strip(), newer.strip()) for older, newer in changes + as_handed}

    def scores(self, pairs) -> list[float]:
        return [float((older.strip(), newer.strip()) in self.changes) for older, newer in pairs]

    def score(self, older: str, newer: str) -> float:
        return self.scores([(older, newer)])[0]


def pair_figures(judge, rows: list[dict]) -> dict:
    """The judge at its threshold (and at its ``order_threshold``, where it has one) on the pairs themselves and on
    the other subjects' pairs."""
    from memnets.nn.change_judge import probabilities
    from memnets.training.lit.supersession import other_subjects

    scores = probabilities(judge, [(r["older"], r["newer"]) for r in rows])
    ends = scores >= judge.threshold
    label = np.array([r["label"] for r in rows]) == 1
    look = np.isin([r["kind"] for r in rows], LOOK_ALIKES)
    mismatched = probabilities(judge, other_subjects(rows))
    order = judge.threshold if judge.order_threshold is None else judge.order_threshold
    linked = (scores >= order) & ~ends
    return {
        "order_threshold": judge.order_threshold,
        "changes_linked": round(100 * float(linked[label].mean()), 1),
        "no_change_linked": int((linked & ~label).sum()),
        "look_alikes_linked": int((linked & ~label & look).sum()),
        "other_subjects_linked": int(((mismatched >= order) & (mismatched < judge.threshold)).sum()),
        "threshold": judge.threshold,
        "pairs": len(rows),
        "changes_ended": round(100 * float(ends[label].mean()), 1),
        "no_change_ended": int((ends & ~label).sum()),
        "look_alikes_ended": int((ends & ~label & look).sum()),
        "other_subjects": len(mismatched),
        "other_subjects_ended": int((mismatched >= judge.threshold).sum()),
    }


def main(argv=None) -> None:
    p = parser("experiments.judge_validation", __doc__.splitlines()[0])
    p.add_argument(
        "judges",
        nargs="+",
        help="judge folders, 'shipped' for the judge memnets ships, 'labels' for a judge always right",
    )
    p.add_argument("--conversation", help="a validation conversation to replay whole (conv-49)")
    p.add_argument("--data", type=Path, default=Path("data/locomo/locomo8.json"))
    p.add_argument("--order-thresholds", nargs="+", default=["none"], help="order_threshold values, or 'none'")
    p.add_argument("--name", default="judge_validation")
    args = p.parse_args(argv)
    from memnets.nn.change_judge import ChangeJudge

    rows = [row for path in VALIDATION for row in read_rows(Path(path))]
    if args.quick:
        rows = rows[:: len(rows) // QUICK][:QUICK]
    mined = read_rows(MINED, "validation")
    named = {"shipped": ChangeJudge.load, "labels": lambda: LabelJudge(rows)}
    results = {}
    for folder, order in ((f, o) for f in args.judges for o in args.order_thresholds):
        judge = named[folder]() if folder in named else ChangeJudge.load(folder)
        if order != "none":
            judge.order_threshold = float(order)
        name = folder if len(args.order_thresholds) == 1 and order == "none" else f"{folder}@{order}"
        found = {"pairs": pair_figures(judge, rows)}
        for path in ("plain", "messages"):
            with tempfile.TemporaryDirectory() as folder:
                memory = memnets.open(folder, supersession=judge)
                found[path] = summary(replay_pairs(memory, rows, path))
                memory.close()
        if args.conversation:
            with tempfile.TemporaryDirectory() as folder:
                memory = memnets.open(folder, supersession=judge)
                whole = replay_conversation(memory, args.data, args.conversation, mined)
                memory.close()
            found[args.conversation] = {k: v for k, v in whole.items() if k != "false_endings"}
        results[name] = found
        print(f"{name}: {json.dumps(found)}", flush=True)
    settings = {
        "validation": list(VALIDATION),
        "pairs": len(rows),
        "conversation": args.conversation,
        "order_thresholds": args.order_thresholds,
    }
    print(f"wrote {write_result(args.out, args.name, settings, results)}")


if __name__ == "__main__":
    main()
