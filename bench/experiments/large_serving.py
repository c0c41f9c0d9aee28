"""What the large backbone costs to serve: all-mpnet-base-v2 beside all-MiniLM-L6-v2 on every CPU encoder backend.

Per backbone and backend (``torch``, ``onnx``, ``int8``): texts/s encoding LoCoMo turns at batch 64 (best
of ``--repeats``), the p50 / p99 of one text per call (an agent's turn), the mean cosine of its vectors to
the exact torch ones, and the R@5 / R@10 its dense ranking keeps on the validation (conv-49) and test
(conv-50) conversations, the pipeline's own evaluation (``dense[_BACKEND]:ENCODER`` of
``memnets eval retrieval``). Beside them, what ``backend="auto"`` chooses for each backbone on this CPU (the
same agreement floor as today: :data:`memnets.nn.backend_choice.AGREEMENT_FLOOR`).

The backbones are untrained here (the large one as the ``[large]`` extra installs it); a fine-tuned
encoder of the same shape costs the same per text. Run it on an otherwise idle machine, one backbone and
backend after the other::

    python -m bench.experiments.large_serving --out docs/results       # about 15 minutes on 2 cores
"""

from __future__ import annotations

import sys
import time

import numpy as np

from bench.common import encoder_speed, parser, turn_texts, write_result

BACKBONES = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")
BACKENDS = ("torch", "onnx", "int8")
AGREEMENT_TEXTS = 256  # texts whose vectors each backend is compared on with the exact ones
SINGLE = 100  # texts encoded one per call
SPLITS = ("validation", "test")


def backbone_path(name: str) -> str:
    """The name ``MemoryEncoder.from_pretrained`` takes for ``name``: the bundled MiniLM's folder, or the large one's name."""
    from memnets.nn.backbones import DEFAULT_BACKBONE
    from memnets.nn.encoder import LARGE_BACKBONE

    return {"all-MiniLM-L6-v2": DEFAULT_BACKBONE, "all-mpnet-base-v2": LARGE_BACKBONE}[name]


def recall(encoder, conversations: dict) -> dict:
    """R@5 / R@10 of the dense ranking by ``encoder`` on each split's conversations."""
    from memnets.training.retrieval.dense import DenseRanker
    from memnets.training.retrieval.metrics import evaluate_retriever

    out = {}
    for split, convs in conversations.items():
        report = evaluate_retriever(DenseRanker(encoder), convs, name=split)
        out[split] = {"R@5": 100 * report.overall["recall@5"], "R@10": 100 * report.overall["recall@10"]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.large_serving", __doc__)
    p.add_argument("--texts", type=int, default=None, help="LoCoMo turns timed at batch 64 (default 512; --quick 128)")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    from memnets.nn.backend_choice import AGREEMENT_FLOOR
    from memnets.nn.encoder import MemoryEncoder
    from memnets.training.data.config import load_data_config
    from memnets.training.data.formats import load_conversations

    config = load_data_config(None)
    conversations = {split: load_conversations(config.path, config.splits[split]) for split in SPLITS}
    texts = turn_texts(args.texts or (128 if args.quick else 512))
    results: dict = {}
    for backbone in BACKBONES:
        path = backbone_path(backbone)
        exact = np.asarray(MemoryEncoder.from_pretrained(path).encode(texts[:AGREEMENT_TEXTS]))
        rows = {}
        for backend in BACKENDS:
            start = time.perf_counter()
            encoder = MemoryEncoder.from_pretrained(path, backend=backend)
            load_s = time.perf_counter() - start
            rows[backend] = {
                "load_s": load_s,
                **encoder_speed(encoder, texts, exact, args.repeats, SINGLE),
                **recall(encoder, conversations),
            }
            row = rows[backend]
            print(
                f"{backbone:18s} {backend:6s} {row['texts_per_s']:7.1f} texts/s  batch-1 p50 "
                f"{row['single']['p50_ms']:6.1f} ms  cosine {row['cosine_to_exact']['mean']:.4f}  "
                + "  ".join(f"{s} R@5/R@10 {row[s]['R@5']:.1f}/{row[s]['R@10']:.1f}" for s in SPLITS),
                flush=True,
            )
            del encoder
        auto = MemoryEncoder.from_pretrained(path, backend="auto")
        rows["auto_chooses"] = auto.backend
        print(f"{backbone:18s} auto   chooses {auto.backend!r} (agreement floor {AGREEMENT_FLOOR})", flush=True)
        results[backbone] = rows
    settings = {
        "texts": len(texts),
        "repeats": args.repeats,
        "single": SINGLE,
        "batch_size": 64,
        "recall_splits": {s: [c.sample_id for c in conversations[s]] for s in SPLITS},
    }
    print(f"wrote {write_result(args.out, 'large_serving', settings, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
