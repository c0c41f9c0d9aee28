"""Re-embedding a store with a new encoder: resumable, shareable by several workers, answering meanwhile.

A store filled by one encoder cannot be searched with another (:mod:`memnets.store.identity`). To
move it to a new encoder (a trained pack's, another backend), :func:`reembed` embeds every row of
every user again (current memories, their older versions and any other stored row) in batches:

- a current memory longer than the encoder's window is embedded window by window
  (:mod:`memnets.chunking`), its further windows' vectors saved with its new main vector;
- each batch's new vectors go to a side table (keyed by row and by the row's version, so a memory
  rewritten meanwhile is embedded again), committed per batch: a worker killed at any moment
  (SIGKILL included) loses at most the batch it was encoding, and the next run carries on from the
  rows that have no new vector yet; nothing is embedded twice into the result;
- searches keep answering from the old vectors (and the old encoder) until the swap;
- the swap, once every row has its new vector, is one transaction: vectors, recorded encoder
  identity and dim change together, so a reader sees either the old space or the new one, never a mix;
- on PostgreSQL several workers (processes or machines) can run :func:`reembed` on the same store at
  once: each claims its batches with ``FOR UPDATE SKIP LOCKED``, so every row is embedded by one
  worker, and whichever finds no row left swaps.

Stores that can do this declare the :class:`~memnets.store.protocol.Reembedding` capability:
``reembed_start(identity)``, ``reembed_batch(size)`` (a context manager yielding a
:class:`ReembedBatch`), ``reembed_progress()`` and ``reembed_finish()``.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from memnets.chunking import windows
from memnets.store.identity import EncoderIdentity

log = logging.getLogger(__name__)
DEFAULT_BATCH = 64


@dataclass
class ReembedBatch:
    """Rows claimed for re-embedding: their ``texts`` (the memories' content) and, once set with
    :meth:`save`, their new vectors and chunk vectors; ``keys`` are the store's own row references,
    ``current`` whether each row is a current memory (only those keep chunks)."""

    texts: list[str]
    keys: list = field(default_factory=list)
    current: list[bool] = field(default_factory=list)
    vectors: np.ndarray | None = None
    chunks: list[np.ndarray] | None = None

    def save(self, vectors, dim: int, chunks: list | None = None) -> None:
        """The new vectors [len(texts), dim] and (a store with the Chunks capability) each row's further
        window vectors [m, dim], checked: finite, of the target dim, one per text."""
        array = np.asarray(vectors.numpy() if hasattr(vectors, "numpy") else vectors, dtype=np.float32)
        if array.shape != (len(self.texts), dim):
            raise ValueError(f"reembed: expected vectors of shape ({len(self.texts)}, {dim}), got {array.shape}")
        extra = [np.zeros((0, dim), np.float32)] * len(self.texts) if chunks is None else list(chunks)
        if len(extra) != len(self.texts) or any(np.shape(c)[1:] != (dim,) for c in extra):
            raise ValueError(f"reembed: expected one chunk array [m, {dim}] per text")
        if not np.isfinite(array).all() or not all(np.isfinite(c).all() for c in extra):
            raise ValueError("reembed: the encoder returned NaN or inf")
        self.vectors, self.chunks = array, [np.asarray(c, dtype=np.float32) for c in extra]


@dataclass(frozen=True)
class ReembedReport:
    """What one :func:`reembed` call did: rows it embedded, rows in the store, whether it swapped, seconds."""

    embedded: int
    total: int
    swapped: bool
    seconds: float


def reembed(
    store, encoder, *, batch_size: int = DEFAULT_BATCH, progress: bool | None = None, max_batches: int | None = None
) -> ReembedReport:
    """Re-embed every row of ``store`` with ``encoder`` and swap to it; see the module docstring.

    Resumes a re-embedding to the same encoder that was interrupted; one to another encoder starts
    over. ``progress`` shows a tqdm bar (default: only when stderr is a terminal). ``max_batches``
    stops after that many batches without swapping (tests and benchmarks interrupt it so).
    Returns a :class:`ReembedReport`; ``swapped`` False means other workers still hold batches
    (PostgreSQL) or ``max_batches`` stopped it: run it again to finish.
    """
    from memnets.store.protocol import Reembedding, supports

    if not supports(store, Reembedding):
        raise TypeError(f"reembed: {type(store).__name__} cannot re-embed (no supports_reembed capability)")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"reembed: batch_size must be an int >= 1, got {batch_size!r}")
    identity = EncoderIdentity.of(encoder)
    started = time.perf_counter()
    if store.reembed_start(identity) == "current":
        log.info("reembed: the store is already embedded by %s", identity.describe())
        return ReembedReport(0, store.reembed_progress()[1], False, 0.0)
    done, total = store.reembed_progress()
    embedded = batches = 0
    show = sys.stderr.isatty() if progress is None else progress
    with tqdm(total=total, initial=done, desc="re-embedding memories", unit="mem", disable=not show) as bar:
        while max_batches is None or batches < max_batches:
            with store.reembed_batch(batch_size) as batch:
                if not batch.texts:
                    break
                chunked = [
                    windows(encoder, text) if current else [] for text, current in zip(batch.texts, batch.current)
                ]
                flat = batch.texts + [text for texts in chunked for text in texts]  # one encode call per batch
                vectors = np.asarray(encoder.encode(flat, kind="memory"), dtype=np.float32).reshape(len(flat), -1)
                ends = np.cumsum([len(batch.texts)] + [len(texts) for texts in chunked])
                batch.save(
                    vectors[: len(batch.texts)], identity.dim, [vectors[a:b] for a, b in zip(ends[:-1], ends[1:])]
                )
            embedded += len(batch.texts)
            batches += 1
            bar.update(len(batch.texts))
    swapped = (max_batches is None or batches < max_batches) and store.reembed_finish()
    seconds = time.perf_counter() - started
    log.info("reembed: %d rows embedded in %.1f s; swapped to %s: %s", embedded, seconds, identity.describe(), swapped)
    return ReembedReport(embedded, total, swapped, seconds)
