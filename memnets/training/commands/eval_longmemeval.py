"""`memnets eval retrieval --data FILE` on a LongMemEval file: its metrics, as tables and as JSON.

`memnets eval retrieval` hands a LongMemEval file here (:func:`memnets.training.commands.evaluate.retrieval_main`
tells the format from the content). The first table gives, per retriever, recall_any, recall_all
and NDCG at k = 1, 3, 5, 10, 30, 50 at turn and session level; the second, the paper's columns
(recall_any and NDCG at 5 and 10) per question type. ``--json`` writes every question's values.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.table import Table

from memnets.commands.options import write_json
from memnets.console import print_table
from memnets.training.data.longmemeval import load_longmemeval
from memnets.training.evaluation.longmemeval import LongMemEvalReport, compare_on_longmemeval
from memnets.training.retrieval.longmemeval_metrics import LONGMEMEVAL_KS, METRICS

TYPE_COLUMNS = tuple(
    f"{level}_{metric}@{k}" for level in ("session", "turn") for k in (5, 10) for metric in ("recall_any", "ndcg")
)


def metrics_table(report: LongMemEvalReport, ks: Sequence[int] = LONGMEMEVAL_KS) -> Table:
    """One retriever's overall metrics: a row per level and metric, a column per k (percent)."""
    counts = report.counts
    table = Table(
        title=f"{report.name} on LongMemEval: {counts['questions']} questions (left out: "
        f"{counts['abstention']} abstention, {counts['no_evidence']} without evidence"
        + (f", {late} with evidence after the question" if (late := counts.get("evidence_after_question")) else "")
        + ")"
    )
    table.add_column("metric")
    for k in ks:
        table.add_column(f"@{k}", justify="right")
    for level in ("turn", "session"):
        for metric in METRICS:
            table.add_row(f"{level} {metric}", *(f"{100 * report.overall[f'{level}_{metric}@{k}']:.1f}" for k in ks))
    return table


def type_table(report: LongMemEvalReport) -> Table:
    """Recall_any and NDCG at 5 and 10, session and turn level, per question type and overall (percent)."""
    table = Table(title=f"{report.name} per question type")
    table.add_column("question type (questions)")
    for column in TYPE_COLUMNS:
        level, _, metric = column.partition("_")
        table.add_column(f"{level[0]}.{metric.replace('recall_any', 'R').replace('ndcg', 'N')}", justify="right")
    rows = [(f"{t} ({report.counts[f'type_{t}']})", values) for t, values in report.by_type.items()]
    for label, values in rows + [(f"overall ({report.counts['questions']})", report.overall)]:
        table.add_row(label, *(f"{100 * values[column]:.1f}" for column in TYPE_COLUMNS))
    return table


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Evaluate ``args.retrievers`` on the LongMemEval file ``args.data``; print the tables, write ``--json``."""
    if args.split is not None:
        parser.error(f"--split: {args.data} is a LongMemEval file, whose every question is evaluated; it has no splits")
    try:
        questions = load_longmemeval(args.data)
    except (OSError, ValueError) as error:
        parser.error(str(error))
    try:
        reports = compare_on_longmemeval(args.retrievers, questions)
    except ValueError as error:
        print(f"memnets eval retrieval: {args.data}: {error}", file=sys.stderr)
        return 1
    for report in reports:
        print_table(metrics_table(report))
        print_table(type_table(report))
    if args.json:
        payload = {
            "data": str(args.data),
            "format": "longmemeval",
            "ks": list(LONGMEMEVAL_KS),
            "reports": [report.to_dict(with_questions=True) for report in reports],
        }
        write_json(args.json, payload)
    return 0
