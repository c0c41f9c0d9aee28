"""Time as a feature of the LearnedScorer, per LoCoMo category, before and after (issue 32).

A pack's LearnedScorer weighs recency, relevance and importance with weights fitted on the
validation split. Here the same pack's encoder and importance head are refitted on the validation
split with the fourth feature, ``time`` (``memnets.temporal.questions.time_features``: a
when-question lifts the memories that date their event, a named time the memories in it), and
the rankers are compared per category on validation (where the choice is made) and on test:

- ``dense``: the pack's encoder alone (cosine);
- ``learned``: the pack's own weights (fitted without time);
- ``learned+time``: the weights refitted on validation with time.

It also counts the LoCoMo questions that the question-date cut hides anything from (every LoCoMo
question follows its conversation's last session, so none is expected).

    python -m bench.experiments.time_feature --pack checkpoints/pack --out docs/results
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.common import parser, write_result
from memnets.nn.embedding_cache import CachedEncoder
from memnets.pack import load_pack
from memnets.scoring import FEATURES, LearnedScorer
from memnets.training.data.asked import asked_at, seen_at
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.retrieval.dense import DenseRanker
from memnets.training.retrieval.metrics import evaluate_retriever
from memnets.training.retrieval.scored import ScorerRanker, fit_split_weights

SPLITS = ("validation", "test")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def hidden_questions(conversations) -> int:
    """The questions the question-date cut hides any turn from."""
    return sum(
        seen_at(conversation, asked_at(conversation, item)) is not conversation
        for conversation in conversations
        for item in conversation.qa
    )


def row(report) -> dict:
    by_category = {c: report.by_category[c]["recall@10"] for c in CATEGORIES if c in report.by_category}
    return {
        "recall@10": report.overall["recall@10"],
        "recall@1": report.overall["recall@1"],
        "mrr@10": report.overall["mrr@10"],
        "by_category": by_category,
        "questions_by_category": {c: report.counts[f"category_{c}"] for c in by_category},
    }


def table(split: str, results: dict) -> str:
    heads = " | ".join(f"{c} {name}" for c, name in CATEGORIES.items())
    lines = [f"{split}, recall@10 in %:", "", f"| ranker | {heads} | all R@10 | R@1 | MRR@10 |", "|---" * 8 + "|"]
    for name, values in results.items():
        cells = " | ".join(f"{100 * values['by_category'].get(c, float('nan')):.1f}" for c in CATEGORIES)
        lines.append(
            f"| {name} | {cells} | {100 * values['recall@10']:.1f} | {100 * values['recall@1']:.1f} "
            f"| {100 * values['mrr@10']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = parser("experiments.time_feature", __doc__)
    p.add_argument("--pack", type=Path, default=Path("checkpoints/pack"), help="memory pack folder")
    args = p.parse_args(argv)
    started = time.perf_counter()
    config = load_data_config(None)
    pack = load_pack(args.pack)
    if pack.scorer_weights is None:
        raise SystemExit(f"{args.pack}: the pack holds no scorer weights to compare with")
    encoder = CachedEncoder(pack.encoder)  # every ranker embeds the same turns and questions: once
    with_time = fit_split_weights(encoder, pack.importance, config, "validation", progress=False)
    rankers = {
        "dense": DenseRanker(encoder),
        "learned": ScorerRanker(LearnedScorer(encoder, pack.scorer_weights, pack.importance), name="learned"),
        "learned+time": ScorerRanker(LearnedScorer(encoder, with_time, pack.importance), name="learned+time"),
    }
    results, hidden, markdown = {}, {}, []
    for split in SPLITS:
        conversations = load_conversations(config.path, config.splits[split])
        hidden[split] = hidden_questions(conversations)
        results[split] = {name: row(evaluate_retriever(r, conversations, name=name)) for name, r in rankers.items()}
        markdown.append(table(split, results[split]))
        print(markdown[-1], "\n")
    weights = {name: getattr(with_time, name) for name in (*FEATURES, "bias")}
    markdown.append("weights fitted on validation with time: " + ", ".join(f"{k}={v:+.3f}" for k, v in weights.items()))
    markdown.append(f"LoCoMo questions the question-date cut hides a turn from: {hidden}")
    print("\n".join(markdown[-2:]))
    settings = {"pack": str(args.pack), "data": str(config.path), "splits": {s: config.splits[s] for s in SPLITS}}
    results = {
        "rankers": results,
        "weights_before": pack.scorer_weights.to_dict(),
        "weights_after": with_time.to_dict(),
        "questions_hidden_by_question_date": hidden,
        "seconds": time.perf_counter() - started,
    }
    path = write_result(args.out, "time_feature", settings, results)
    path.with_suffix(".md").write_text(
        "# Time as a scorer feature (bench/experiments/time_feature.py)\n\n" + "\n\n".join(markdown) + "\n"
    )
    print(f"wrote {path} and {path.with_suffix('.md')}")


if __name__ == "__main__":
    main()
