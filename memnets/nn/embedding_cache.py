"""Embeddings computed once: the one embedding cache of memnets, on disk and in memory.

On disk (:func:`embed_texts` -> :class:`EmbeddingTable`): frozen encoder embeddings of a dataset's
texts, for the heads' training and evaluation and for the benchmarks. In memory
(:class:`CachedEncoder`): an encoder that remembers what it embedded, for a process that encodes
the same texts again and again (the replay of one conversation through several managers).

The heads (importance head, recall-gate head) train on embeddings from a frozen encoder, so every
unique text is embedded once per (encoder, text set, kind) and stored as a safetensors file under
``data/cache/embeddings/``. The file name is keyed by a checksum of the encoder folder (weights,
tokenizer and prefixes all count) and a digest of the texts, so a retrained encoder or a changed
dataset can never be served stale vectors. Nothing is unpickled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from memnets.nn.backbones import resolve_backbone
from memnets.nn.encoder import DEFAULT_BACKBONE
from memnets.protocols import Kind, TextEncoder

CACHE_VERSION = 1


def encoder_checksum(path: str | Path) -> str:
    """SHA-256 over the relative names and bytes of every file in an encoder folder.

    This identifies the encoder a head was trained on (stored with the head) and keys the cache.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"encoder path {str(root)!r} is not a folder")
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(root)).encode() + b"\0")
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 of an ordered list of texts (the dataset side of the cache key)."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()


@dataclass
class EmbeddingTable:
    """Unique texts and their unit vectors: ``vectors[row(text)]`` is the embedding of ``text``."""

    texts: list[str]
    vectors: torch.Tensor  # [N, dim] float32
    encoder_checksum: str

    def __post_init__(self) -> None:
        if self.vectors.shape[0] != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {self.vectors.shape[0]} vectors")
        self._row = {text: i for i, text in enumerate(self.texts)}

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def rows(self, texts: Iterable[str]) -> torch.Tensor:
        """Row indices (long) of ``texts``; a text that was not embedded is an error naming it."""
        try:
            return torch.tensor([self._row[text] for text in texts], dtype=torch.long)
        except KeyError as error:
            raise KeyError(f"text not in the embedding table: {error.args[0]!r}") from None

    def lookup(self, texts: Iterable[str]) -> torch.Tensor:
        """The vectors of ``texts`` in order, ``[len(texts), dim]``."""
        return self.vectors[self.rows(texts)]


def embed_texts(
    texts: Iterable[str],
    kind: Kind,
    encoder_path: str | Path | None = None,
    cache_dir: str | Path = "data/cache/embeddings",
    batch_size: int = 64,
    progress: bool = True,
) -> EmbeddingTable:
    """Embed the unique ``texts`` with the frozen encoder at ``encoder_path`` (a folder or a backbone name of
    :mod:`memnets.nn.backbones`; cached on disk).

    Texts are deduplicated and sorted, so the same set always maps to the same cache file
    ``{encoder checksum}-{texts digest}-{kind}.safetensors``. The encoder is loaded only on a miss.
    """
    encoder_path = resolve_backbone(encoder_path if encoder_path is not None else DEFAULT_BACKBONE)
    if kind not in ("memory", "query"):
        raise ValueError(f"kind must be 'memory' or 'query', got {kind!r}")
    unique = sorted(set(texts))
    checksum = encoder_checksum(encoder_path)
    file = Path(cache_dir) / f"{checksum[:16]}-{texts_digest(unique)[:16]}-{kind}-v{CACHE_VERSION}.safetensors"
    if file.is_file():
        with safe_open(str(file), framework="pt") as handle:
            metadata = handle.metadata() or {}
            if metadata.get("encoder_checksum") == checksum and int(metadata.get("count", -1)) == len(unique):
                return EmbeddingTable(unique, handle.get_tensor("vectors"), checksum)
    from memnets.nn.encoder import MemoryEncoder  # loaded only when something must be embedded

    encoder = MemoryEncoder.from_pretrained(encoder_path)
    if torch.cuda.is_available():  # embedding is the only heavy step of the heads: use a GPU when there is one
        encoder.cuda()
    vectors = encoder.encode(unique, kind=kind, batch_size=batch_size, progress=progress).contiguous()
    file.parent.mkdir(parents=True, exist_ok=True)
    metadata = {
        "encoder_path": str(encoder_path),
        "encoder_checksum": checksum,
        "kind": kind,
        "count": str(len(unique)),
        "texts_digest": texts_digest(unique),
    }
    tmp = file.with_suffix(".tmp")
    save_file({"vectors": vectors}, str(tmp), metadata=metadata)
    tmp.replace(file)  # atomic: a crashed run never leaves a half-written cache entry
    return EmbeddingTable(unique, vectors, checksum)


class CachedEncoder:
    """An encoder that remembers what it embedded, looked up by (kind, text).

    Wraps any :class:`~memnets.protocols.TextEncoder` and is one itself (``dim``, ``tokenizer``,
    ``fingerprint``, ``encode``); its vectors equal the wrapped encoder's. Several replays of one conversation then
    encode it once.
    """

    def __init__(self, encoder: TextEncoder):
        self.encoder = encoder
        self.dim = encoder.dim
        self.tokenizer = encoder.tokenizer
        self.cache: dict[tuple[str, str], np.ndarray] = {}

    @property
    def fingerprint(self) -> str:
        """The wrapped encoder's (the vectors are its vectors)."""
        return self.encoder.fingerprint

    @property
    def source(self) -> str:
        return getattr(self.encoder, "source", type(self.encoder).__name__)

    def encode(self, texts, kind: Kind = "memory", **kwargs) -> torch.Tensor:
        missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self.cache))
        if missing:
            for text, vector in zip(missing, self.encoder.encode(missing, kind=kind, **kwargs).numpy()):
                self.cache[(kind, text)] = vector
        return torch.from_numpy(np.stack([self.cache[(kind, t)] for t in texts])) if texts else torch.empty(0, self.dim)

    def prefill(self, texts, kind: Kind) -> None:
        """Embed many texts in large batches up front (far faster than one by one later)."""
        self.encode(list(texts), kind=kind, progress=True)


__all__ = ["CachedEncoder", "EmbeddingTable", "embed_texts", "encoder_checksum", "texts_digest"]
