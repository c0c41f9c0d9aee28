"""Does a change judge that reads the agent's question beside the pair separate changes better than the pair alone?

The search could order a user's answers at query time instead of (or beside) ending facts at write time: for
the question "Where does the user live?", "I live in Leeds" then "Lyon's been great so far" are two answers
to the same question, and "My cousin moved to Glasgow" is none. This measures whether the question helps the
judge: the shipped judge fine-tuned (``--epochs``, the write path's recipe: every written training pair and
4,000 mismatched pairs, half a change's newer statement) on ``[CLS] question [SEP] older [SEP] newer [SEP]``,
or with ``--no-question`` on the pair alone; each epoch scored on the written validation pairs (C + J) at
the threshold for 95% precision, and on 500 mismatched validation pairs (the older pair's question kept).
Validation only; the test part is never read.

    python -m bench.experiments.question_judge --epochs 2 --out docs/results
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import average_precision_score

from bench.common import parser, write_result
from bench.fact_replay import LOOK_ALIKES

WRITTEN = Path("data/supersession/written")
VALIDATION = (WRITTEN / "validation.jsonl", WRITTEN / "validation_j.jsonl")


def first_segment(row: dict, with_question: bool) -> str:
    """What the judge reads before the newer statement: the question and the older one, or the older alone."""
    return f"{row['question']} [SEP] {row['older']}" if with_question else row["older"]


def probabilities(net, rows: list[dict], with_question: bool) -> np.ndarray:
    """The net's scores of ``rows`` read as :func:`first_segment` says (in eval mode, as a judge scores)."""
    from memnets.nn.change_judge import ChangeJudge, probabilities

    judge = ChangeJudge(net, threshold=0.5)  # the threshold is chosen from these scores, not used here
    return probabilities(judge, [(first_segment(r, with_question), r["newer"]) for r in rows])


def figures(net, validation: list[dict], mismatched: list[dict], with_question: bool) -> dict:
    from memnets.training.lit.supersession import threshold_for_precision

    scores, labels = probabilities(net, validation, with_question), np.array([r["label"] for r in validation])
    threshold = threshold_for_precision(labels, scores)
    ends = scores >= threshold
    look = np.isin([r["kind"] for r in validation], LOOK_ALIKES)
    return {
        "ap": round(float(average_precision_score(labels, scores)), 4),
        "threshold": round(threshold, 4),
        "changes_ended_pct": round(100 * float(ends[labels == 1].mean()), 1),
        "false_endings": int((ends & (labels == 0)).sum()),
        "look_alikes_ended": int((ends & look).sum()),
        "mismatched_ended_of_500": int((probabilities(net, mismatched, with_question) >= threshold).sum()),
    }


def main() -> None:
    p = parser("question_judge", __doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--no-question", action="store_true", help="the pair alone (the same recipe otherwise)")
    args = p.parse_args()
    from memnets.nn.change_judge import ChangeJudge
    from memnets.training.lit.supersession import mismatched_pairs, read_pairs

    with_question = not args.no_question
    train = read_pairs(sorted(WRITTEN.glob("train_*.jsonl")))
    validation = read_pairs(list(VALIDATION))
    if args.quick:
        train, validation = train[:64], validation[:64]
    rows = train + mismatched_pairs(train, len(train) if args.quick else 4000, seed=0, from_changes=0.5)
    mismatched = mismatched_pairs(validation, 500, seed=1, from_changes=0.5)
    net = ChangeJudge.load().net
    optimiser = torch.optim.AdamW([w for w in net.parameters() if w.requires_grad], lr=5e-5)
    positives = sum(r["label"] for r in rows)
    weight = torch.tensor((len(rows) - positives) / positives)
    epochs = [{"epoch": "start (the shipped judge)", **figures(net, validation, mismatched, with_question)}]
    print(epochs[-1], flush=True)
    for epoch in range(args.epochs):
        random.Random(epoch).shuffle(rows)
        net.train()
        began = time.perf_counter()
        for i in range(0, len(rows), 32):
            batch = rows[i : i + 32]
            logits = net(**net.tokenize([(first_segment(r, with_question), r["newer"]) for r in batch]))
            targets = torch.tensor([float(r["label"]) for r in batch])
            loss = F.binary_cross_entropy_with_logits(logits, targets, pos_weight=weight)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        took = round(time.perf_counter() - began, 1)
        epochs.append({"epoch": epoch + 1, "seconds": took, **figures(net, validation, mismatched, with_question)})
        print(epochs[-1], flush=True)
    settings = {"epochs": args.epochs, "with_question": with_question, "training_pairs": len(rows), "quick": args.quick}
    write_result(args.out, "question_judge" + ("" if with_question else "-pair"), settings, {"epochs": epochs})


if __name__ == "__main__":
    main()
