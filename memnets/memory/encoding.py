"""The encoder calls of the write and search paths: texts to float32 rows, a long text's further windows.

Every encode of a memory or a query goes through :func:`embed`, so it is the one place that opens
the ``memnets.encode`` span (:mod:`memnets.tracing`: how many texts, their kind, the encoder's class;
never the texts).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memnets.chunking import windows
from memnets.tracing import span


def embed(encoder, texts: Sequence[str], kind: str = "memory") -> np.ndarray:
    """``encoder.encode`` as float32 numpy rows ``[n, dim]``."""
    attributes = {"memnets.texts": len(texts), "memnets.kind": kind, "memnets.class": type(encoder).__name__}
    with span("memnets.encode", attributes):
        vectors = encoder.encode(list(texts), kind=kind)
    return np.asarray(vectors, dtype=np.float32).reshape(len(texts), encoder.dim)


def chunk_vectors(encoder, texts: Sequence[str]) -> list[np.ndarray]:
    """Per text, the vectors ``[m, dim]`` of its windows after the first (:func:`memnets.chunking.windows`;
    m = 0 when it fits one), the windows of all texts encoded in one call."""
    per_text = [windows(encoder, text) for text in texts]
    flat = [window for texts_windows in per_text for window in texts_windows]
    vectors = embed(encoder, flat) if flat else np.zeros((0, encoder.dim), np.float32)
    ends = np.cumsum([0, *map(len, per_text)])
    return [vectors[a:b] for a, b in zip(ends[:-1], ends[1:])]


__all__ = ["chunk_vectors", "embed"]
