"""`memnets data prepare`: build (or load from cache) the datasets of the three tasks and print
their sizes and class balance per split."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from memnets.commands.options import add_data_option
from memnets.console import CommandParser, add_output_options, parse_args, print_table
from memnets.training.data.builders import prepare_datasets
from memnets.training.data.config import SPLIT_NAMES, load_data_config
from memnets.training.data.formats import load_conversations


def balance_table(datasets: dict, source: str = "LoCoMo") -> Table:
    table = Table(title=f"memnets datasets ({source}, split by conversation)")
    for column in ("task", "split", "conversations", "examples", "positives", "positive rate"):
        table.add_column(column, justify="left" if column in {"task", "split"} else "right")
    for task, by_split in datasets.items():
        for split in SPLIT_NAMES:
            ds = by_split[split]
            conversations = len(set(ds["conv_id"]))
            if "label" in ds.column_names:
                positives = int(sum(ds["label"]))
                rate = f"{positives / len(ds):.1%}" if len(ds) else "-"
            else:  # retrieval pairs are all positives; show how many come from questions
                positives, rate = len(ds), f"{sum(k == 'question' for k in ds['query_kind'])} from questions"
            table.add_row(task, split, str(conversations), str(len(ds)), str(positives), rate)
    return table


def prepare_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="memnets data prepare", description=__doc__)
    parser.add_argument(
        "-c", "--config", default=None, help="data config: YAML file or packaged name (default data/locomo)"
    )
    add_data_option(parser)
    parser.add_argument("--force", action="store_true", help="rebuild even when the cache is fresh")
    return add_output_options(parser)


def prepare_main(argv: list[str]) -> int:
    args = parse_args(prepare_parser(), argv)
    config = load_data_config(args.config, data=args.data)
    datasets = prepare_datasets(config, force=args.force)
    print_table(balance_table(datasets, Path(config.path).name))
    for conv in load_conversations(config.path):
        dropped = [(item.index, item.dropped_evidence) for item in conv.qa if item.dropped_evidence]
        if dropped:
            print(f"{conv.sample_id}: dropped unresolvable evidence ids (qa index, ids): {dropped}")
    print(f"cached under {config.cache_dir}")
    return 0
