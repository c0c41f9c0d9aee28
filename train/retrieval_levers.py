"""Training-free retrieval levers on one encoder, measured on the validation conversation(s).

Every lever re-scores the same vectors, so one encoding pass per conversation serves all of them:

- ``dense``: cosine of the encoder (the reference); ``bm25 alone`` for comparison;
- ``bm25 z-fusion w``: z(cosine) + w * z(BM25) over the conversation's turns (BM25 as a feature);
- ``prf gamma``: pseudo-relevance feedback (Rocchio): the query vector plus gamma times the mean of
  its top 3 memory vectors, renormalised, searched again (two searches per query);
- ``neighbours beta``: each turn's score plus beta times the best score of the turns just before and
  after it in the same session (how much a turn's context would add; needs turn order at search time,
  which the stores do not keep, so it can only motivate training context in, never be kept as is);
- ``maxsim w + bm25 v``: z(cosine) + w * z(late interaction) + v * z(BM25), where late interaction
  is ColBERT's MaxSim on the same encoder's token states (each question token's best cosine with a
  turn's tokens, averaged over the question's tokens), without training: does token-level matching
  add what pooling loses, alone (v = 0) and beside BM25? Its cost includes the turns' token states,
  which a deployment would compute at ingestion and store (~30 x 384 floats per memory).

Printed as a Markdown table (overall recall@k, MRR@10, per-category recall@10) with the added cost
per query of each lever, and saved as JSON. Usage::

    python train/retrieval_levers.py --encoder checkpoints/encoder/best --split validation \\
        --json checkpoints/eval/levers-validation.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.data.locomo import CATEGORY_NAMES
from memnets.training.retrieval.bm25 import BM25Ranker
from memnets.training.retrieval.metrics import (
    DEFAULT_CATEGORIES,
    DEFAULT_KS,
    question_metrics,
    summarize,
)

FUSION_WEIGHTS = (0.1, 0.2, 0.3, 0.5)
PRF_GAMMAS = (0.25, 0.5)
NEIGHBOUR_BETAS = (0.1, 0.2, 0.3)
MAXSIM_WEIGHTS = (0.3, 0.5)
MAXSIM_BM25_WEIGHTS = (0.0, 0.05, 0.1, 0.15)


def zscore(scores: np.ndarray) -> np.ndarray:
    """Per query (row): (s - mean) / std over the conversation's turns (std 0 -> zeros)."""
    std = scores.std(axis=1, keepdims=True)
    return np.where(std > 1e-12, (scores - scores.mean(axis=1, keepdims=True)) / np.maximum(std, 1e-12), 0.0)


def prf(queries: np.ndarray, memories: np.ndarray, gamma: float, top: int = 3) -> np.ndarray:
    """Scores after one round of Rocchio feedback from each query's ``top`` memories."""
    first = queries @ memories.T
    best = np.argsort(-first, axis=1)[:, :top]
    expanded = queries + gamma * memories[best].mean(axis=1)
    expanded /= np.linalg.norm(expanded, axis=1, keepdims=True)
    return expanded @ memories.T


def neighbours(scores: np.ndarray, sessions: np.ndarray, beta: float) -> np.ndarray:
    """scores + beta * max(score of the previous turn, of the next turn) within the same session."""
    low = np.full_like(scores, -np.inf)
    before, after = low.copy(), low.copy()
    same_prev = sessions[1:] == sessions[:-1]
    before[:, 1:] = np.where(same_prev, scores[:, :-1], -np.inf)
    after[:, :-1] = np.where(same_prev, scores[:, 1:], -np.inf)
    best = np.maximum(before, after)
    return scores + beta * np.where(np.isfinite(best), best, 0.0)


def token_states(encoder: MemoryEncoder, texts: list[str], kind: str, batch_size: int = 64) -> np.ndarray:
    """Unit-norm last-layer token states ``[N, L, hidden]`` of ``texts``, zero at padding and at the
    [CLS]/[SEP] tokens (so they never win a max), in input order."""
    tokens = encoder.tokenize(texts, kind)
    out = np.zeros((*tokens["input_ids"].shape, encoder.backbone.config.hidden_size), dtype=np.float32)
    special = torch.tensor(encoder.tokenizer.all_special_ids)
    encoder.eval()
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            ids = tokens["input_ids"][start : start + batch_size]
            mask = tokens["attention_mask"][start : start + batch_size]
            hidden = encoder.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
            keep = (mask.bool() & ~torch.isin(ids, special)).unsqueeze(-1)
            out[start : start + batch_size] = (torch.nn.functional.normalize(hidden, dim=-1) * keep).numpy()
    return out


def maxsim(queries: np.ndarray, memories: np.ndarray) -> np.ndarray:
    """Late-interaction scores ``[Q, M]``: per question token, the best cosine with a memory's tokens,
    averaged over the question's (non-zero) tokens."""
    counts = np.maximum((np.abs(queries).sum(-1) > 0).sum(-1), 1)  # [Q]
    scores = np.empty((len(queries), len(memories)))
    for q, query in enumerate(queries):
        best = np.einsum("qh,mlh->mql", query, memories, optimize=True).max(axis=-1)  # [M, Lq]
        scores[q] = best.sum(axis=-1) / counts[q]
    return scores


def levers(encoder: MemoryEncoder, conversations, categories=DEFAULT_CATEGORIES) -> tuple[dict, dict, dict]:
    """{lever: per-question metric rows}, {lever: seconds of added work}, and timing counts."""
    rows: dict[str, list[dict]] = {}
    seconds: dict[str, float] = {}
    timing = {"queries": 0, "memories": 0, "encode_memories_s": 0.0, "encode_queries_s": 0.0}

    def add(name: str, scores: np.ndarray, items, ids, conv_id: str, spent: float) -> None:
        seconds[name] = seconds.get(name, 0.0) + spent
        for item, row in zip(items, scores):
            ranked = [ids[i] for i in np.argsort(-row, kind="stable")]
            rows.setdefault(name, []).append(
                {"conv_id": conv_id, "qa_index": item.index, "category": item.category}
                | question_metrics(ranked, item.evidence, DEFAULT_KS)
            )

    for conv in conversations:
        items = [item for item in conv.qa if item.category in categories and item.evidence]
        if not items:
            continue
        ids = [turn.dia_id for turn in conv.turns]
        sessions = np.array([turn.session for turn in conv.turns])
        start = time.perf_counter()
        memories = encoder.encode([turn.content for turn in conv.turns], kind="memory").numpy().astype(np.float64)
        timing["encode_memories_s"] += time.perf_counter() - start
        start = time.perf_counter()
        queries = encoder.encode([item.question for item in items], kind="query").numpy().astype(np.float64)
        timing["encode_queries_s"] += time.perf_counter() - start
        timing["queries"] += len(items)
        timing["memories"] += len(ids)

        start = time.perf_counter()
        dense = queries @ memories.T
        add("dense", dense, items, ids, conv.sample_id, time.perf_counter() - start)
        start = time.perf_counter()
        lexical = zscore(BM25Ranker().scores([turn.content for turn in conv.turns], [item.question for item in items]))
        bm25_seconds = time.perf_counter() - start
        add("bm25 alone", lexical, items, ids, conv.sample_id, bm25_seconds)
        for weight in FUSION_WEIGHTS:
            start = time.perf_counter()
            add(
                f"bm25 z-fusion {weight}",
                zscore(dense) + weight * lexical,
                items,
                ids,
                conv.sample_id,
                bm25_seconds + time.perf_counter() - start,
            )
        for gamma in PRF_GAMMAS:
            start = time.perf_counter()
            add(f"prf {gamma}", prf(queries, memories, gamma), items, ids, conv.sample_id, time.perf_counter() - start)
        for beta in NEIGHBOUR_BETAS:
            start = time.perf_counter()
            add(
                f"neighbours {beta}",
                neighbours(dense, sessions, beta),
                items,
                ids,
                conv.sample_id,
                time.perf_counter() - start,
            )
        start = time.perf_counter()
        interaction = zscore(
            maxsim(
                token_states(encoder, [item.question for item in items], "query"),
                token_states(encoder, [turn.content for turn in conv.turns], "memory"),
            )
        )
        maxsim_seconds = time.perf_counter() - start
        for weight in MAXSIM_WEIGHTS:
            for lexical_weight in MAXSIM_BM25_WEIGHTS:
                add(
                    f"maxsim {weight} + bm25 {lexical_weight}",
                    zscore(dense) + weight * interaction + lexical_weight * lexical,
                    items,
                    ids,
                    conv.sample_id,
                    maxsim_seconds + (bm25_seconds if lexical_weight else 0.0),
                )
    return rows, seconds, timing


def markdown(reports, seconds: dict, timing: dict) -> str:
    categories = sorted({c for report in reports for c in report.by_category})
    head = [
        "lever",
        *(f"R@{k}" for k in DEFAULT_KS),
        "MRR@10",
        *(f"R@10 {CATEGORY_NAMES[c]} ({reports[0].counts[f'category_{c}']})" for c in categories),
        "added ms/query",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for report in reports:
        cells = [
            report.name,
            *(f"{100 * report.overall[f'recall@{k}']:.1f}" for k in DEFAULT_KS),
            f"{100 * report.overall['mrr@10']:.1f}",
            *(f"{100 * report.by_category[c]['recall@10']:.1f}" for c in categories),
            f"{1000 * seconds[report.name] / timing['queries']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default=DEFAULT_BACKBONE, help="encoder folder (default: the untrained backbone)")
    parser.add_argument("--split", default="validation", choices=("train", "validation", "test"))
    parser.add_argument("-c", "--config", default=None, help="data config (default: the bundled LoCoMo config)")
    parser.add_argument("--json", default=None, type=Path, help="write the reports and timings here")
    args = parser.parse_args(argv)
    config = load_data_config(args.config)
    conversations = load_conversations(config.path, config.splits[args.split])
    encoder = MemoryEncoder.from_pretrained(args.encoder)
    rows, seconds, timing = levers(encoder, conversations)
    reports = [summarize(name, lever_rows) for name, lever_rows in rows.items()]
    print(
        f"{args.split} split ({', '.join(c.sample_id for c in conversations)}), encoder {args.encoder}; "
        f"{timing['queries']} questions, {timing['memories']} turns; encoding took "
        f"{timing['encode_memories_s']:.1f} s (turns) + {timing['encode_queries_s']:.1f} s (questions)\n"
    )
    print(markdown(reports, seconds, timing))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "encoder": str(args.encoder),
                    "split": args.split,
                    "timing": timing,
                    "added_seconds": seconds,
                    "reports": [r.to_dict() for r in reports],
                },
                indent=2,
            )
        )
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
