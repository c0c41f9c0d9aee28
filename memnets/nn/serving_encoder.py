"""The memory encoder for serving, without torch: ONNX Runtime, ``tokenizers`` and numpy.

:class:`ServingEncoder` meets :class:`~memnets.protocols.TextEncoder` as
:class:`~memnets.nn.encoder.MemoryEncoder` does (float32 unit rows, ``dim``, ``tokenizer``,
``fingerprint``, the prefixes, cut and windows of :class:`~memnets.nn.text_window.EncoderTexts`), for a
BERT-family encoder folder: the bundled all-MiniLM-L6-v2 or a folder written by
``MemoryEncoder.save_pretrained`` (a projection included). Its graph is the folder's own exported one
(``onnx/``, ``memnets export --backend``) when there, else built from the weights once and cached
(:mod:`memnets.nn.bert_graph`, :mod:`memnets.nn.graph_cache`); the int8 backends quantise that graph
once, as ``MemoryEncoder`` does.

Its fingerprint is the one ``MemoryEncoder.from_pretrained(folder, backend=...)`` has for the same
backend (the same digest of weights, vocabulary and settings): a store filled by the torch encoder's
``"onnx"`` backend accepts this one's ``"onnx"`` and the other way round, and refuses it where they
differ (``"torch"`` against ``"onnx"``, as before).

Example::

    encoder = ServingEncoder.from_pretrained()          # the bundled all-MiniLM-L6-v2, fp32 ONNX
    encoder.encode(["I adopted a beagle named Rex"]).shape   # (1, 384)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memnets.nn.backbones import CONFIG_NAME, DEFAULT_BACKBONE, NAMED_BACKBONES, PROJECTION_DIR, resolve_backbone
from memnets.nn.bert_graph import GRAPH_VERSION, BertShape, bert_graph
from memnets.nn.bucketing import token_batches
from memnets.nn.fast_tokenizer import FastTokenizer
from memnets.nn.graph_cache import cached_graph, cached_int8, file_sha256, remembered
from memnets.nn.onnx_runtime import ONNX_DIR, ONNX_FILES, VNNI_BACKENDS, GraphSession
from memnets.nn.text_window import EncoderTexts
from memnets.progress import track
from memnets.protocols import Kind

WEIGHTS = "model.safetensors"
SERVING_BACKENDS = ("onnx", "int8", "int8_vnni", "int8_vnni_ffn", "auto")
# buffers of a BERT checkpoint that torch's state_dict leaves out (not persistent): not in the fingerprint
NOT_IN_STATE = ("embeddings.position_ids", "embeddings.token_type_ids")


class ServingEncoder(EncoderTexts):
    """An encoder folder's forward on ONNX Runtime: texts -> float32 unit vectors (see the module)."""

    def __init__(
        self, folder: Path, tokenizer: FastTokenizer, *, dim: int, digest: str, max_length: int,
        query_prefix: str, memory_prefix: str, source: str,
    ) -> None:  # fmt: skip
        self.folder, self.tokenizer, self.dim, self._digest = folder, tokenizer, int(dim), digest
        self.max_length, self.query_prefix, self.memory_prefix = int(max_length), query_prefix, memory_prefix
        self.source = source
        self.backend = "onnx"
        self._session: GraphSession | None = None

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike = DEFAULT_BACKBONE,
        *,
        backend: str = "onnx",
        max_length: int | None = None,
        query_prefix: str | None = None,
        memory_prefix: str | None = None,
    ) -> ServingEncoder:
        """The encoder of folder (or backbone name) ``path`` on ``backend`` (:data:`SERVING_BACKENDS`);
        arguments left None take the folder's saved values, as ``MemoryEncoder.from_pretrained`` does."""
        if backend not in SERVING_BACKENDS:
            raise ValueError(f"backend must be one of {SERVING_BACKENDS} without torch, got {backend!r}")
        name = path if isinstance(path, str) and path in NAMED_BACKBONES else None
        folder = resolve_backbone(path)
        if not (folder / WEIGHTS).is_file() or not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"encoder path {str(folder)!r} is not a folder with a model.safetensors and config.json"
            )
        config = json.loads((folder / "config.json").read_text())
        BertShape.of(config)  # a BERT backbone, or a ValueError naming what it is
        saved = json.loads((folder / CONFIG_NAME).read_text()) if (folder / CONFIG_NAME).is_file() else {}
        length = min(max_length if max_length is not None else saved.get("max_length", 256),
                     int(config.get("max_position_embeddings", 512)))  # fmt: skip
        projection = saved.get("projection_dim")
        tokenizer = FastTokenizer.from_folder(folder)
        queries = query_prefix if query_prefix is not None else saved.get("query_prefix", "")
        memories = memory_prefix if memory_prefix is not None else saved.get("memory_prefix", "")
        settings = [length, queries, memories, "mean", "normalize"]
        digest = weights_digest(folder, settings, tokenizer)
        if str(folder) == DEFAULT_BACKBONE:
            source = "bundled all-MiniLM-L6-v2"
        else:
            source = f"{name} ({folder})" if name else f"encoder folder {folder}"
        dim = projection if projection is not None else int(config["hidden_size"])
        encoder = cls(folder, tokenizer, dim=dim, digest=digest, max_length=length, query_prefix=queries,
                      memory_prefix=memories, source=source)  # fmt: skip
        return encoder.set_backend(backend)

    # ------------------------------------------------------------------ backends
    def set_backend(self, backend: str, folder: str | os.PathLike | None = None) -> ServingEncoder:
        """Compute :meth:`encode` with ``backend`` from now on: the exported graph for it in ``folder``'s
        ``onnx/`` (default: the encoder's folder) when there, else the cached graph built from the weights
        (quantised once for the int8 ones)."""
        if backend not in SERVING_BACKENDS:
            raise ValueError(f"backend must be one of {SERVING_BACKENDS} without torch, got {backend!r}")
        if backend == "auto":
            from memnets.nn.backend_choice import choose_backend

            self.set_backend("onnx", folder)
            choose_backend(self, folder)
            return self
        if backend in VNNI_BACKENDS:
            from memnets.nn.backend_choice import vnni_or_int8

            backend = vnni_or_int8(backend)
        exported = Path(folder if folder is not None else self.folder) / ONNX_DIR / ONNX_FILES[backend]
        self._session = GraphSession(exported if exported.is_file() else self.graph(backend))
        self.backend = backend
        return self

    def graph(self, backend: str = "onnx") -> Path:
        """The cached graph file of this encoder's weights for ``backend``, built when missing."""
        hashes = [file_sha256(self.folder / WEIGHTS)]
        if (self.folder / PROJECTION_DIR / WEIGHTS).is_file():
            hashes.append(file_sha256(self.folder / PROJECTION_DIR / WEIGHTS))
        key = hashlib.sha256(json.dumps(hashes).encode()).hexdigest()[:24]
        fp32 = cached_graph(f"encoder-{key}-g{GRAPH_VERSION}", self._build)
        return fp32 if backend == "onnx" else cached_int8(fp32, backend)

    def _build(self):
        from safetensors.numpy import load_file

        config = json.loads((self.folder / "config.json").read_text())
        weights = {k.removeprefix("bert."): v for k, v in load_file(str(self.folder / WEIGHTS)).items()}
        head = None
        if (self.folder / PROJECTION_DIR / WEIGHTS).is_file():
            linear = load_file(str(self.folder / PROJECTION_DIR / WEIGHTS))
            head = (linear["linear.weight"], linear["linear.bias"])
        return bert_graph(weights, BertShape.of(config), head=head)

    # ------------------------------------------------------------------ computation
    @property
    def fingerprint(self) -> str:
        """``"<backend>:<dim>:<digest>"``, the digest that :attr:`MemoryEncoder.fingerprint` computes."""
        return f"{self.backend}:{self.dim}:{self._digest}"

    def tokenize(self, texts: Sequence[str], kind: Kind = "memory") -> dict[str, np.ndarray]:
        """Prefix, cut, tokenise, truncate and pad ``texts``: int64 ``{"input_ids", "attention_mask"}``."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not one string")
        prefix = self.prefix(kind)
        batch = self.tokenizer.batch([self.cut(prefix + text) for text in texts], self.max_length)
        return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}

    def encode(
        self, texts: Sequence[str], kind: Kind = "memory", batch_size: int = 64, progress: bool = False
    ) -> np.ndarray:
        """Embed ``texts``: float32 unit vectors ``[N, dim]`` in input order (batched by token count)."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not one string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        batches = token_batches(lambda chunk: self.tokenize(chunk, kind), texts, batch_size)
        total = -(-len(texts) // batch_size)
        for index, batch in track(batches, total=total, desc=f"encode {kind}", disable=not progress, unit="batch"):
            out[index] = self._session.run(batch["input_ids"], batch["attention_mask"])
        return out


def weights_digest(folder: Path, settings: list, tokenizer: FastTokenizer) -> str:
    """The digest of :attr:`MemoryEncoder.fingerprint` for ``folder``: SHA-256 over its weights as torch
    names them in the encoder's state_dict (``backbone.*``, ``projection.*``), sorted, then the settings
    and vocabulary; kept in the cache while the files stay the same (:func:`remembered`)."""
    files = [folder / WEIGHTS, folder / PROJECTION_DIR / WEIGHTS, folder / "tokenizer.json"]
    inputs = [[file_sha256(f) if f.is_file() else None for f in files], settings]
    return remembered("fingerprint", inputs, lambda: _digest(folder, settings, tokenizer))


def _digest(folder: Path, settings: list, tokenizer: FastTokenizer) -> str:
    from safetensors.numpy import load_file

    state = {f"backbone.{k.removeprefix('bert.')}": v for k, v in load_file(str(folder / WEIGHTS)).items()}
    state = {k: v for k, v in state.items() if k.removeprefix("backbone.") not in NOT_IN_STATE}
    if (folder / PROJECTION_DIR / WEIGHTS).is_file():
        linear = load_file(str(folder / PROJECTION_DIR / WEIGHTS))
        state |= {f"projection.{k.removeprefix('linear.')}": v for k, v in linear.items()}
    digest = hashlib.sha256()
    for name, array in sorted(state.items()):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update(json.dumps([settings, sorted(tokenizer.get_vocab().items())]).encode())
    return digest.hexdigest()[:32]


__all__ = ["SERVING_BACKENDS", "ServingEncoder", "weights_digest"]
