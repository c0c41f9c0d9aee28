"""How close FaissRetriever's indexes come to exact search on real embeddings.

Embeds every LoCoMo turn and question with a MemoryEncoder (default: the bundled all-MiniLM-L6-v2),
then, with each conversation as an owner and with all turns under one owner, compares each index
kind's top-k with numpy brute force (recall@k against exact) and times the searches.

    nice -n 5 .venv/bin/python scripts/faiss_recall.py --json bench/results/faiss_recall.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from memnets.nn.embedding_cache import embed_texts
from memnets.nn.encoder import DEFAULT_BACKBONE
from memnets.retrieval.faiss_retriever import FaissRetriever
from memnets.training.data.locomo import load_locomo, memory_id


def recall_against_exact(got: list[list[str]], exact: list[list[str]]) -> float:
    return float(np.mean([len(set(g) & set(e)) / len(e) for g, e in zip(got, exact)]))


def exact_top_k(queries: np.ndarray, vectors: np.ndarray, ids: list[str], k: int) -> tuple[list[list[str]], np.ndarray]:
    """numpy brute force: the top-k ids and the full score matrix [Q, N]."""
    scores = queries @ vectors.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return [[ids[j] for j in row] for row in order], scores


def score_equivalent(got: list[list[str]], scores: np.ndarray, ids: list[str], k: int, tol: float = 1e-5) -> int:
    """How many returned lists are an exact top-k up to ties: their true scores equal the k best."""
    column = {memory_id: j for j, memory_id in enumerate(ids)}
    best = -np.sort(-scores, axis=1)[:, :k]
    return sum(
        bool(np.allclose(np.sort([scores[q, column[i]] for i in row])[::-1], best[q], atol=tol))
        for q, row in enumerate(got)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default=DEFAULT_BACKBONE)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--indexes",
        nargs="+",
        default=["flat", "hnsw", "ivf", "ivf-sq8", "HNSW16,Flat", "IVF16,PQ16x4"],
        help="index kinds: flat, hnsw, ivf, auto or FAISS factory strings",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    conversations = load_locomo()
    turns = [
        (conv.sample_id, memory_id(conv.sample_id, t.dia_id), t.content) for conv in conversations for t in conv.turns
    ]
    questions = [(conv.sample_id, item.question) for conv in conversations for item in conv.qa]
    started = time.perf_counter()
    # embedded once per (encoder, texts) and cached under data/cache/embeddings
    vectors = embed_texts([t[2] for t in turns], "memory", args.encoder).lookup([t[2] for t in turns]).numpy()
    queries = embed_texts([q[1] for q in questions], "query", args.encoder).lookup([q[1] for q in questions]).numpy()
    print(
        f"embedded {len(turns)} turns and {len(questions)} questions in {time.perf_counter() - started:.0f}s (dim {vectors.shape[1]})"
    )
    owners = np.array([t[0] for t in turns])
    query_owners = np.array([q[0] for q in questions])
    ids = [t[1] for t in turns]

    results = []
    for layout in ("per-conversation owners", "one owner"):
        for kind in args.indexes:
            retriever = FaissRetriever(vectors.shape[1], kind, use_gpu=False, exact_below=0, background=False)
            started = time.perf_counter()
            if layout == "one owner":
                retriever.add(ids, vectors, "all")
                groups = [("all", np.arange(len(ids)), np.arange(len(questions)))]
            else:
                groups = []
                for owner in dict.fromkeys(owners):
                    rows = np.flatnonzero(owners == owner)
                    retriever.add([ids[i] for i in rows], vectors[rows], owner)
                    groups.append((owner, rows, np.flatnonzero(query_owners == owner)))
            retriever.search(queries[:1], args.k, groups[0][0])  # each owner's first add built its index
            build = time.perf_counter() - started
            recalls, identical, equivalent, search_time = [], 0, 0, 0.0
            for owner, rows, qrows in groups:
                started = time.perf_counter()
                got, _ = retriever.search(queries[qrows], args.k, owner)
                search_time += time.perf_counter() - started
                owner_ids = [ids[i] for i in rows]
                exact, scores = exact_top_k(queries[qrows], vectors[rows], owner_ids, args.k)
                recalls.append(recall_against_exact(got, exact) * len(qrows))
                identical += sum(g == e for g, e in zip(got, exact))
                equivalent += score_equivalent(got, scores, owner_ids, args.k)
            row = {
                "layout": layout,
                "index": kind,
                "owners": len(groups),
                "vectors": len(ids),
                "queries": len(questions),
                f"recall@{args.k}_vs_exact": sum(recalls) / len(questions),
                "identical_top_k_lists": identical,
                "top_k_lists_exact_up_to_ties": equivalent,
                "build_s": round(build, 3),
                "search_ms_per_query": round(1000 * search_time / len(questions), 4),
            }
            results.append(row)
            print(json.dumps(row))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps({"encoder": str(args.encoder), "k": args.k, "results": results}, indent=2)
        )


if __name__ == "__main__":
    main()
