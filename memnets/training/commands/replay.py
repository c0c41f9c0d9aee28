"""`memnets replay`: stream a LoCoMo conversation through the memory manager, then ask its questions.

Every turn enters the manager in order; then each question (categories 1-4 by default; after the
whole conversation, or with ``--ask after-evidence`` DELAY turns after its last evidence turn) is put
to ``MemoryManager.context_for``. Measured per question: which share of its evidence turns is in what
the LLM would see, and whether an archive search was made. Rows: the heuristic manager and a plain
vector memory (every turn stored, the cosine top-k of them per question, no tiers: what mem0 or a
LangGraph store with an embedding function does), with ``--pack`` the trained manager;
``--reference`` adds the always/never-search gates. Every row runs through ``memnets.open``. The experiment is
:func:`memnets.training.evaluation.replay.replay`; this command parses, calls it, prints and writes its JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from memnets.commands.options import add_data_option
from memnets.console import CommandParser, add_output_options, parse_args, print_table
from memnets.memory.signals import DEFAULT_GATE_THRESHOLD
from memnets.training.data.formats import load_conversations
from memnets.training.data.location import find_data
from memnets.training.data.locomo import DataFormatError
from memnets.training.evaluation.replay import replay

DEFAULT_OUTPUT_DIR = Path("checkpoints") / "replay"


def results_table(rows: list[dict], settings: dict) -> Table:
    table = Table(
        title=(
            f"replay of {settings['conversation']} ({settings['questions']} questions, {settings['turns']} turns, "
            f"{settings['conversation_tokens']} tokens): context {settings['context_budget']} tokens, "
            f"working {settings['working_capacity']} memories, k={settings['k']}, asked "
            + ("at the end" if settings["ask"] == "end" else f"{settings['delay']} turns after the evidence")
        )
    )
    columns = (
        "manager",
        "gate",
        "evidence recall",
        "all evidence",
        "searches",
        "gate agrees",
        "recall w/o search",
        "evidence only in archive",
        "seconds",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("manager", "gate") else "right")
    for row in rows:
        no_search = row.get("recall_without_search")
        table.add_row(
            row["name"],
            row["gate"],
            f"{100 * row['evidence_recall']:.1f}%",
            f"{100 * row['all_evidence']:.1f}%",
            f"{row['searches']}/{row['questions']} ({100 * row['search_rate']:.0f}%)",
            "-" if row["gate"] == "none" else f"{100 * row['gate_agreement']:.1f}%",  # no gate: nothing to agree
            "-" if no_search is None else f"{100 * no_search:.1f}%",
            f"{100 * row['evidence_archive_only']:.1f}%",
            f"{row['seconds']['total']:.0f}",
        )
    return table


def parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets replay", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversation", default="conv-50", help="sample id (default conv-50, the test split)")
    add_data_option(parser)
    parser.add_argument(
        "--pack", type=Path, default=None, help="a memory pack folder to compare with the heuristic manager"
    )
    parser.add_argument(
        "--encoder", default=None, help="encoder folder of the heuristic manager (default: the untrained backbone)"
    )
    parser.add_argument("--context-budget", type=int, default=512, help="context budget in tokens (default 512)")
    parser.add_argument(
        "--working-capacity", type=int, default=50, help="working-memory capacity in memories (default 50)"
    )
    parser.add_argument(
        "-k", "--k", type=int, default=5, help="memories recalled per search and shown per question (default 5)"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="archive write batch for unimportant observations")
    parser.add_argument(
        "--mmr-lambda",
        type=float,
        default=1.0,
        help="relevance vs diversity when picking memories (default 1 = plain top-k, chosen on validation conv-49 "
        "over 0.7 and 0.5)",
    )
    parser.add_argument(
        "--gate-threshold",
        type=float,
        default=DEFAULT_GATE_THRESHOLD,
        help=f"cosine below which the heuristic gate recalls (default {DEFAULT_GATE_THRESHOLD}, chosen on conv-49)",
    )
    parser.add_argument("--categories", default="1,2,3,4", help="QA categories to ask (default 1,2,3,4)")
    parser.add_argument(
        "--ask",
        default="end",
        choices=["end", "after-evidence"],
        help="when questions are asked: after the whole conversation (default), or DELAY turns after their last evidence turn",
    )
    parser.add_argument(
        "--delay",
        type=int,
        default=20,
        help="turns between a question's last evidence turn and the question (--ask after-evidence)",
    )
    parser.add_argument("--no-heuristic", action="store_true", help="run only the pack's rows (with --pack)")
    parser.add_argument("--reference", action="store_true", help="also run always-search and never-search gates")
    parser.add_argument("--events", type=Path, default=None, help="folder for each row's event log (JSONL)")
    parser.add_argument(
        "--output", type=Path, default=None, help="JSON results (default checkpoints/replay/replay-<conv>.json)"
    )
    return add_output_options(parser)


def main(argv: list[str]) -> int:
    command = parser()
    args = parse_args(command, argv)
    if args.pack is not None and not args.pack.is_dir():
        command.error(f"--pack {args.pack}: not a folder")
    if args.no_heuristic and args.pack is None:
        command.error("--no-heuristic leaves nothing to run without --pack")
    try:
        categories = {int(c) for c in args.categories.split(",") if c.strip()}
    except ValueError:
        command.error(f"--categories must be comma-separated integers, got {args.categories!r}")
    try:
        args.data = find_data(args.data)
        conversation = load_conversations(args.data, sample_ids=[args.conversation])[0]
    except (FileNotFoundError, DataFormatError) as error:
        command.error(f"--conversation {args.conversation} / --data {args.data}: {error}")
    result = replay(
        conversation,
        encoder=args.encoder,
        pack=args.pack,
        heuristic=not args.no_heuristic,
        reference=args.reference,
        categories=categories,
        context_budget=args.context_budget,
        working_capacity=args.working_capacity,
        k=args.k,
        batch_size=args.batch_size,
        mmr_lambda=args.mmr_lambda,
        gate_threshold=args.gate_threshold,
        ask=args.ask,
        delay=args.delay,
        events=args.events,
        data=args.data,
    )
    print_table(results_table(result["rows"], result["settings"]))
    output = args.output or DEFAULT_OUTPUT_DIR / f"replay-{conversation.sample_id}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {output}")
    return 0
