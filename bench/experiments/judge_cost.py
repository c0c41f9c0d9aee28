"""What the change judge costs per write: p50 of one batch of candidate pairs, by batch size and text length.

The write path asks the judge about at most ``CANDIDATES`` pairs of one new memory in one batch
(memnets/memory/supersession.py), so a batch of that size is the decision's added cost per add. The long
texts show the bound: a 200,000-character statement costs what its first MAX_CHARS characters do. The
judge that serves without torch (ONNX Runtime, :class:`~memnets.nn.serving_judge.ServingJudge`: its float32
graph, and the int8 one that ``"auto"`` serves where the CPU has VNNI) is timed beside the torch one, one after the
other, in one run (the int8 one also as one graph call per batch, as it was served until 2026-12-07, late: ``OneCall``);
``--judge`` adds saved judges on torch, ``--onnx`` on ONNX Runtime (float32, and ``auto``).

    python -m bench.experiments.judge_cost --out docs/results
    python -m bench.experiments.judge_cost --judge checkpoints/supersession/large --out docs/results
    python -m bench.experiments.judge_cost --judge checkpoints/supersession/six_layers --onnx checkpoints/supersession/six_layers
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from bench.common import REPO_ROOT, parser, write_result
from memnets.memory.supersession import CANDIDATES
from memnets.nn.change_judge import ChangeJudge
from memnets.nn.serving_judge import ServingJudge

PAIRS = REPO_ROOT / "data" / "supersession" / "written" / "validation.jsonl"


def p50_ms(judge: ChangeJudge, pairs: list[tuple[str, str]], size: int, repeats: int) -> float:
    """The median time of ``judge.scores`` on ``repeats`` consecutive batches of ``size`` pairs, in ms."""
    times = []
    for n in range(repeats):
        batch = [pairs[(n * size + i) % len(pairs)] for i in range(size)]
        began = time.perf_counter()
        judge.scores(batch)
        times.append(time.perf_counter() - began)
    return round(1000 * statistics.median(times), 2)


class OneCall:
    """The served int8 judge as it scored a batch until 2026-12-07 (late): one graph call for the whole batch, whose
    scores moved with the batch (:meth:`memnets.nn.serving_judge.ServingJudge.logits` runs each pair alone now); timed
    beside the path it serves now, for what that costs."""

    def __init__(self, judge: ServingJudge):
        self.judge = judge

    def scores(self, pairs: list[tuple[str, str]]):
        return self.judge._run(pairs)


def main(argv=None) -> None:
    p = parser("experiments.judge_cost", __doc__.splitlines()[0])
    p.add_argument("--judge", nargs="*", default=[], help="saved judge folders timed on torch too (the large judge)")
    p.add_argument(
        "--onnx", nargs="*", default=[], help="saved judge folders of the bundled backbone timed on ONNX too"
    )
    args = p.parse_args(argv)
    rows = [json.loads(line) for line in Path(PAIRS).read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs = [(row["older"], row["newer"]) for row in rows]
    auto = ServingJudge.load()  # what memnets.open serves: int8 where the CPU has VNNI, else the float32 graph
    judges = (
        {"torch": ChangeJudge.load(), "onnx": ServingJudge.load(backend="onnx")}
        | ({} if auto.backend == "onnx" else {auto.backend: auto, f"{auto.backend}_one_call": OneCall(auto)})
        | {f"torch:{folder}": ChangeJudge.load(folder) for folder in args.judge}
        | {
            f"{backend}:{folder}": ServingJudge.load(folder, backend=backend)
            for folder in args.onnx
            for backend in ("onnx", "auto")
        }
    )
    repeats = 10 if args.quick else 60
    results = {}
    for name, judge in judges.items():
        judge.scores(pairs[:8])  # warm up
        for size in (1, CANDIDATES):
            results[f"{name}_batch_{size}_p50_ms"] = p50_ms(judge, pairs, size, repeats)
        for length in (1_000, 200_000):
            hostile = [(older, ("a@" * length)[:length]) for older, _ in pairs]
            results[f"{name}_batch_{CANDIDATES}_newer_{length}_chars_p50_ms"] = p50_ms(
                judge, hostile, CANDIDATES, repeats
            )
    print(json.dumps(results, indent=2))
    settings = {
        "quick": args.quick,
        "pairs": str(PAIRS.relative_to(REPO_ROOT)),
        "judges": args.judge,
        "onnx": args.onnx,
    }
    write_result(args.out, "judge_cost", settings, results)


if __name__ == "__main__":
    main()
