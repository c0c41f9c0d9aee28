"""Reworded changes of fact: does a supersession judge end the old fact, and only when it changed?

The cases (bench/experiments/supersession_cases.py) are written apart from the training templates
of data/supersession/generate.py: 42 reworded changes ("I live in Paris" -> "I moved to Berlin last
month"), each with the question an agent would ask, and 42 pairs that only look alike ("I live in
Paris" -> "I love Paris in spring"). For each judge:

- ``supersedes``: the share of the changes it scores at or above its threshold (target >= 0.9);
- ``false``: the look-alikes it scores at or above its threshold (target: none).

Judges: the rule judge (``memnets.temporal.supersession.RuleJudge``, the default before training),
the judge of a pack (``--pack``, default ``checkpoints/pack`` when it holds one: its trained head
together with the rule judge, ``EitherJudge``) and a head folder (``--head``, default
``checkpoints/supersession/best`` from ``memnets fit supersession``) with the default encoder (the
bundled all-MiniLM-L6-v2; ``--encoder`` for another), alone and together with the rule judge as a
pack would use it.

:func:`current_first` is the end-to-end check through the write path: each case's older and newer
fact are added for one user, and the case counts when the first hit for its question holds the
current fact's answer word; :func:`closed_lookalikes` adds each look-alike pair and counts the older
memories the write path closed. ``--end-to-end`` runs both on ``memnets.open`` (the bundled
encoder) with supersession off and with each judge.

``--cases dev`` runs the development set (bench/experiments/supersession_dev_cases.py) instead: every
rule, threshold and training choice is made on it; the bench cases are the test set.

``--set-threshold`` first sets the ``--head`` folder's threshold on the dev set: the lowest (on a 0.05
grid) at which no dev look-alike is superseded (the max-F1 threshold of validation is kept in its
metadata).

    python -m bench.experiments.supersession --out docs/results --end-to-end              # test set
    python -m bench.experiments.supersession --out docs/results --end-to-end --cases dev  # dev set
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.common import parser, write_result
from bench.experiments.supersession_cases import CHANGES, LOOKALIKES
from bench.experiments.supersession_dev_cases import DEV_CHANGES, DEV_LOOKALIKES

CASES = {"bench": (CHANGES, LOOKALIKES), "dev": (DEV_CHANGES, DEV_LOOKALIKES)}  # --cases: test set, dev set


def judge_table(judge, changes=CHANGES, lookalikes=LOOKALIKES) -> dict:
    """How ``judge`` (``score(older, newer)``, ``threshold``) decides the changes and the look-alikes."""
    many = getattr(judge, "scores", None)
    change_pairs = [(older, newer) for older, newer, _, _ in changes]
    if many is not None:
        change_scores, lookalike_scores = many(change_pairs), many(list(lookalikes))
    else:
        change_scores = [judge.score(older, newer) for older, newer in change_pairs]
        lookalike_scores = [judge.score(older, newer) for older, newer in lookalikes]
    missed = [pair for pair, score in zip(change_pairs, change_scores) if score < judge.threshold]
    false = [pair for pair, score in zip(lookalikes, lookalike_scores) if score >= judge.threshold]
    return {
        "threshold": judge.threshold,
        "changes": len(change_pairs),
        "supersedes": 1 - len(missed) / len(change_pairs),
        "lookalikes": len(lookalikes),
        "false_supersessions": len(false),
        "missed": [list(pair) for pair in missed],
        "false": [list(pair) for pair in false],
    }


def current_first(memory, changes=CHANGES) -> dict:
    """End to end: the share of changes whose question finds the current fact first, through ``memory``
    (an AgentMemory whose write path applies its supersession judge, or none)."""
    wins, losses = 0, []
    for index, (older, newer, question, answer) in enumerate(changes):
        user = f"change-{index}"
        memory.add(older, user=user)
        memory.add(newer, user=user)
        hits = memory.search(question, user=user, k=2)
        top = hits[0].memory.content if hits else ""
        if answer.lower() in top.lower():
            wins += 1
        else:
            losses.append([older, newer, question, top])
    return {"cases": len(changes), "current_first": wins / len(changes), "stale_first": losses}


def closed_lookalikes(memory, lookalikes=LOOKALIKES) -> dict:
    """End to end: the look-alike pairs whose older memory the write path closed (false supersessions)."""
    closed = []
    for index, (older, newer) in enumerate(lookalikes):
        user = f"lookalike-{index}"
        first = memory.add(older, user=user)
        memory.add(newer, user=user)
        if memory.get(first.id, user=user).invalidated_by is not None:
            closed.append([older, newer])
    return {"lookalikes": len(lookalikes), "false_supersessions": len(closed), "closed": closed}


def threshold_on_dev(judge, changes=DEV_CHANGES, lookalikes=DEV_LOOKALIKES, step: float = 0.05) -> float:
    """The lowest threshold, on a grid of ``step``, at which ``judge`` supersedes none of the dev look-alikes
    (no false supersession comes first; the lowest such threshold keeps the most changes)."""
    many = getattr(judge, "scores", None) or (lambda pairs: [judge.score(*pair) for pair in pairs])
    highest_false = max(many(list(lookalikes)), default=0.0)
    grid = [round(step * n, 4) for n in range(1, int(round(1 / step)) + 1)]
    return next((t for t in grid if t > highest_false), 1.0)


def set_head_threshold(folder: str, encoder: str | None) -> float:
    """Rewrite the head at ``folder`` with its threshold chosen on the dev set (:func:`threshold_on_dev`), the
    threshold of validation (max F1 on the generated pairs) kept in its metadata."""
    from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder
    from memnets.pack import load_head
    from memnets.temporal.supersession import HeadJudge

    head = load_head("supersession", folder)
    chosen = threshold_on_dev(HeadJudge(MemoryEncoder.from_pretrained(encoder or DEFAULT_BACKBONE), head, 0.5))
    head.metadata = {**(head.metadata or {}), "validation_threshold": head.threshold, "threshold_from": "dev set"}
    head.threshold = chosen
    head.save(folder)
    return chosen


def judges(args: argparse.Namespace) -> dict:
    """name -> judge: the rule judge, and the trained heads that exist."""
    from memnets.temporal.supersession import EitherJudge, HeadJudge, RuleJudge

    found = {"rule": RuleJudge()}
    pack = Path(args.pack)
    if (pack / "manifest.json").is_file():
        from memnets.pack import load_pack

        judge = load_pack(pack).supersession_judge()
        if judge is not None:
            found[f"pack ({pack})"] = judge
    if Path(args.head, "config.json").is_file():
        from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder
        from memnets.pack import load_head

        encoder = MemoryEncoder.from_pretrained(args.encoder or DEFAULT_BACKBONE)
        head = HeadJudge(encoder, load_head("supersession", args.head))
        name = f"head ({args.head}, {'encoder ' + args.encoder if args.encoder else 'all-MiniLM-L6-v2'})"
        found[name] = head
        found[f"{name} + rule (a pack's judge)"] = EitherJudge(head)
    return found


def main(argv: list[str] | None = None) -> None:
    p = parser("experiments.supersession", __doc__)
    p.add_argument("--pack", default="checkpoints/pack", help="a pack with a supersession head")
    p.add_argument("--head", default="checkpoints/supersession/best", help="a trained supersession head folder")
    p.add_argument("--encoder", default=None, help="the head's encoder (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument(
        "--end-to-end", action="store_true", help="also run every case through memnets.open with each judge (and none)"
    )
    p.add_argument("--cases", choices=sorted(CASES), default="bench", help="bench: the test set; dev: the dev set")
    p.add_argument(
        "--set-threshold",
        action="store_true",
        help="first rewrite the --head folder's threshold: the lowest with no dev look-alike superseded",
    )
    args = p.parse_args(argv)
    if args.set_threshold:
        print(f"{args.head}: threshold {set_head_threshold(args.head, args.encoder)} (chosen on the dev set)")
    changes, lookalikes = CASES[args.cases]
    results = {name: judge_table(judge, changes, lookalikes) for name, judge in judges(args).items()}
    print(f"{args.cases} cases: {len(changes)} changes, {len(lookalikes)} look-alikes")
    print(f"{'judge':<70} {'changes superseded':>18} {'false (of ' + str(len(lookalikes)) + ')':>12}")
    for name, row in results.items():
        print(f"{name:<70} {row['supersedes']:>18.1%} {row['false_supersessions']:>12}")
    if args.end_to_end:
        import memnets

        with tempfile.TemporaryDirectory() as folder:
            for name, judge in [("off", None), *judges(args).items()]:
                with memnets.open(Path(folder) / f"memory-{len(results)}", supersession=judge) as memory:
                    row = current_first(memory, changes) | closed_lookalikes(memory, lookalikes)
                results[f"end_to_end (memnets.open, supersession {name})"] = row
                print(
                    f"end to end, supersession {name}: current fact first {row['current_first']:.1%}, "
                    f"look-alikes closed {row['false_supersessions']}"
                )
    name = "supersession" if args.cases == "bench" else f"supersession_{args.cases}"
    write_result(
        Path(args.out), name, {"cases": args.cases, "changes": len(changes), "lookalikes": len(lookalikes)}, results
    )


if __name__ == "__main__":
    main()
