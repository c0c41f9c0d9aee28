"""`memnets eval retrieval` and `memnets eval heads`.

`memnets eval retrieval`: recall@k (LoCoMo rule), MRR@10 and nDCG@10 of one or more
retrievers on a split, side by side, as a table and as JSON. On a LongMemEval file (`--data`),
LongMemEval's own metrics instead: recall_any, recall_all and NDCG at k at turn and session level,
per question type (memnets.training.commands.eval_longmemeval).

Retrievers are given as specs `[NAME=]KIND[:PATH]` (the registry of memnets.training.retrieval.rankers), for example
`bm25`, `dense` (the bundled all-MiniLM-L6-v2), `trained=dense:checkpoints/encoder/best`,
`heuristic` (Generative Agents' score on the backbone), `learned:checkpoints/pack` (a pack's LearnedScorer),
`memory[:PACK]` (the conversation written into a fresh memory, with consistency and supersession, and
ranked by its search: memnets.training.evaluation.memory_ranker).

`memnets eval heads`: the importance and recall-gate heads against their baselines on a split
(:mod:`memnets.training.evaluation.heads`), as Markdown tables and as JSON.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from memnets.commands.options import DATA_HELP, add_data_option, category_list, json_file, write_json
from memnets.console import CommandParser, add_output_options, parse_args, print_table
from memnets.training.data.config import SPLIT_NAMES, load_data_config
from memnets.training.data.formats import detect_format, load_conversations
from memnets.training.data.locomo import CATEGORY_NAMES
from memnets.training.evaluation.retrieval import compare_rankers, unscorable
from memnets.training.retrieval.metrics import DEFAULT_KS, RetrievalReport
from memnets.training.retrieval.rankers import parse_spec


def comparison_table(reports: Sequence[RetrievalReport], scope: str, ks: Sequence[int]) -> Table:
    """Overall metrics, one row per retriever; ``scope`` says what was evaluated ("the test split")."""
    questions = reports[0].counts["questions"] if reports else 0
    table = Table(title=f"retrieval on {scope} ({questions} questions)")
    table.add_column("retriever")
    metrics = [f"recall@{k}" for k in ks] + ["mrr@10", "ndcg@10"]
    for metric in metrics:
        table.add_column(metric.replace("recall", "R"), justify="right")
    for report in reports:
        table.add_row(report.name, *(f"{100 * report.overall[m]:.1f}" for m in metrics))
    return table


def category_table(reports: Sequence[RetrievalReport], k: int = 10) -> Table:
    categories = sorted({c for report in reports for c in report.by_category})
    table = Table(title=f"recall@{k} per category (questions)")
    table.add_column("retriever")
    for c in categories:
        table.add_column(
            f"{c} {CATEGORY_NAMES.get(c, '')} ({reports[0].counts.get(f'category_{c}', 0)})", justify="right"
        )
    for report in reports:
        table.add_row(report.name, *(f"{100 * report.by_category[c][f'recall@{k}']:.1f}" for c in categories))
    return table


def retrieval_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets eval retrieval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "retrievers", nargs="*", default=["bm25", "dense"], help="specs [NAME=]KIND[:PATH] (default: bm25 dense)"
    )
    parser.add_argument(
        "--split",
        default=None,
        choices=SPLIT_NAMES,
        help="the data config's split (default: test; with --data, every conversation of the file)",
    )
    parser.add_argument(
        "--categories", type=category_list, default=(1, 2, 3, 4), help="QA categories to score (default 1,2,3,4)"
    )
    parser.add_argument(
        "-c", "--config", default=None, help="data config: YAML file or packaged name (default data/locomo)"
    )
    add_data_option(parser, DATA_HELP + " (with --data and no --split, every conversation of the file)")
    parser.add_argument(
        "--json", type=json_file, default=None, help="write the reports (with per-question values) here"
    )
    parser.add_argument(
        "--pack", default=None, help="also evaluate a memory pack: its encoder (dense) and its LearnedScorer"
    )
    return add_output_options(parser)


def retrieval_main(argv: list[str]) -> int:
    parser = retrieval_parser()
    args = parse_args(parser, argv)
    if args.pack:
        args.retrievers += [f"pack-encoder=dense:{Path(args.pack) / 'encoder'}", f"pack-learned=learned:{args.pack}"]

    categories = args.categories
    try:
        for spec in args.retrievers:
            parse_spec(spec)
    except ValueError as error:
        parser.error(str(error))
    try:
        longmemeval = args.data is not None and args.data.is_file() and detect_format(args.data) == "longmemeval"
    except ValueError as error:
        parser.error(str(error))
    if longmemeval:
        from memnets.training.commands import eval_longmemeval

        return eval_longmemeval.run(args, parser)
    split = args.split or ("all" if args.data else "test")
    try:
        config = load_data_config(args.config, data=args.data)
        conversations = load_conversations(config.path, None if split == "all" else config.splits[split])
    except (OSError, ValueError) as error:
        parser.error(str(error))
    reason = unscorable(conversations, categories)
    if reason is not None:
        where = args.data or f"{config.path} ({split} split)"
        print(f"memnets eval retrieval: {where}: no question can be scored: {reason}", file=sys.stderr)
        return 1
    reports = compare_rankers(args.retrievers, conversations, categories=categories, ks=DEFAULT_KS)
    scope = f"every conversation of {args.data}" if split == "all" else f"the {split} split"
    print_table(comparison_table(reports, scope, DEFAULT_KS))
    print_table(category_table(reports))
    if args.json:
        payload = {
            "data": str(args.data or config.path),
            "split": split,
            "conversations": [c.sample_id for c in conversations],
            "categories": list(categories),
            "reports": [report.to_dict(with_questions=True) for report in reports],
        }
        write_json(args.json, payload)
    return 0


HEAD_COLUMNS = {
    "importance": ["auroc", "ap", "f1", "ece", "threshold"],
    "gate": ["auroc", "ap", "f1", "recall", "searches_saved", "threshold"],
}


def heads_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets eval heads", description="importance and recall-gate heads against their baselines on a split"
    )
    parser.add_argument(
        "--encoder",
        default=None,
        help="frozen encoder folder the heads were trained on (default: the untrained backbone)",
    )
    parser.add_argument("--importance", default=None, help="saved ImportanceHead folder")
    parser.add_argument("--gate", default=None, help="saved RecallGateHead folder")
    parser.add_argument(
        "--split", default="test", choices=("validation", "test"), help="the data config's split (default: test)"
    )
    parser.add_argument(
        "-c",
        "--config",
        "--data-config",  # the old spelling, kept as an alias
        dest="config",
        default=None,
        help="data config: YAML file or packaged name (default data/locomo); --data-config is an old alias",
    )
    add_data_option(parser)
    parser.add_argument("--json", type=json_file, default=None, help="also write the results to this JSON file")
    return add_output_options(parser)


def heads_main(argv: list[str]) -> int:
    from memnets.training.evaluation.heads import evaluate_heads, format_table

    parser = heads_parser()
    args = parse_args(parser, argv)
    if args.importance is None and args.gate is None:
        parser.error("give --importance and/or --gate")
    data = None if args.data is None else str(args.data)
    result = evaluate_heads(args.encoder, args.importance, args.gate, args.split, args.config, progress=True, data=data)
    for task, columns in HEAD_COLUMNS.items():
        if task in result:
            title = f"{task} on {args.split} (positives {result[f'{task}_positives']:.3f})"
            print(format_table(title, result[task], columns) + "\n")
    if args.json:
        write_json(args.json, result)
    return 0
