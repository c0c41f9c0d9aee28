"""Real MiniLM embeddings of LoCoMo, computed once and cached, and their scaled-up copies.

Memories are all 4,526 turns plus the observation facts of the 8 conversations; queries are the
QA questions. They are embedded with the untrained backbone through MemoryEncoder. For sizes
beyond the real set, :func:`scaled` repeats the real vectors with small Gaussian noise and
renormalises them: the neighbourhood structure is then realistic locally, but every real memory
has many near-duplicates, which the report states.
"""

from __future__ import annotations

import hashlib
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
    """(memory vectors [M, 384], query vectors [Q, 384]) float32, unit norm; cached in cache_dir."""
    from memnets.nn.encoder import DEFAULT_BACKBONE

    memories, queries = locomo_texts()
    key = hashlib.sha256("\n".join([DEFAULT_BACKBONE, *memories, "\x00", *queries]).encode()).hexdigest()[:12]
    path = Path(cache_dir) / f"locomo-minilm-{key}.npz"
    if path.is_file():
        cached = np.load(path)
        return cached["memories"], cached["queries"]
    from memnets.nn.encoder import MemoryEncoder

    encoder = MemoryEncoder.from_pretrained()
    memory_vectors = encoder.encode(memories, kind="memory", batch_size=batch_size, progress=True).numpy()
    query_vectors = encoder.encode(queries, kind="query", batch_size=batch_size, progress=True).numpy()
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, memories=memory_vectors, queries=query_vectors)
    return memory_vectors, query_vectors


def scaled(base: np.ndarray, n: int, noise: float = DEFAULT_NOISE, seed: int = 1234, chunk: int = 100_000) -> np.ndarray:
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
