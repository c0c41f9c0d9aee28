"""Train a pack on your own conversations (memnets JSONL, docs/data.md), evaluate it and load it.

    python examples/train_on_jsonl.py [DATA.jsonl] [--train IDS] [--validation IDS] [--test IDS] [--quick]

DATA defaults to examples/conversations.jsonl (four small conversations); the split names
conversation ids (comma-separated), never questions. The script writes a data config for the file,
then runs the main job's steps as commands, as you would in a shell: prepare the data, fit the
encoder and both heads, export the pack, and compare it with BM25 and the untrained backbone on
the test conversations. `--quick` trains the smoke pipeline's tiny random encoder instead of
fine-tuning all-MiniLM-L6-v2 (a minute instead of many on a CPU; its figures mean nothing). The
trained parts land where the shipped configs put them (checkpoints/, or checkpoints/smoke/ with
--quick), the data config, cache and pack under ./checkpoints/examples/. Needs the train extra
(`pip install -e '.[train]'`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = Path("checkpoints") / "examples"


def steps(data_config: Path, quick: bool) -> list[list[str]]:
    """The `memnets` commands of the run, in order: the shipped configs, pointed at our data config.

    The fits write where their configs say: checkpoints/{encoder,importance,gate}/best, or under
    checkpoints/smoke/ with --quick (the heads' configs read the encoder from there too).
    """
    target, parts = ("smoke", Path("checkpoints") / "smoke") if quick else ("cpu", Path("checkpoints"))
    trained = [arg for name in ("encoder", "importance", "gate") for arg in (f"--{name}", str(parts / name / "best"))]
    data = ["--data.data_config", str(data_config)]
    return [
        ["data", "prepare", "-c", str(data_config)],
        ["fit", "encoder", "-c", f"encoder/{target}", *data],
        ["fit", "importance", "-c", f"importance/{target}", *data],
        ["fit", "gate", "-c", f"gate/{target}", *data],
        ["export", *trained, "-c", str(data_config), "--out", str(OUT / "pack"), "--overwrite"],
        ["eval", "retrieval", "bm25", "backbone=dense", f"trained=dense:{parts / 'encoder' / 'best'}",
         f"learned:{OUT / 'pack'}", "-c", str(data_config), "--split", "test"],
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", default=HERE / "conversations.jsonl", type=Path, help="memnets JSONL file")
    parser.add_argument("--train", default="tiny-1,support-7", help="conversation ids to train on")
    parser.add_argument("--validation", default="support-8", help="conversation ids to choose epochs and thresholds")
    parser.add_argument("--test", default="tiny-2", help="conversation ids to report on")
    parser.add_argument("--quick", action="store_true", help="a tiny random encoder instead of MiniLM")
    args = parser.parse_args(argv)

    OUT.mkdir(parents=True, exist_ok=True)
    data_config = OUT / "data.yaml"
    splits = {name: getattr(args, name).split(",") for name in ("train", "validation", "test")}
    data_config.write_text(
        f"path: {args.data.resolve()}\ncache_dir: {OUT / 'cache'}\n"
        + "splits:\n"
        + "".join(f"  {name}: [{', '.join(ids)}]\n" for name, ids in splits.items())
        + "gate:\n  windows: [2, 4]\n  seed: 0\n"  # context windows shorter than these small conversations
    )
    for step in steps(data_config, args.quick):
        print(f"\n$ memnets {' '.join(step)}", flush=True)
        code = subprocess.call([sys.executable, "-m", "memnets", *step])
        if code != 0:
            print(f"step failed with exit code {code}", file=sys.stderr)
            return code
    print(f"\npack: {OUT / 'pack'}  (python examples/load_pack.py {OUT / 'pack'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
