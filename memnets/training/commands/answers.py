"""`memnets eval answers`: answer accuracy of a retriever with the user's model, judged by an LLM.

Reads a LongMemEval, LoCoMo or JSONL file (`--data`), retrieves the top k turns of each question's
conversation with a ranker spec (`bm25`, `dense`, `dense:ENCODER`, `learned:PACK`, or `--pack`),
answers with the OpenAI-compatible model at `--llm`, and judges with `--judge` (default: the same
endpoint) under the LongMemEval or LoCoMo protocol. Prints accuracy per category beside recall@k,
tokens and latency, and writes every question's retrieved ids, answer and verdict to `--json`.
The API key, when one is needed, comes from $OPENAI_API_KEY.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.table import Table

from memnets.commands.options import DATA_HELP, category_list, json_file, write_json
from memnets.console import CommandParser, add_output_options, parse_args, print_table
from memnets.training.evaluation.answers import AnswerReport, conversation_items, evaluate_answers, longmemeval_items
from memnets.training.retrieval.rankers import parse_spec


def parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets eval answers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, metavar="FILE", help=DATA_HELP.split(";")[0])
    parser.add_argument("--llm", required=True, metavar="URL", help="the answering model's OpenAI-compatible server")
    parser.add_argument("--model", default="default", help="the answering model's name on that server")
    parser.add_argument("--judge", default=None, metavar="URL", help="the judge's server (default: --llm)")
    parser.add_argument("--judge-model", default=None, help="the judge's model name (default: --model)")
    parser.add_argument("--retriever", default="bm25", help="ranker spec [NAME=]KIND[:PATH] (default bm25)")
    parser.add_argument("--pack", default=None, help="retrieve with a memory pack's LearnedScorer (learned:PACK)")
    parser.add_argument("-k", type=int, default=10, help="turns retrieved per question (default 10)")
    parser.add_argument(
        "--categories",
        type=category_list,
        default=(1, 2, 3, 4),
        help="LoCoMo / JSONL categories to ask (default 1,2,3,4)",
    )
    parser.add_argument("--limit", type=int, default=None, help="ask only the first N questions")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for one model answer (default 60)")
    parser.add_argument(
        "--retries", type=int, default=2, help="retries of a failed call or malformed verdict (default 2)"
    )
    parser.add_argument(
        "--json", type=json_file, default=None, help="write every question's retrieved ids, answer and verdict here"
    )
    return add_output_options(parser)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def report_table(report: AnswerReport) -> Table:
    """Accuracy per category beside recall@k, tokens per question and latency."""
    table = Table(title=f"answers with {report.retriever} (top {report.k})")
    for column in ("category", "questions", "accuracy", f"recall@{report.k}", "unjudged", "answer tokens in", "out"):
        table.add_column(column, justify="left" if column == "category" else "right")
    table.add_column("latency s (mean / p95)", justify="right")
    for category, values in [*report.by_category.items(), ("overall", report.overall)]:
        table.add_row(
            category,
            str(values["questions"]),
            _percent(values["accuracy"]),
            _percent(values["recall"]),
            str(values["unjudged"]),
            _number(values["answer_tokens_in"]),
            _number(values["answer_tokens_out"]),
            f"{values['latency_s_mean']:.2f} / {values['latency_s_p95']:.2f}",
        )
    return table


def main(argv: list[str]) -> int:
    from memnets.llm import OpenAIChatLLM
    from memnets.training.data.formats import detect_format, load_conversations
    from memnets.training.data.longmemeval import load_longmemeval
    from memnets.training.evaluation.longmemeval import cache_encodings
    from memnets.training.retrieval.rankers import build_ranker

    command = parser()
    args = parse_args(command, argv)
    spec = f"pack=learned:{args.pack}" if args.pack else args.retriever
    try:
        name, kind, path = parse_spec(spec)
        if args.k < 1 or args.retries < 0 or (args.limit is not None and args.limit < 1):
            raise ValueError("-k and --limit must be at least 1, --retries at least 0")
        answerer = OpenAIChatLLM(args.llm, args.model, timeout=args.timeout)
        judge = OpenAIChatLLM(args.judge or args.llm, args.judge_model or args.model, timeout=args.timeout)
        if detect_format(args.data) == "longmemeval":
            items = longmemeval_items(load_longmemeval(args.data))
        else:
            items = conversation_items(load_conversations(args.data), args.categories)
    except (OSError, ValueError) as error:
        command.error(str(error))
    items = items[: args.limit]
    if not items:
        print(f"memnets eval answers: {args.data}: no question to answer", file=sys.stderr)
        return 1
    ranker = cache_encodings(build_ranker(kind, path), (t.content for item in items for t in item.conversation.turns))
    report = evaluate_answers(items, ranker, answerer, judge, k=args.k, retries=args.retries, name=name)
    print_table(report_table(report))
    if args.json:
        write_json(
            args.json, {"data": str(args.data), "llm": args.llm, "judge": args.judge or args.llm} | report.to_dict()
        )
    return 0
