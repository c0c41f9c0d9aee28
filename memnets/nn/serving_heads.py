"""A pack's importance head and recall gate for serving, without torch: their eval-mode forward in numpy.

:class:`ServingImportance` and :class:`ServingGate` read the folders that
:class:`~memnets.nn.heads.ImportanceHead` and :class:`~memnets.nn.heads.RecallGateHead` save (a pack's
``importance/`` and ``gate/``) by the same rules (:mod:`memnets.nn.head_files`: the config checked, then the
architecture's shapes compared with the weights file's header before anything is read), and answer
``predict_proba`` as they do: the importance head's probabilities are computed by the one numpy function
both use (:func:`importance_probabilities`); the gate's similarity profile, query-conditioned pooling and
MLP are :meth:`RecallGateHead.forward <memnets.nn.heads.RecallGateHead.forward>` written in numpy, within
1e-5 of torch's probabilities (tests/nn/test_pack_serving.py).

Example::

    gate = ServingGate.load("checkpoints/pack/gate")
    gate.predict_proba(query [1, d], context [1, W, d])   # [p]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memnets.nn.head_files import CONFIG_NAME, WEIGHTS_NAME, gate_input_width, read_head_config
from memnets.nn.numpy_mlp import NumpyMLP, mlp_shapes
from memnets.nn.text_features import TEXT_FEATURES, text_feature_rows
from memnets.nn.weights import Shapes, WeightsMismatch, check_shapes


def _check_ndim(name: str, array: np.ndarray, ndim: int) -> np.ndarray:
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {array.shape}")
    return array


def importance_probabilities(
    net: NumpyMLP, embeddings: np.ndarray, texts: Sequence[str] | None, *, dim: int, use_text_features: bool,
    logit_offset: float, who: str = "ImportanceHead",
) -> np.ndarray:  # fmt: skip
    """An importance head's calibrated probabilities ``[N]`` of ``embeddings [N, dim]`` (and ``texts``, for a
    head with text features): ``net`` (its MLP in numpy) then a sigmoid after ``logit_offset``."""
    x = _check_ndim("embeddings", np.asarray(embeddings), 2)
    if x.shape[1] != dim:
        raise ValueError(f"embeddings have dim {x.shape[1]}, this {who} expects {dim}")
    if use_text_features:
        if texts is None:
            raise ValueError(f"this {who} uses text features: call predict_proba(embeddings, texts=...)")
        if len(texts) != x.shape[0]:
            raise ValueError(f"{len(texts)} texts for {x.shape[0]} embeddings")
        x = np.concatenate([x, text_feature_rows(texts)], axis=1)
    logits = net(x) + logit_offset
    return 1.0 / (1.0 + np.exp(-logits))


class ServingHead:
    """What both serving heads share: the loaded folder's threshold, logit offset and metadata, ``predict``."""

    kind = "head"

    def __init__(self, threshold: float = 0.5, logit_offset: float = 0.0, metadata: dict | None = None):
        self.threshold, self.logit_offset = float(threshold), float(logit_offset)
        self.metadata: dict[str, Any] = dict(metadata or {})

    def shapes(self) -> Shapes:
        """The state shapes of the torch head of this architecture (names as its ``state_dict``)."""
        raise NotImplementedError

    def take(self, state: dict[str, np.ndarray]) -> None:
        """Keep the weights of ``state`` (its names and shapes already checked against :meth:`shapes`)."""
        raise NotImplementedError

    @classmethod
    def load(cls, directory: str | Path, shown: str | Path | None = None):
        """The head saved in ``directory`` by the torch head's ``save``; the errors of its ``load`` (``shown``:
        the folder to name instead of ``directory``, e.g. a pack's own path)."""
        from safetensors.numpy import load_file

        directory = Path(directory)
        shown = Path(shown) if shown is not None else directory
        where, config = shown / CONFIG_NAME, read_head_config(directory, shown, cls.kind, cls.__name__)
        try:
            head = cls(**config.architecture, threshold=config.threshold, logit_offset=config.logit_offset,
                       metadata=config.metadata)  # fmt: skip
            expected = head.shapes()
        except (TypeError, ValueError, OverflowError) as error:
            raise WeightsMismatch(f"{where}: field 'architecture' does not build a {cls.kind} head: {error}") from None
        check_shapes(expected, config.found, config=f"{where} (field 'architecture')", weights=shown / WEIGHTS_NAME)
        head.take(load_file(str(directory / WEIGHTS_NAME)))
        return head

    def predict(self, *args, **kwargs) -> np.ndarray:
        """Boolean decisions: ``predict_proba(...) >= threshold``."""
        return self.predict_proba(*args, **kwargs) >= self.threshold


class ServingImportance(ServingHead):
    """:class:`~memnets.nn.heads.ImportanceHead` in numpy: a turn's embedding (and text features) -> probability."""

    kind = "importance"

    def __init__(self, dim: int, hidden_dims: Sequence[int] = (256,), dropout: float = 0.1,
                 use_text_features: bool = False, **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self.dim, self.hidden_dims, self.dropout = int(dim), [int(h) for h in hidden_dims], float(dropout)
        self.use_text_features = bool(use_text_features)
        self.net: NumpyMLP | None = None

    def shapes(self) -> Shapes:
        return mlp_shapes("net.", self.dim + (len(TEXT_FEATURES) if self.use_text_features else 0), self.hidden_dims)

    def take(self, state: dict[str, np.ndarray]) -> None:
        self.net = NumpyMLP.from_state(state, "net.", len(self.hidden_dims))

    def predict_proba(self, embeddings, texts: Sequence[str] | None = None) -> np.ndarray:
        """Calibrated probabilities ``[N]`` that each turn is worth keeping long term (``ImportanceHead.predict_proba``)."""
        return importance_probabilities(self.net, embeddings, texts, dim=self.dim, use_text_features=self.use_text_features,
                                        logit_offset=self.logit_offset, who=type(self).__name__)  # fmt: skip


def _masked_softmax(logits: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Softmax over the last axis of ``logits`` where ``mask`` (rows with no slot: all zero weights), and the
    log of each row's sum of exponentials (``-inf`` for such rows): torch's ``softmax(...).nan_to_num(0)``
    and ``logsumexp`` of the logits with ``-inf`` outside the mask."""
    top = np.where(mask, logits, -np.inf).max(axis=-1, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0.0)
    exps = np.where(mask, np.exp(np.where(mask, logits - top, 0.0)), 0.0)
    sums = exps.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(sums > 0, exps / sums, 0.0)
        return weights, (np.log(sums) + top)[..., 0]


class ServingGate(ServingHead):
    """:class:`~memnets.nn.heads.RecallGateHead` in numpy: a query and the context turns -> the probability that
    the archive must be searched (the features of its docstring, computed in float64)."""

    kind = "gate"

    def __init__(self, dim: int, hidden_dims: Sequence[int] = (256,), dropout: float = 0.1, attention_dim: int = 64,
                 top_k: int = 3, temperatures: Sequence[float] = (0.05, 0.1), use_vectors: bool = True, **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        self.width = gate_input_width(dim, attention_dim, top_k, temperatures, use_vectors)
        self.dim, self.hidden_dims, self.dropout = int(dim), [int(h) for h in hidden_dims], float(dropout)
        self.attention_dim, self.top_k, self.use_vectors = int(attention_dim), int(top_k), bool(use_vectors)
        self.temperatures = [float(t) for t in temperatures]
        self.net: NumpyMLP | None = None

    def shapes(self) -> Shapes:
        projection = (self.attention_dim, self.dim)
        own = {"query_proj.weight": projection, "key_proj.weight": projection, "cosine_scale": ()}
        return own | mlp_shapes("net.", self.width, self.hidden_dims)

    def take(self, state: dict[str, np.ndarray]) -> None:
        self.query_proj = np.asarray(state["query_proj.weight"], np.float64).T
        self.key_proj = np.asarray(state["key_proj.weight"], np.float64).T
        self.cosine_scale = float(state["cosine_scale"])
        self.net = NumpyMLP.from_state(state, "net.", len(self.hidden_dims))

    def similarity_features(self, sims: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``RecallGateHead.similarity_features``: the top_k cosines, their mean, the soft maxima, log(1 + turns),
        the best match's age and the soft-max-weighted ages, of masked cosines ``sims [B, W]`` (oldest first)."""
        rows, width = sims.shape
        count = mask.sum(axis=1).astype(np.float64)
        present, n = count > 0, np.maximum(count, 1.0)
        masked = np.where(mask, sims, -1.0)
        top = -np.sort(-masked, axis=1)[:, : self.top_k]
        top = np.pad(top, ((0, 0), (0, self.top_k - top.shape[1])), constant_values=-1.0)
        mean = np.where(present, (masked * mask).sum(axis=1) / n, -1.0)
        # how far back the matches lie: 0 = the newest context turn, towards 1 = the oldest
        age = np.maximum((count[:, None] - 1 - np.arange(width)[None, :]) / n[:, None], 0.0)
        best_age = age[np.arange(rows), masked.argmax(axis=1)] if width else np.zeros(rows)
        soft, ages = [], []
        for t in self.temperatures:
            weights, lse = _masked_softmax(sims / t, mask)
            soft.append(np.where(present, t * (lse - np.log(n)), -1.0))
            ages.append((weights * age).sum(axis=1))
        return np.column_stack([top, mean, *soft, np.log1p(count), best_age, *ages])

    def _logits(self, query: np.ndarray, context: np.ndarray, mask: np.ndarray) -> np.ndarray:
        sims = np.einsum("bd,bwd->bw", query, context)
        parts = [self.similarity_features(sims, mask)]
        if self.use_vectors:  # the query-conditioned attention pooling of the context turns
            keys = context @ self.key_proj
            scores = np.einsum("ba,bwa->bw", query @ self.query_proj, keys) / math.sqrt(self.attention_dim)
            weights, _ = _masked_softmax(scores + self.cosine_scale * sims, mask)
            c = np.einsum("bw,bwd->bd", weights, context)
            parts += [query, c, query * c, np.abs(query - c), (query * c).sum(axis=1, keepdims=True)]
        return self.net(np.concatenate(parts, axis=1))

    def predict_proba(self, query_emb, context_embs, mask=None) -> np.ndarray:
        """Calibrated probabilities ``[B]`` that the archive must be searched (``RecallGateHead.predict_proba``):
        ``query_emb [B, d]``, ``context_embs [B, W, d]``, ``mask [B, W]`` (all true when omitted)."""
        query = _check_ndim("query_emb", np.asarray(query_emb, np.float64), 2)
        context = _check_ndim("context_embs", np.asarray(context_embs, np.float64), 3)
        mask = np.ones(context.shape[:2], bool) if mask is None else _check_ndim("mask", np.asarray(mask, bool), 2)
        if query.shape[1] != self.dim or context.shape[2] != self.dim:
            raise ValueError(
                f"query_emb dim {query.shape[1]} / context_embs dim {context.shape[2]}; this {type(self).__name__} "
                f"expects {self.dim}"
            )
        if context.shape[0] != query.shape[0] or mask.shape != context.shape[:2]:
            raise ValueError(
                f"shapes disagree: query_emb {query.shape}, context_embs {context.shape}, mask {mask.shape}"
            )
        logits = self._logits(query, context, mask) + self.logit_offset
        return 1.0 / (1.0 + np.exp(-logits))


__all__ = ["ServingGate", "ServingHead", "ServingImportance", "importance_probabilities"]
