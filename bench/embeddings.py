"""Real MiniLM embeddings of LoCoMo, computed once and cached, and their scaled-up copies.

Memories are all 4,526 turns plus the observation facts of the 8 conversations; queries are the
QA questions. They are embedded with the untrained backbone through MemoryEncoder. For sizes
beyond the real set, :func:`scaled` repeats the real vectors with small Gaussian noise and
renormalises them: the neighbourhood structure is then realistic locally, but every real memory
has many near-duplicates, which the report states.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DEFAULT_NOISE = 0.02  # per-dimension std of the noise added to copies (unit vectors, d=384)


def locomo_texts() -> tuple[list[str], list[str]]:
    """(memory texts: turns + observation facts, query texts: QA questions) of all conversations."""
    from memnets.data.locomo import load_locomo

    memories, queries = [], []
    for conv in load_locomo():
        memories.extend(turn.content for turn in conv.turns)
        memories.extend(fact.text for fact in conv.observations)
        queries.extend(item.question for item in conv.qa)
    return memories, queries


def real_embeddings(cache_dir: Path, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(memory vectors [M, 384], query vectors [Q, 384]) float32, unit norm, in the order of
    :func:`locomo_texts`; embedded once through memnets' embedding cache (``embed_texts``) in cache_dir."""
    from memnets.nn.embedding_cache import embed_texts

    memories, queries = locomo_texts()
    tables = {
        kind: embed_texts(texts, kind, cache_dir=cache_dir, batch_size=batch_size)
        for kind, texts in (("memory", memories), ("query", queries))
    }
    return tables["memory"].lookup(memories).numpy(), tables["query"].lookup(queries).numpy()


def scaled(
    base: np.ndarray, n: int, noise: float = DEFAULT_NOISE, seed: int = 1234, chunk: int = 100_000
) -> np.ndarray:
    """n unit vectors: the base vectors first, then noisy renormalised copies of them in turn.

    Built chunk by chunk so that peak memory stays near one copy of the output.
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    if base.ndim != 2 or base.shape[0] == 0:
        raise ValueError(f"base must be a non-empty [N, d] array, got shape {base.shape}")
    rng = np.random.default_rng(seed)
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    first = min(n, base.shape[0])
    out[:first] = base[:first]
    for start in range(first, n, chunk):
        stop = min(n, start + chunk)
        rows = base[np.arange(start, stop) % base.shape[0]]
        block = rows + rng.normal(0.0, noise, size=rows.shape).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:stop] = block
    return out
