"""Hard negatives for retrieval pairs: turns of the same conversation that look relevant but are not.

For each (query, positive turn) pair, the other turns of the query's conversation are scored with a
miner (BM25, or an encoder such as the untrained backbone), and the best-scoring ones are kept as
candidates, except

- any positive of the query (every evidence turn of a question, asked once or several times);
- turns scoring above ``(1 - relative_margin) * score(query, positive)``: a turn the miner likes
  nearly as much as (or more than) the labelled positive is too likely an unlabelled positive
  (a false negative) to be pushed away. This is sentence-transformers' ``relative_margin``.

Pairs whose candidates run short are filled with random non-positive turns of the same
conversation, so every pair has ``top_k`` candidates; training samples its hard negatives from
them afresh each epoch. Results are cached on disk (JSON) keyed by the pairs and the settings.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from memnets.progress import track
from memnets.protocols import TextEncoder
from memnets.training.data.locomo import Conversation

MINERS = ("bm25", "encoder")


def query_positives(pairs: Sequence[Mapping]) -> dict[tuple[str, str], set[str]]:
    """(conv_id, query text) -> every positive dia_id of that query across the pairs."""
    positives: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in pairs:
        positives[(row["conv_id"], row["query"])].add(row["positive_id"])
    return positives


def _scores(miner: str, conversation: Conversation, queries: list[str], encoder: TextEncoder | None) -> np.ndarray:
    documents = [turn.content for turn in conversation.turns]
    if miner == "bm25":
        from memnets.training.retrieval.bm25 import BM25Ranker

        return BM25Ranker().scores(documents, queries)
    memories = encoder.encode(documents, kind="memory")
    return encoder.encode(queries, kind="query").numpy() @ memories.numpy().T


def mine_hard_negatives(
    pairs: Sequence[Mapping],
    conversations: Mapping[str, Conversation],
    *,
    miner: str = "encoder",
    encoder: TextEncoder | None = None,
    top_k: int = 20,
    relative_margin: float = 0.05,
    seed: int = 0,
    progress: bool = True,
) -> list[list[str]]:
    """Hard-negative dia_ids (``top_k`` each, best first) for every pair, in the pairs' order.

    Args:
        pairs: rows with ``conv_id``, ``query``, ``positive_id`` (as from ``build_retrieval_pairs``).
        conversations: sample_id -> Conversation for every ``conv_id`` of the pairs.
        miner: ``"bm25"`` or ``"encoder"`` (then ``encoder`` must have ``encode(texts, kind)``).
        top_k: candidates kept per pair.
        relative_margin: drop turns scoring above ``(1 - relative_margin) * positive score``.
    """
    if miner not in MINERS:
        raise ValueError(f"miner must be one of {MINERS}, got {miner!r}")
    if miner == "encoder" and encoder is None:
        raise ValueError("miner='encoder' needs an encoder")
    if top_k < 1 or not 0 <= relative_margin < 1:
        raise ValueError(f"need top_k >= 1 and 0 <= relative_margin < 1, got {top_k}, {relative_margin}")
    missing = sorted({row["conv_id"] for row in pairs} - set(conversations))
    if missing:
        raise ValueError(f"pairs name conversations {missing} that were not given")
    positives = query_positives(pairs)
    rng = random.Random(seed)
    by_conv: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(pairs):
        by_conv[row["conv_id"]].append(i)
    result: list[list[str]] = [[] for _ in pairs]
    for conv_id, rows in track(sorted(by_conv.items()), desc=f"mining hard negatives ({miner})", disable=not progress):
        conversation = conversations[conv_id]
        ids = [turn.dia_id for turn in conversation.turns]
        index = conversation.turn_index
        queries = sorted({pairs[i]["query"] for i in rows})
        query_row = {query: j for j, query in enumerate(queries)}
        scores = _scores(miner, conversation, queries, encoder)
        for i in rows:
            row = pairs[i]
            exclude = positives[(conv_id, row["query"])]
            query_scores = scores[query_row[row["query"]]]
            ceiling = (1 - relative_margin) * query_scores[index[row["positive_id"]]]
            order = np.argsort(-query_scores, kind="stable")
            chosen = [ids[j] for j in order if ids[j] not in exclude and query_scores[j] < ceiling][:top_k]
            if len(chosen) < top_k:
                rest = [d for d in ids if d not in exclude and d not in chosen]
                chosen += rng.sample(rest, min(top_k - len(chosen), len(rest)))
            result[i] = chosen
    return result


def cached_hard_negatives(
    cache_dir: str | Path,
    pairs: Sequence[Mapping],
    conversations: Mapping[str, Conversation],
    *,
    encoder_loader: Callable[[], object] | None = None,
    encoder_name: str | None = None,
    **settings,
) -> list[list[str]]:
    """:func:`mine_hard_negatives`, memoised as JSON under ``cache_dir/hard_negatives/``.

    The key covers the pairs, the settings and ``encoder_name`` (the miner encoder's identity: its
    folder and prefixes). ``encoder_loader`` builds the miner encoder only on a cache miss.
    """
    digest = hashlib.sha256()
    for row in pairs:
        digest.update(f"{row['conv_id']}\0{row['query']}\0{row['positive_id']}\n".encode())
    key_settings = {k: v for k, v in settings.items() if k not in {"encoder", "progress"}} | {"encoder": encoder_name}
    digest.update(json.dumps(key_settings, sort_keys=True, default=str).encode())
    path = Path(cache_dir) / "hard_negatives" / f"{digest.hexdigest()[:16]}.json"
    if path.is_file():
        return json.loads(path.read_text())
    if encoder_loader is not None:
        settings["encoder"] = encoder_loader()
    result = mine_hard_negatives(pairs, conversations, **settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    return result
