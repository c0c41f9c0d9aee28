"""`memnets export`: bundle a trained encoder, importance head, recall-gate head, change-of-fact judge
and scorer weights into one verified memory pack (see memnets/pack.py for the format).

Without --scorer-weights, the LearnedScorer's weights are fitted here by logistic regression on
the --fit-split conversations (default: validation), with the exported encoder and importance head;
`--fit-split none` exports no weights.

Example:
  memnets export --encoder checkpoints/encoder/best --importance checkpoints/importance/best \\
      --gate checkpoints/gate/best --out checkpoints/pack --metrics checkpoints/eval.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memnets.commands.options import add_data_option
from memnets.console import CommandParser, add_output_options, parse_args
from memnets.training.data.config import SPLIT_NAMES, load_data_config


def _read_json_object(path: str | None, option: str) -> dict:
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{option} {path}: cannot read a JSON object ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{option} {path}: expected a JSON object, got {type(data).__name__}")
    return data


def parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--encoder", required=True, help="trained encoder folder (MemoryEncoder.save_pretrained)")
    parser.add_argument("--importance", default=None, help="trained importance head folder (ImportanceHead.save)")
    parser.add_argument("--gate", default=None, help="trained recall gate folder (RecallGateHead.save)")
    parser.add_argument(
        "--supersession",
        default=None,
        help="trained change-of-fact judge folder (memnets fit supersession; ChangeJudge.save)",
    )
    parser.add_argument("--scorer-weights", default=None, help="fitted scorer weights JSON (skips fitting)")
    parser.add_argument(
        "--fit-split",
        default="validation",
        choices=[*SPLIT_NAMES, "none"],
        help="split to fit the scorer weights on when --scorer-weights is not given (default validation)",
    )
    parser.add_argument("--out", default="checkpoints/pack", help="pack folder to write (default checkpoints/pack)")
    parser.add_argument("--metrics", default=None, help="JSON of evaluation results to store in the manifest")
    parser.add_argument("--training", default=None, help="JSON describing the training runs, stored in the manifest")
    parser.add_argument(
        "-c", "--config", default=None, help="data config: YAML file or packaged name (default data/locomo)"
    )
    add_data_option(parser)
    parser.add_argument(
        "--backend",
        action="append",
        choices=["onnx", "int8", "int8_vnni", "int8_vnni_ffn"],
        default=[],
        help="also write this fast encoder backend into the pack (repeatable; torch's exporter needs the [onnx] extra)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing pack folder")
    return add_output_options(parser)


def main(argv: list[str]) -> int:
    command = parser()
    args = parse_args(command, argv)

    from memnets.nn.encoder import MemoryEncoder
    from memnets.pack import export_pack, load_head
    from memnets.scoring import FEATURES, ScorerWeights
    from memnets.training.retrieval.scored import fit_split_weights

    try:
        metrics = _read_json_object(args.metrics, "--metrics")
        training = _read_json_object(args.training, "--training")
        for option in ("encoder", "importance", "gate", "supersession"):
            path = getattr(args, option)
            if path is not None and not Path(path).is_dir():
                raise ValueError(f"--{option} {path}: not a folder")
        if Path(args.out).exists() and not args.overwrite:
            raise ValueError(f"--out {args.out} already exists (pass --overwrite to replace it)")
        weights = ScorerWeights.load(args.scorer_weights) if args.scorer_weights else None
    except (OSError, ValueError) as error:
        command.error(str(error))

    config = load_data_config(args.config, data=args.data)
    encoder = MemoryEncoder.from_pretrained(args.encoder)
    importance = load_head("importance", args.importance) if args.importance else None
    if weights is None and args.fit_split != "none":
        weights = fit_split_weights(encoder, importance, config, args.fit_split)
        print(
            f"fitted scorer weights on {args.fit_split}: "
            + ", ".join(f"{name}={getattr(weights, name):+.3f}" for name in (*FEATURES, "bias"))
        )
    runs = {
        name: _read_json_object(str(Path(folder) / "training.json"), f"--{name}")
        for name, folder in (("encoder", args.encoder), ("importance", args.importance), ("gate", args.gate))
        if folder is not None and (Path(folder) / "training.json").is_file()
    }
    training = {
        "data": str(config.path),
        "runs": runs,  # what the trainers wrote next to each component (training.json)
        "splits": {name: list(config.splits[name]) for name in SPLIT_NAMES},
        "sources": {
            "encoder": args.encoder,
            "importance": args.importance,
            "gate": args.gate,
            "supersession": args.supersession,
            "scorer_weights": args.scorer_weights or (f"fitted on {args.fit_split}" if weights else None),
        },
    } | training
    out = export_pack(
        args.out,
        encoder,
        importance=importance,
        gate=args.gate,
        supersession=args.supersession,
        scorer_weights=weights,
        training=training,
        metrics=metrics,
        backends=tuple(dict.fromkeys(args.backend)),
        overwrite=args.overwrite,
    )
    print(
        f"wrote pack {out} (embedding dim {encoder.dim}; components: "
        f"{', '.join(json.loads((out / 'manifest.json').read_text())['components'])})"
    )
    return 0
