"""Hybrid ranking in the evaluation: the dense weight chosen on validation, the gain reported on test.

A trained encoder folder (``--encoder``) or a pack (``--pack``: its learned score) ranks LoCoMo's questions
(categories 1-4) as ``memnets eval retrieval`` does, alone and fused with BM25
(:class:`memnets.training.retrieval.hybrid_ranker.HybridRanker`): the weighted rule for dense weights 0.30 .. 0.90
(step 0.05) and reciprocal rank fusion, over the 10, 20, 50 best turns of each ranking or all turns. The dense scores are computed once per conversation, so the sweep
costs one encoding of each split. The rule and weight with the best validation R@10 (ties: R@5) is the
choice; test is reported beside it, with the per-category figures of dense and the choice.

    python -m bench.experiments.eval_hybrid --encoder checkpoints/encoder/best --out docs/results
    python -m bench.experiments.eval_hybrid --pack checkpoints/pack --name eval_hybrid_pack --out docs/results
"""

from __future__ import annotations

import os
import time

import numpy as np

from bench.common import parser, write_result
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.retrieval.hybrid_ranker import HybridRanker
from memnets.training.retrieval.metrics import evaluate_retriever
from memnets.training.retrieval.rankers import build_ranker

WEIGHTS = [round(w, 2) for w in np.arange(0.30, 0.901, 0.05)]
DEPTHS = (10, 20, 50, None)  # candidates of each ranking (None: every turn)
FIGURES = ("recall@5", "recall@10", "mrr@10")


class ScoresOnce:
    """A ranker's ``scores`` computed once per (conversation, queries) and kept: every fusion reuses them."""

    def __init__(self, ranker) -> None:
        self.ranker, self._kept = ranker, {}

    def scores(self, conversation, queries):
        key = (conversation.sample_id, len(conversation.turns), tuple(queries))
        if key not in self._kept:
            self._kept[key] = self.ranker.scores(conversation, queries)
        return self._kept[key]

    def rank(self, conversation, queries):
        return HybridRanker(self, weight=1.0, depth=None).rank(conversation, queries)  # weight 1: the dense order


def _row(report, categories: bool = False) -> dict:
    row = {m: round(100 * report.overall[m], 1) for m in FIGURES}
    if categories:
        row["by_category"] = {str(c): {m: round(100 * v[m], 1) for m in FIGURES} for c, v in report.by_category.items()}
    return row


def main() -> None:
    p = parser("eval_hybrid", __doc__)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--encoder", help="a trained encoder folder (cosine)")
    source.add_argument("--pack", help="a memory pack (its learned score)")
    p.add_argument("--name", default="eval_hybrid", help="the result file's name")
    args = p.parse_args()
    config = load_data_config("data/locomo")
    dense = ScoresOnce(build_ranker("dense", args.encoder) if args.encoder else build_ranker("learned", args.pack))
    bm25 = build_ranker("bm25")
    results, seconds = {}, {}
    for split in ("validation", "test"):
        conversations = load_conversations(config.path, config.splits[split])
        started = time.perf_counter()
        rows = {"dense": _row(evaluate_retriever(dense, conversations), categories=True)}
        seconds[split] = round(time.perf_counter() - started, 1)
        rows["bm25"] = _row(evaluate_retriever(bm25, conversations))
        for depth in DEPTHS:
            rows[f"rrf depth {depth}"] = _row(
                evaluate_retriever(HybridRanker(dense, rule="rrf", depth=depth), conversations)
            )
            for weight in WEIGHTS:
                ranker = HybridRanker(dense, weight=weight, depth=depth)
                rows[f"weighted {weight:.2f} depth {depth}"] = _row(evaluate_retriever(ranker, conversations))
        results[split] = rows
    candidates = [name for name in results["validation"] if name not in {"dense", "bm25"}]
    chosen = max(
        candidates, key=lambda n: (results["validation"][n]["recall@10"], results["validation"][n]["recall@5"])
    )
    words = chosen.split()
    depth = None if words[-1] == "None" else int(words[-1])
    chosen_ranker = (
        HybridRanker(dense, rule="rrf", depth=depth)
        if words[0] == "rrf"
        else HybridRanker(dense, weight=float(words[1]), depth=depth)
    )
    for split in ("validation", "test"):
        conversations = load_conversations(config.path, config.splits[split])
        results[split][chosen] = _row(evaluate_retriever(chosen_ranker, conversations), categories=True)
    settings = {
        "encoder": args.encoder,
        "pack": args.pack,
        "weights": WEIGHTS,
        "depths": DEPTHS,
        "categories": [1, 2, 3, 4],
    }
    notes = [
        f"chosen on validation (best R@10, ties R@5): {chosen}",
        f"dense scoring time (s) per split: {seconds}; load average at the end: {os.getloadavg()}",
    ]
    path = write_result(args.out, args.name, settings, {"chosen": chosen} | results, notes)
    print(path)
    for split in ("validation", "test"):
        for name in ("dense", "bm25", "rrf depth 20", "weighted 0.45 depth 20", chosen):
            print(split, name, {m: results[split][name][m] for m in FIGURES})


if __name__ == "__main__":
    main()
