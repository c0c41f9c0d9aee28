"""Facts that stay current: changes of fact told in everyday words, replayed through ``memnets.open``.

For each labelled pair (older statement, newer statement, the question an agent asks; the format of
data/supersession/README.md) one user's memory gets the older statement, then the older statements of
:data:`~memnets.training.lit.supersession.OTHER_FACTS` other pairs (the user's other facts), then the newer
statement a month later, through plain ``add`` or through ``add(messages=...)`` with an assistant's reply
after each user turn. Then:

- a change (label 1): is the newer statement the first hit for the question (k = 1), and above the
  older one at k = 3 and 10 (present, and the older one absent or below it)?
- a pair that is no change (label 0): was the older statement ended (a false ending)? Look-alikes
  (another person's news, an unrelated statement sharing words) are counted apart.
- every filler: was it ended (a false ending among the other memories)?
- the cost: the p50 time of the newer statement's ``add``, with the step and without it (one run each).

``--other-facts N`` gives each user N other facts instead of six: a longer memory, in which the older statement
must be among the few nearest to the newer one to be judged at all.

``--conversation conv-50`` replays a whole LoCoMo conversation through ``add(messages=...)`` and counts
the memories ended, those a mined pair labels a change (``--mined``) apart from the rest (false).
Only the public API is used, so ``PYTHONPATH=<an older checkout>`` measures the code before a change.

    python -m bench.experiments.fact_currency --pairs data/supersession/written/test.jsonl \\
        --mined data/supersession/locomo_mined.jsonl --split test --conversation conv-50
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import memnets
from bench.common import parser, write_result
from bench.fact_replay import read_rows, replay_conversation, replay_pairs, summary
from memnets.training.lit.supersession import OTHER_FACTS


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
    p.add_argument(
        "--other-facts", type=int, default=OTHER_FACTS,
        help=f"other facts of each pair's user, between its two statements (default {OTHER_FACTS}, the issue's replay; "
        "more: a user with a longer memory, where the older statement must be among the newer one's nearest)",
    )  # fmt: skip
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
                row = summary(replay_pairs(memory, rows, path, others=args.other_facts))
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
