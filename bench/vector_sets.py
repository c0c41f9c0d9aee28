"""Vector sets the growth benchmark grows an index on: real embeddings and harder synthetic ones.

Each set is deterministic (seeded) and comes as (memories [n, 384], queries_for): ``queries_for(m)``
gives the queries measured once m memories are in the index.

- ``real``: LoCoMo's MiniLM vectors, then noisy renormalised copies of them (``bench.common.scaled``);
  queries: the LoCoMo questions.
- ``loose`` / ``tight``: ``CLUSTERS`` Gaussian clusters in 384 dimensions, in random order; a
  member is its centre plus noise of ``LOOSE_SPREAD`` / ``TIGHT_SPREAD`` times the spread of the
  centres (1.0 would be noise as wide as the centres are apart: then no IVF of 2*sqrt(n) lists finds
  0.95 of the true neighbours at 2 ms, see docs/benchmarks.md).
- ``drift``: the same clusters at ``DRIFT_SPREAD``, in cluster order, so that every later add comes
  from clusters the index has not seen (lists trained on the early clusters receive them).

Synthetic queries are perturbed copies (noise ``QUERY_NOISE`` of the centres' spread) of memories
drawn from the first m, so that they ask about what is in the index at that point.
"""

from __future__ import annotations

import numpy as np

from bench.common import DEFAULT_NOISE, scaled

VECTOR_SETS = ("real", "loose", "tight", "drift")
DIM = 384
CLUSTERS = 4_000
LOOSE_SPREAD = 0.8
TIGHT_SPREAD = 0.3
DRIFT_SPREAD = 0.5
QUERY_NOISE = 0.3
CHUNK = 100_000  # rows generated at a time (float32), so that peak memory stays near the output


def vector_set(name: str, n: int, queries: int, real: tuple[np.ndarray, np.ndarray] | None = None):
    """(memories [n, DIM] float32 unit rows, queries_for) of the named set; ``real``: (LoCoMo
    memory vectors, question vectors), needed for ``real`` only."""
    if name == "real":
        if real is None:
            raise ValueError("vector_set: 'real' needs the LoCoMo (memory, question) vectors")
        base, questions = real
        return scaled(base, n, noise=DEFAULT_NOISE), lambda m: questions[:queries]
    spreads = {"loose": LOOSE_SPREAD, "tight": TIGHT_SPREAD, "drift": DRIFT_SPREAD}
    if name not in spreads:
        raise ValueError(f"vector_set: unknown set {name!r}, expected one of {VECTOR_SETS}")
    memories = gaussian_clusters(n, spreads[name], ordered=name == "drift", seed=VECTOR_SETS.index(name))
    return memories, lambda m: perturbed(memories[:m], queries, seed=m)


def gaussian_clusters(n: int, spread: float, *, ordered: bool, seed: int) -> np.ndarray:
    """n unit vectors from CLUSTERS Gaussian clusters (centres N(0, 1/DIM) per coordinate, members
    centre + N(0, spread^2/DIM)); ``ordered``: cluster by cluster instead of shuffled."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 1.0 / np.sqrt(DIM), size=(CLUSTERS, DIM)).astype(np.float32)
    members = rng.integers(0, CLUSTERS, n)
    if ordered:
        members = np.sort(members)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        block = centres[members[start:stop]] + rng.normal(0.0, spread / np.sqrt(DIM), (stop - start, DIM)).astype(
            np.float32
        )
        out[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def perturbed(memories: np.ndarray, count: int, seed: int) -> np.ndarray:
    """``count`` queries: memories drawn at random (seeded), plus noise QUERY_NOISE, renormalised."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(memories), min(count, len(memories)), replace=False)
    queries = memories[picks] + rng.normal(0.0, QUERY_NOISE / np.sqrt(DIM), (len(picks), DIM)).astype(np.float32)
    return queries / np.linalg.norm(queries, axis=1, keepdims=True)
