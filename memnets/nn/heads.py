"""The small heads on top of the frozen memory encoder: importance and need-recall.

- :class:`ImportanceHead`: MLP(E(turn)) -> logit of "this turn has long-term value" (it is cited
  as evidence by some question of its conversation).
- :class:`RecallGateHead`: MLP(features of E(query) and E(last W turns)) -> logit of "the evidence
  of this query is not all in the context, so the archive must be searched". The context summary
  is learned: attention pooling over the context turns conditioned on the query, next to the
  similarity profile (max / top-k / soft-max cosine of the query against each turn), because a
  plain mean of the turns loses which turn matched the query.

The change-of-fact decision reads the pair of texts itself: :mod:`memnets.nn.change_judge`.

Both keep their decision ``threshold`` (chosen on validation, see :func:`threshold_max_f1` and
:func:`threshold_at_recall`) and a ``logit_offset`` that undoes the prior shift of a
positive-class-weighted BCE (``-log(pos_weight)``), so that ``predict_proba`` returns calibrated
probabilities. ``save(dir)`` writes ``model.safetensors`` + ``config.json``; ``load(dir)`` reads
them back without unpickling anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from memnets.nn.head_files import CONFIG_NAME, FORMAT_VERSION, WEIGHTS_NAME, gate_input_width, read_head_config
from memnets.nn.modes import evaluating, single_threaded
from memnets.nn.numpy_mlp import NumpyMLP, weights_key
from memnets.nn.serving_heads import importance_probabilities
from memnets.nn.text_features import TEXT_FEATURES, text_feature_rows
from memnets.nn.weights import WeightsMismatch, check_shapes, meta_shapes


def mlp(in_dim: int, hidden_dims: Sequence[int], dropout: float) -> nn.Sequential:
    """Linear-GELU-Dropout blocks ending in one output logit."""
    layers: list[nn.Module] = []
    for width in hidden_dims:
        layers += [nn.Linear(in_dim, width), nn.GELU(), nn.Dropout(dropout)]
        in_dim = width
    layers.append(nn.Linear(in_dim, 1))
    return nn.Sequential(*layers)


def _as_tensor(name: str, value, ndim: int, dtype=torch.float32) -> torch.Tensor:
    tensor = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value)
    _check_ndim(name, tuple(tensor.shape), ndim)
    return tensor.to(dtype)


def _as_array(name: str, value, ndim: int) -> np.ndarray:
    """``value`` (a tensor, an array or nested lists) as a numpy array of ``ndim`` dimensions, for the heads
    that compute in numpy."""
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    _check_ndim(name, array.shape, ndim)
    return array


def _check_ndim(name: str, shape: tuple, ndim: int) -> None:
    if len(shape) != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {shape}")


class Head(nn.Module):
    """What both heads share: a decision threshold, a logit offset, metadata and safetensors files.

    Subclasses define ``kind``, ``architecture()`` (the constructor arguments) and ``forward``.
    """

    kind = "head"

    def __init__(self, threshold: float = 0.5, logit_offset: float = 0.0, metadata: dict | None = None):
        super().__init__()
        self.threshold = float(threshold)
        self.logit_offset = float(logit_offset)
        self.metadata: dict[str, Any] = dict(metadata or {})

    def architecture(self) -> dict[str, Any]:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """Everything needed to rebuild the head, plus what it was trained on (``metadata``)."""
        return {
            "format_version": FORMAT_VERSION,
            "kind": self.kind,
            "architecture": self.architecture(),
            "threshold": self.threshold,
            "logit_offset": self.logit_offset,
            "metadata": self.metadata,
        }

    def save(self, directory: str | Path) -> Path:
        """Write ``model.safetensors`` (weights) and ``config.json`` (architecture, threshold, metadata)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(directory / WEIGHTS_NAME), metadata={"kind": self.kind})
        (directory / CONFIG_NAME).write_text(json.dumps(self.config(), indent=2) + "\n")
        return directory

    @classmethod
    def load(cls, directory: str | Path, shown: str | Path | None = None):
        """Rebuild a head saved by :meth:`save`; the folder must hold a head of this class's kind.

        The config is checked against the weights file's header before anything is allocated
        (:mod:`memnets.nn.weights`): the architecture, built on the meta device, must make exactly
        the file's tensors. Failures are ValueErrors naming the file and the field (``shown``: the
        folder to name instead of ``directory``, e.g. a pack's own path).
        """
        directory = Path(directory)
        shown = Path(shown) if shown is not None else directory
        where, config = shown / CONFIG_NAME, read_head_config(directory, shown, cls.kind, cls.__name__)

        def build():
            return cls(**config.architecture, threshold=config.threshold, logit_offset=config.logit_offset,
                       metadata=config.metadata)  # fmt: skip

        try:
            expected = meta_shapes(build)
        except (TypeError, ValueError, OverflowError, RuntimeError) as error:
            raise WeightsMismatch(f"{where}: field 'architecture' does not build a {cls.kind} head: {error}") from None
        check_shapes(expected, config.found, config=f"{where} (field 'architecture')", weights=shown / WEIGHTS_NAME)
        head = build()
        head.load_state_dict(load_file(str(directory / WEIGHTS_NAME)))
        head.eval()
        return head

    def _proba(self, logits: torch.Tensor) -> np.ndarray:
        return torch.sigmoid(logits + self.logit_offset).numpy().astype(np.float64)

    def predict(self, *args, **kwargs) -> np.ndarray:
        """Boolean decisions: ``predict_proba(...) >= threshold``."""
        return self.predict_proba(*args, **kwargs) >= self.threshold


def text_features(texts: Sequence[str]) -> torch.Tensor:
    """:func:`text_feature_rows` as a float32 tensor (the head's training input)."""
    return torch.from_numpy(text_feature_rows(texts))


class ImportanceHead(Head):
    """MLP on a turn's embedding (and, with ``use_text_features``, :func:`text_features`) -> logit of long-term value."""

    kind = "importance"

    def __init__(
        self,
        dim: int,
        hidden_dims: Sequence[int] = (256,),
        dropout: float = 0.1,
        use_text_features: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self.dim = int(dim)
        self.hidden_dims = [int(h) for h in hidden_dims]
        self.dropout = float(dropout)
        self.use_text_features = bool(use_text_features)
        self.net = mlp(self.dim + (len(TEXT_FEATURES) if self.use_text_features else 0), self.hidden_dims, self.dropout)

    def architecture(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "hidden_dims": self.hidden_dims,
            "dropout": self.dropout,
            "use_text_features": self.use_text_features,
        }

    def forward(self, embeddings: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[N]`` of embeddings ``[N, dim]`` (+ text features ``[N, F]``), before ``logit_offset``."""
        if self.use_text_features:
            if features is None:
                raise ValueError("this ImportanceHead was trained with text features: pass the texts")
            embeddings = torch.cat([embeddings, features], dim=1)
        return self.net(embeddings).squeeze(-1)

    def predict_proba(self, embeddings, texts: Sequence[str] | None = None) -> np.ndarray:
        """Calibrated probabilities ``[N]`` that each turn is worth keeping long term.

        ``embeddings [N, dim]`` from the encoder the head was trained on; ``texts`` (the memory
        contents, "{speaker}: {text}") are needed when the head uses text features and ignored otherwise.
        Computed in numpy (:class:`~memnets.nn.numpy_mlp.NumpyMLP`: a query scores a few rows, where
        torch's per-op dispatch was most of the time), on a copy of the weights made again whenever
        they change.
        """
        return importance_probabilities(
            self._numpy_net(), _as_array("embeddings", embeddings, 2), texts, dim=self.dim,
            use_text_features=self.use_text_features, logit_offset=self.logit_offset,
        )  # fmt: skip

    def _numpy_net(self) -> NumpyMLP:
        """The numpy copy of ``net``, made again when a weight was replaced or changed in place
        (:func:`~memnets.nn.numpy_mlp.weights_key`)."""
        copied = self.__dict__.get("_numpy")
        if copied is None or copied.key != weights_key(self.net):
            copied = self.__dict__["_numpy"] = NumpyMLP.of_module(self.net)
        return copied


class RecallGateHead(Head):
    """Query + context turns -> logit of "must recall from the archive".

    Features given to the MLP:

    - the similarity profile of the query against each context turn: the ``top_k`` largest cosines
      (sorted), their mean over the context, and soft maxima ``t * log(mean(exp(s / t)))`` at each
      temperature in ``temperatures`` (the untrained max-cosine rule is one of these inputs);
    - ``log(1 + number of context turns)`` and how far back the best matches lie (their age in the window);
    - a learned, query-conditioned attention pooling ``c`` of the context turns (bilinear scores
      plus a learned multiple of the cosine) and ``[q, c, q * c, |q - c|, q . c]``.

    An empty context (all of ``mask`` false) gives similarities of -1 and a zero context vector.
    """

    kind = "gate"

    def __init__(
        self,
        dim: int,
        hidden_dims: Sequence[int] = (256,),
        dropout: float = 0.1,
        attention_dim: int = 64,
        top_k: int = 3,
        temperatures: Sequence[float] = (0.05, 0.1),
        use_vectors: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        width = gate_input_width(dim, attention_dim, top_k, temperatures, use_vectors)
        self.dim = int(dim)
        self.hidden_dims = [int(h) for h in hidden_dims]
        self.dropout = float(dropout)
        self.attention_dim = int(attention_dim)
        self.top_k = int(top_k)
        self.temperatures = [float(t) for t in temperatures]
        self.use_vectors = bool(use_vectors)
        self.query_proj = nn.Linear(self.dim, self.attention_dim, bias=False)
        self.key_proj = nn.Linear(self.dim, self.attention_dim, bias=False)
        self.cosine_scale = nn.Parameter(torch.tensor(10.0))
        self.net = mlp(width, self.hidden_dims, self.dropout)

    def architecture(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "hidden_dims": self.hidden_dims,
            "dropout": self.dropout,
            "attention_dim": self.attention_dim,
            "top_k": self.top_k,
            "temperatures": self.temperatures,
            "use_vectors": self.use_vectors,
        }

    def similarity_features(self, sims: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[B, top_k + 2 + 2 * len(temperatures) + 1]`` summary of masked cosines ``sims [B, W]`` (oldest turn first).

        Columns: the top_k cosines, their mean, the soft maxima, log(1 + turns), the age of the best
        match and the soft-max-weighted age at each temperature.
        """
        count = mask.sum(dim=1)
        present = (count > 0).unsqueeze(1)
        floor = sims.new_tensor(-1.0)
        masked = torch.where(mask, sims, floor)
        width = sims.shape[1]
        top = masked.topk(min(self.top_k, width), dim=1).values if width else sims.new_empty(sims.shape[0], 0)
        if top.shape[1] < self.top_k:  # a window narrower than top_k: pad with the floor value
            top = F.pad(top, (0, self.top_k - top.shape[1]), value=-1.0)
        mean = (masked * mask).sum(dim=1, keepdim=True) / count.clamp(min=1).unsqueeze(1)
        soft = []
        for t in self.temperatures:
            logits = torch.where(mask, sims / t, torch.full_like(sims, -torch.inf))
            lse = torch.logsumexp(logits, dim=1, keepdim=True) - torch.log(
                count.clamp(min=1).unsqueeze(1).to(sims.dtype)
            )
            soft.append(torch.where(present, t * lse, floor))
        size = torch.log1p(count.to(sims.dtype)).unsqueeze(1)
        # how far back the matches lie: 0 = the newest context turn, towards 1 = the oldest. A best
        # match at the old edge of the window suggests that more evidence lies beyond it.
        slots = torch.arange(width, device=sims.device, dtype=sims.dtype).unsqueeze(0)
        n = count.to(sims.dtype).unsqueeze(1)
        age = ((n - 1 - slots) / n.clamp(min=1)).clamp(min=0)
        ages = [age.gather(1, masked.argmax(dim=1, keepdim=True)) if width else sims.new_zeros(sims.shape[0], 1)]
        for t in self.temperatures:
            weights = torch.softmax(torch.where(mask, sims / t, torch.full_like(sims, -torch.inf)), dim=1).nan_to_num(
                0.0
            )
            ages.append((weights * age).sum(dim=1, keepdim=True))
        return torch.cat([top, torch.where(present, mean, floor), *soft, size, *ages], dim=1)

    def pool(self, query: torch.Tensor, context: torch.Tensor, mask: torch.Tensor, sims: torch.Tensor) -> torch.Tensor:
        """Query-conditioned attention pooling of the context turns: ``[B, dim]``."""
        q = self.query_proj(query).unsqueeze(1)  # [B, 1, a]
        k = self.key_proj(context)  # [B, W, a]
        scores = (q * k).sum(-1) / math.sqrt(self.attention_dim) + self.cosine_scale * sims
        scores = scores.masked_fill(~mask, -torch.inf)
        weights = torch.softmax(scores, dim=1).nan_to_num(0.0)  # all-masked rows -> zero weights
        return (weights.unsqueeze(-1) * context).sum(dim=1)

    def forward(self, query: torch.Tensor, context: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits ``[B]`` from ``query [B, d]``, ``context [B, W, d]``, ``mask [B, W]`` (True = a turn)."""
        mask = mask.bool()
        sims = torch.einsum("bd,bwd->bw", query, context)
        parts = [self.similarity_features(sims, mask)]
        if self.use_vectors:
            c = self.pool(query, context, mask, sims)
            parts += [query, c, query * c, (query - c).abs(), (query * c).sum(-1, keepdim=True)]
        return self.net(torch.cat(parts, dim=1)).squeeze(-1)

    @torch.no_grad()
    def predict_proba(self, query_emb, context_embs, mask=None) -> np.ndarray:
        """Calibrated probabilities ``[B]`` that the archive must be searched for each query.

        ``query_emb [B, d]``, ``context_embs [B, W, d]`` (unit vectors from the same encoder),
        ``mask [B, W]`` true where a context slot holds a turn (all true when omitted); turns come
        oldest first and padding after them.
        """
        query = _as_tensor("query_emb", query_emb, 2)
        context = _as_tensor("context_embs", context_embs, 3)
        mask = (
            torch.ones(context.shape[:2], dtype=torch.bool) if mask is None else _as_tensor("mask", mask, 2, torch.bool)
        )
        if query.shape[1] != self.dim or context.shape[2] != self.dim:
            raise ValueError(
                f"query_emb dim {query.shape[1]} / context_embs dim {context.shape[2]}; this RecallGateHead expects {self.dim}"
            )
        if context.shape[0] != query.shape[0] or tuple(mask.shape) != tuple(context.shape[:2]):
            raise ValueError(
                f"shapes disagree: query_emb {tuple(query.shape)}, context_embs {tuple(context.shape)}, mask {tuple(mask.shape)}"
            )
        with evaluating(self), single_threaded():
            return self._proba(self(query, context, mask))


def threshold_max_f1(labels, probabilities) -> float:
    """The probability threshold with the highest F1 (the importance rule, applied on validation)."""
    y, p = _check_scores(labels, probabilities)
    order = np.argsort(-p, kind="stable")
    p_sorted, y_sorted = p[order], y[order]
    true_pos = np.cumsum(y_sorted)
    predicted = np.arange(1, len(p) + 1)
    f1 = 2 * true_pos / (predicted + y.sum())
    last_of_tie = np.r_[p_sorted[1:] != p_sorted[:-1], True]  # a threshold takes all equal scores
    best = int(np.argmax(np.where(last_of_tie, f1, -1.0)))
    return float(p_sorted[best])


def threshold_at_recall(labels, probabilities, min_recall: float = 0.95) -> float:
    """The highest threshold whose recall of positives (``p >= threshold``) is at least ``min_recall``.

    The gate rule: search the archive as rarely as possible while still catching 95% of the
    queries whose evidence fell out of the context (applied on validation).
    """
    if not 0.0 < min_recall <= 1.0:
        raise ValueError(f"min_recall must be in (0, 1], got {min_recall}")
    y, p = _check_scores(labels, probabilities)
    positives = np.sort(p[y == 1])[::-1]
    needed = math.ceil(min_recall * len(positives) - 1e-9)
    return float(positives[max(needed, 1) - 1])


def expected_calibration_error(labels, probabilities, bins: int = 10) -> float:
    """Expected calibration error over ``bins`` equal-width probability bins (weighted by bin size)."""
    y = np.asarray(labels, dtype=float)
    p = np.clip(np.asarray(probabilities, dtype=float), 0.0, 1.0)
    which = np.minimum((p * bins).astype(int), bins - 1)
    error = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            error += inside.mean() * abs(p[inside].mean() - y[inside].mean())
    return float(error)


def binary_metrics(labels, scores, threshold: float) -> dict[str, float]:
    """AUROC, AP, F1, precision and recall at ``scores >= threshold``, and the share predicted negative.

    The one set of decision metrics of a head: saved with it after training (validation) and
    reported by the heads evaluation. AUROC is NaN when ``labels`` hold one class, AP when no positive.
    """
    from sklearn.metrics import (  # here: loading a head needs no sklearn
        average_precision_score,
        roc_auc_score,
    )

    y = np.asarray(labels).astype(int)
    s = np.asarray(scores, dtype=float)
    predicted = s >= threshold
    tp = float((predicted & (y == 1)).sum())
    single_class = len(np.unique(y)) < 2
    return {
        "auroc": float("nan") if single_class else float(roc_auc_score(y, s)),
        "ap": float(average_precision_score(y, s)) if y.sum() else float("nan"),
        "f1": 2 * tp / max(float(predicted.sum() + y.sum()), 1.0),
        "precision": tp / max(float(predicted.sum()), 1.0),
        "recall": tp / max(float(y.sum()), 1.0),
        "negative_share": float((~predicted).mean()),
    }


def _check_scores(labels, probabilities) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels).astype(int).ravel()
    p = np.asarray(probabilities, dtype=np.float64).ravel()
    if y.shape != p.shape or y.size == 0:
        raise ValueError(f"labels and probabilities must be non-empty and of equal length, got {y.size} and {p.size}")
    if not set(np.unique(y)) <= {0, 1}:
        raise ValueError("labels must be 0 or 1")
    if y.sum() == 0:
        raise ValueError("no positive labels: a threshold cannot be chosen")
    return y, p
