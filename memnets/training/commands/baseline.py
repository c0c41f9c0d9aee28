"""`memnets baseline st-mnrl`: the sentence-transformers MNRL fine-tune the trained encoder must beat.

Parses, calls :func:`memnets.training.baselines.st_mnrl.train_st_mnrl` and prints its run record (also saved
as ``OUTPUT/training.json``).
"""

from __future__ import annotations

import argparse
import json

from memnets.commands.options import add_data_option
from memnets.console import CommandParser, add_output_options, parse_args


def st_mnrl_parser() -> argparse.ArgumentParser:
    from memnets.nn.encoder import DEFAULT_BACKBONE
    from memnets.training.baselines import st_mnrl

    parser = CommandParser(
        prog="memnets baseline st-mnrl",
        description=st_mnrl.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--output", default="checkpoints/baselines/st_mnrl", help="folder for the fine-tuned model")
    parser.add_argument(
        "--backbone", default=DEFAULT_BACKBONE, help="model folder to fine-tune (default: the bundled all-MiniLM-L6-v2)"
    )
    parser.add_argument(
        "-c", "--config", default=None, help="data config: YAML file or packaged name (default data/locomo)"
    )
    add_data_option(parser)
    parser.add_argument("--no-observations", action="store_true", help="question pairs only")
    parser.add_argument("--epochs", type=int, default=3, help="passes over the pairs (default 3)")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="pairs per step; the rest of the batch are the negatives (default 32)",
    )
    parser.add_argument("--lr", type=float, default=5e-5, help="default: the sentence-transformers trainer's")
    parser.add_argument(
        "--warmup-ratio", type=float, default=0.1, help="share of the steps with a rising learning rate (default 0.1)"
    )
    parser.add_argument("--max-seq-length", type=int, default=None, help="default: the backbone's (256)")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (a CPU budget)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the batch order and the model (default 0)")
    return add_output_options(parser)


def st_mnrl_main(argv: list[str]) -> int:
    from memnets.training.baselines import st_mnrl

    parser = st_mnrl_parser()
    args = parse_args(parser, argv)
    if args.epochs < 1 or args.batch_size < 2:
        parser.error("need --epochs >= 1 and --batch-size >= 2")
    record = st_mnrl.train_st_mnrl(
        args.output,
        backbone=args.backbone,
        data_config=args.config,
        data=args.data,
        include_observations=not args.no_observations,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_ratio=args.warmup_ratio,
        max_seq_length=args.max_seq_length,
        max_steps=args.max_steps,
        seed=args.seed,
    )
    print(json.dumps(record, indent=2))
    return 0
