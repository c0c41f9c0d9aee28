"""Retrieval quality on the test split: BM25, the untrained backbone (cosine, and Generative
Agents' heuristic scorer), the trained encoder and the pack's learned scorer.

Rankers come from `memnets eval retrieval`'s registry (memnets.training.retrieval.rankers.RANKERS), metrics
from memnets.training.retrieval.metrics.evaluate_retriever (LoCoMo rule, categories 1-4). A row whose artefact
(checkpoint folder, pack) does not exist is skipped with a note, not failed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench.common import REPO_ROOT, parser, write_result

# (row name, ranker kind, artefact path relative to the repo root or None)
ROWS = (
    ("BM25", "bm25", None),
    ("untrained backbone (cosine)", "dense", None),
    ("untrained backbone + heuristic scorer", "heuristic", None),
    ("trained encoder (cosine)", "dense", "checkpoints/encoder/best"),
    ("trained pack + learned scorer", "learned", "checkpoints/pack"),
)
QUICK_ROWS = ("BM25", "untrained backbone (cosine)")


def run(split: str = "test", rows=ROWS, root: Path = REPO_ROOT) -> tuple[dict, list[str]]:
    """({row name: report dict with seconds}, notes about skipped rows)."""
    from memnets.training.data.config import load_data_config
    from memnets.training.data.formats import load_conversations
    from memnets.training.retrieval.metrics import evaluate_retriever
    from memnets.training.retrieval.rankers import build_ranker

    config = load_data_config()
    conversations = load_conversations(config.path, config.splits[split])
    reports, notes = {}, []
    for name, kind, artefact in rows:
        path = None
        if artefact is not None:
            path = Path(root) / artefact
            if not path.exists():
                notes.append(f"skipped '{name}': {artefact} does not exist (not trained/exported when this ran)")
                continue
        start = time.perf_counter()
        ranker = build_ranker(kind, str(path) if path else None)
        report = evaluate_retriever(ranker, conversations, name=name)
        reports[name] = report.to_dict() | {"seconds": time.perf_counter() - start, "artefact": artefact}
        print(f"[quality] {name}: recall@10={report.overall['recall@10']:.3f}", file=sys.stderr)
    return {"split": split, "conversations": list(config.splits[split]), "reports": reports}, notes


def main(argv: list[str] | None = None) -> int:
    args = parser("quality", __doc__).parse_args(argv)
    rows = tuple(row for row in ROWS if row[0] in QUICK_ROWS) if args.quick else ROWS
    results, notes = run(rows=rows)
    if args.quick:
        notes.append("--quick: only BM25 and the untrained backbone were evaluated")
    write_result(
        args.out, "quality", {"split": "test", "categories": [1, 2, 3, 4], "rows": [r[0] for r in rows]}, results, notes
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
