"""The embedding-text option of the time resolver, measured both ways on LoCoMo.

Each turn is embedded as written, or with the dates of its time expressions added after them
(``memnets.temporal.dates.with_dates``: "yesterday (2023-05-07)"), resolved from its own session's
date; the questions are embedded as they are. Dense retrieval with the bundled all-MiniLM-L6-v2
(or ``--encoder``), recall@10 per category on a split of the data config (default: validation).

    python -m bench.experiments.dates_in_embedding --split validation --out docs/results
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.common import encoder_from, parser, write_result
from memnets.temporal.dates import resolve_dates, with_dates
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.dense import DenseRanker
from memnets.training.retrieval.metrics import evaluate_retriever


def dated_texts(conversation: Conversation) -> Conversation:
    """``conversation`` with each turn's text followed by the dates it names."""
    sessions = tuple(
        replace(
            session,
            turns=tuple(
                replace(turn, text=with_dates(turn.text, resolve_dates(turn.text, turn.t))) for turn in session.turns
            ),
        )
        for session in conversation.sessions
    )
    return replace(conversation, sessions=sessions)


def main(argv: list[str] | None = None) -> None:
    p = parser("experiments.dates_in_embedding", __doc__)
    p.add_argument("--split", default="validation", help="the data config's split (default validation)")
    p.add_argument("--encoder", default=None, help="encoder folder (default: the bundled all-MiniLM-L6-v2)")
    args = p.parse_args(argv)
    config = load_data_config(None)
    conversations = load_conversations(config.path, config.splits[args.split])
    ranker = DenseRanker(encoder_from(args))
    results = {}
    for name, convs in (("as written", conversations), ("with dates", [dated_texts(c) for c in conversations])):
        report = evaluate_retriever(ranker, convs, name=name)
        results[name] = {
            "recall@10": report.overall["recall@10"],
            "by_category": {c: v["recall@10"] for c, v in sorted(report.by_category.items())},
        }
        cats = " ".join(f"{c}:{100 * v:.1f}" for c, v in results[name]["by_category"].items())
        print(f"{name:<12} R@10 {100 * report.overall['recall@10']:.1f}  per category {cats}")
    write_result(Path(args.out), "dates_in_embedding", {"split": args.split, "encoder": args.encoder}, results)


if __name__ == "__main__":
    main()
