"""Memory scoring: how strongly a memory should be retrieved for a query at a moment.

Generative Agents score a memory m for a query s as

    score(m, s) = a1 * recency(m) + a2 * relevance(m, s) + a3 * importance(m)

with recency = decay ** (hours since m was last accessed), relevance = cosine(E(s), E(m)) and
importance in [0, 1]; each of the three is min-max normalised over the candidate memories before
the weighted sum, and the weights are 1 (their hand-set choice).

Both scorers here compute these features (:func:`score_features`), plus a fourth, ``time``
(:func:`memnets.temporal.questions.time_features`: 1 for a memory that dates its event when the
query asks *when*, or that falls in the time the query names, else 0), and differ only in where the
numbers come from:

- :class:`HeuristicScorer`: any encoder (default: none, so vectors must be passed), the importance
  stored on the memory, hand-set weights a: by default relevance alone (0, 1, 0), the untrained
  manager's; :meth:`HeuristicScorer.generative_agents` gives Generative Agents' (1, 1, 1).
- :class:`LearnedScorer`: the trained encoder, importance from the trained importance head, and
  weights b, time's included, fitted on validation data by logistic regression
  (:func:`fit_scorer_weights`), so that the weighted sum predicts "this memory is evidence for this
  query". Weights saved before the time feature existed have no ``time`` and weigh it 0: they
  score as they did, and the feature is not computed.

Both implement the :class:`Scorer` protocol and are interchangeable everywhere.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from memnets.protocols import TextEncoder
from memnets.records import Memory
from memnets.temporal.questions import asks_about_time, dated_record, time_features
from memnets.timeutil import as_utc

FEATURES = ("recency", "relevance", "importance", "time")
GENERATIVE_AGENTS_FEATURES = FEATURES[:3]  # the hand-set score's; a HeuristicScorer weighs time 0
OPTIONAL_FEATURES = frozenset({"time"})  # absent from weights saved before it was added: weighed 0
DEFAULT_DECAY = 0.995  # per hour, as in Generative Agents
GENERATIVE_AGENTS_WEIGHTS = (1.0, 1.0, 1.0)  # Park et al.'s hand-set a (recency, relevance, importance)
# the untrained manager's default: relevance alone, chosen on conv-49 over (1, 1, 1), (0.1, 1, 0.1) (docs/memory.md)
DEFAULT_HEURISTIC_WEIGHTS = (0.0, 1.0, 0.0)


@runtime_checkable
class Scorer(Protocol):
    """Anything that scores candidate memories for a query at a moment (higher = retrieve first)."""

    def score(
        self,
        memories: Sequence[Memory],
        query: str,
        now: datetime,
        *,
        query_vector: np.ndarray | None = None,
        memory_vectors: np.ndarray | None = None,
    ) -> np.ndarray:
        """Scores [len(memories)]; vectors, when given, spare re-encoding the query and memories."""


@dataclass
class ScorerWeights:
    """The weights of the features (and a bias, which does not change rankings).

    ``normalize`` says whether recency, relevance and importance are min-max normalised over the
    candidates (as in Generative Agents); weights fitted with one setting only make sense with the
    same setting. ``time`` defaults to 0, so weights without it score as before.
    """

    recency: float = 1.0
    relevance: float = 1.0
    importance: float = 1.0
    time: float = 0.0
    bias: float = 0.0
    decay: float = DEFAULT_DECAY
    normalize: bool = True
    info: dict = field(default_factory=dict)  # how they were obtained (data, split, counts)

    def __post_init__(self) -> None:
        for name in (*FEATURES, "bias", "decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"ScorerWeights.{name} must be a finite number, got {value!r}")
            setattr(self, name, float(value))
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"ScorerWeights.decay must lie in (0, 1] (per hour), got {self.decay!r}")
        if not isinstance(self.normalize, bool):
            raise ValueError(f"ScorerWeights.normalize must be true or false, got {self.normalize!r}")

    @property
    def vector(self) -> np.ndarray:
        """The weights in FEATURES order."""
        return np.array([getattr(self, name) for name in FEATURES], dtype=np.float64)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "scorer weights") -> ScorerWeights:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
        unknown = set(data) - {f.name for f in cls.__dataclass_fields__.values()}
        missing = set(FEATURES) - set(data) - OPTIONAL_FEATURES
        if unknown or missing:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
        try:
            return cls(**data)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path) -> ScorerWeights:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None
        return cls.from_dict(data, where=str(path))


def min_max(values: np.ndarray, fill: float = 0.5) -> np.ndarray:
    """Scale to [0, 1] over the candidates; all-equal values become ``fill`` (0.5: Generative Agents' choice)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    low, high = values.min(), values.max()
    if high - low < 1e-12:
        return np.full_like(values, fill)
    return (values - low) / (high - low)


def recency(memories: Sequence[Memory], now: datetime, decay: float = DEFAULT_DECAY) -> np.ndarray:
    """decay ** hours since each memory's last access (a memory accessed in the future counts as now).

    A naive ``now`` is read as UTC, as the memories' times are (:mod:`memnets.timeutil`).
    """
    now = as_utc(now, "recency: now")
    hours = np.array([(now - (m.last_access or m.t)).total_seconds() / 3600.0 for m in memories], dtype=np.float64)
    return np.power(decay, np.clip(hours, 0.0, None))


def cosine(query_vector: np.ndarray, memory_vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of one query vector [d] with each memory vector [N, d]."""
    query = np.asarray(query_vector, dtype=np.float64).reshape(-1)
    matrix = np.asarray(memory_vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
    return (matrix @ query) / np.maximum(norms, 1e-12)


def time_column(memories: Sequence[Memory], query: str, now: datetime) -> np.ndarray:
    """The time feature [N] of ``query`` asked at ``now`` (:func:`memnets.temporal.questions.time_features`);
    zeros without reading the memories' dates when the query names no time and does not ask when."""
    if not asks_about_time(query, now):
        return np.zeros(len(memories))
    return np.asarray(time_features(query, now, [dated_record(m) for m in memories]), dtype=np.float64)


def score_features(
    memories: Sequence[Memory],
    now: datetime,
    query_vector: np.ndarray,
    memory_vectors: np.ndarray,
    *,
    importance: np.ndarray | None = None,
    time: np.ndarray | None = None,
    decay: float = DEFAULT_DECAY,
    normalize: bool = True,
) -> np.ndarray:
    """The features [N, 4] in FEATURES order (recency, relevance, importance, time).

    ``importance`` overrides the memories' stored importance (e.g. the trained head's probabilities).
    ``time`` is the 0/1 time feature (:func:`time_column`), zeros when None; it is not normalised
    (already on [0, 1], where min-max would turn "no memory carries it" into 0.5).
    """
    importance = (
        np.array([m.importance for m in memories], dtype=np.float64)
        if importance is None
        else np.asarray(importance, dtype=np.float64)
    )
    columns = [recency(memories, now, decay), cosine(query_vector, memory_vectors), importance]
    if normalize:
        columns = [min_max(column) for column in columns]
    columns.append(np.zeros(len(memories)) if time is None else np.asarray(time, dtype=np.float64))
    return np.stack(columns, axis=1) if len(memories) else np.zeros((0, len(FEATURES)))


def _as_matrix(array, rows: int | None, name: str) -> np.ndarray:
    matrix = np.asarray(array.detach().cpu().numpy() if hasattr(array, "detach") else array, dtype=np.float64)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or (rows is not None and matrix.shape[0] != rows):
        raise ValueError(f"{name} must have shape [{rows if rows is not None else 'N'}, dim], got {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{name} contains NaN or inf")
    return matrix


class WeightedScorer:
    """weights . features(memories, query, now) + bias: the common body of both scorers.

    Args:
        encoder: anything with ``encode(texts, kind="query"|"memory")`` returning [N, d] vectors
            (a MemoryEncoder); needed unless every call passes query_vector and memory_vectors.
        weights: the feature weights, decay and normalisation.
        importance_head: an ImportanceHead (``predict_proba(embeddings) -> [N]``) that replaces
            the stored importance of the memories; None uses ``Memory.importance``.
    """

    def __init__(
        self, encoder: TextEncoder | None = None, weights: ScorerWeights | None = None, importance_head=None
    ) -> None:
        self.encoder = encoder
        self.weights = weights or ScorerWeights()
        self.importance_head = importance_head

    def vectors(
        self, memories: Sequence[Memory], query: str, query_vector=None, memory_vectors=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The query vector [1, d] and memory vectors [N, d], encoding whichever was not given."""
        if (query_vector is None or memory_vectors is None) and self.encoder is None:
            raise ValueError(
                f"{type(self).__name__} has no encoder: pass query_vector and memory_vectors, "
                "or build it with an encoder"
            )
        if query_vector is None:
            query_vector = self.encoder.encode([query], kind="query")
        if memory_vectors is None:
            memory_vectors = self.encoder.encode([m.content for m in memories], kind="memory")
        query_vector = _as_matrix(query_vector, 1, "query_vector")
        memory_vectors = _as_matrix(memory_vectors, len(memories), "memory_vectors")
        if query_vector.shape[1] != memory_vectors.shape[1]:
            raise ValueError(
                f"query_vector has dim {query_vector.shape[1]} but memory_vectors have dim {memory_vectors.shape[1]}"
            )
        return query_vector, memory_vectors

    def features(
        self,
        memories: Sequence[Memory],
        query: str,
        now: datetime,
        *,
        query_vector=None,
        memory_vectors=None,
        with_time: bool | None = None,
    ) -> np.ndarray:
        """The [N, 4] features this scorer weighs (see :func:`score_features`).

        ``with_time``: compute the time feature (True when fitting weights); None computes it when
        the weights use it, and leaves it 0 otherwise (it is then weighed 0).
        """
        if not isinstance(now, datetime):
            raise TypeError(f"now must be a datetime, got {type(now).__name__}")
        if not len(memories):
            return np.zeros((0, len(FEATURES)))
        query_vector, memory_vectors = self.vectors(memories, query, query_vector, memory_vectors)
        importance = None
        if self.importance_head is not None:
            texts = (
                {"texts": [m.content for m in memories]}
                if getattr(self.importance_head, "use_text_features", False)
                else {}
            )
            importance = np.asarray(
                self.importance_head.predict_proba(memory_vectors.astype(np.float32), **texts), dtype=np.float64
            ).reshape(-1)
        if with_time is None:
            with_time = self.weights.time != 0.0
        return score_features(
            memories,
            now,
            query_vector,
            memory_vectors,
            importance=importance,
            time=time_column(memories, query, now) if with_time else None,
            decay=self.weights.decay,
            normalize=self.weights.normalize,
        )

    def score(
        self, memories: Sequence[Memory], query: str, now: datetime, *, query_vector=None, memory_vectors=None
    ) -> np.ndarray:
        features = self.features(memories, query, now, query_vector=query_vector, memory_vectors=memory_vectors)
        return features @ self.weights.vector + self.weights.bias


class HeuristicScorer(WeightedScorer):
    """A hand-set score a = (a_recency, a_relevance, a_importance); default :data:`DEFAULT_HEURISTIC_WEIGHTS`
    (the time feature is weighed 0: it is the learned weights' to use).

    The default is relevance alone, the untrained manager's ranking: Generative Agents' (1, 1, 1)
    (:meth:`generative_agents`, kept as the named baseline) puts less evidence in the agent's view
    than a plain vector memory (replay of conv-49, the validation split: 18.2% against 31.3%; with
    relevance alone 31.5%, docs/memory.md), because recency and importance push the memories the
    search found out of the top k in favour of recent small talk.
    """

    def __init__(
        self,
        encoder: TextEncoder | None = None,
        a: Sequence[float] = DEFAULT_HEURISTIC_WEIGHTS,
        decay: float = DEFAULT_DECAY,
    ) -> None:
        if len(a) != len(GENERATIVE_AGENTS_FEATURES):
            raise ValueError(
                f"HeuristicScorer: a must hold {len(GENERATIVE_AGENTS_FEATURES)} weights "
                f"{GENERATIVE_AGENTS_FEATURES}, got {a!r}"
            )
        super().__init__(encoder, ScorerWeights(*a, decay=decay, info={"source": "heuristic", "a": list(a)}))

    @classmethod
    def generative_agents(cls, encoder: TextEncoder | None = None, decay: float = DEFAULT_DECAY) -> HeuristicScorer:
        """Generative Agents' score (Park et al., 2023): recency + relevance + importance, a = (1, 1, 1)."""
        return cls(encoder, GENERATIVE_AGENTS_WEIGHTS, decay)


class LearnedScorer(WeightedScorer):
    """The trained encoder's relevance, the importance head's probability, recency and the time
    feature, with weights fitted on validation data (:func:`fit_scorer_weights`)."""

    def __init__(self, encoder: TextEncoder, weights: ScorerWeights, importance_head=None) -> None:
        if encoder is None:
            raise ValueError("LearnedScorer needs the trained encoder")
        super().__init__(encoder, weights, importance_head)

    @classmethod
    def from_pack(cls, pack) -> LearnedScorer:
        """Build from a loaded :class:`memnets.pack.Pack` (``memnets.pack.load_pack(folder)``; the pack
        layer sits above scoring, so a folder is loaded by the caller)."""
        if isinstance(pack, (str, Path)):
            raise TypeError(f"pack must be a loaded Pack (memnets.pack.load_pack({str(pack)!r})), not a path")
        weights = pack.scorer_weights
        if weights is None:
            warnings.warn("the pack holds no fitted scorer weights; using Generative Agents' (1, 1, 1)", stacklevel=2)
            weights = ScorerWeights(info={"source": "default: pack had no fitted weights"})
        return cls(pack.encoder, weights, pack.importance)


def fit_scorer_weights(
    examples: Iterable[tuple[Sequence[Memory], str, datetime, Sequence[bool]]],
    scorer: WeightedScorer,
    *,
    C: float = 1.0,
    info: dict | None = None,
) -> ScorerWeights:
    """Fit b (and a bias) by logistic regression on the scorer's features of (query, memory) pairs.

    Args:
        examples: (candidate memories, query, now, labels) per query; label = the memory is evidence.
            Each item may also carry (query_vector, memory_vectors) as a 6-tuple to skip encoding.
        scorer: gives the features (its encoder, importance head, decay and normalisation are kept).
        C: inverse L2 regularisation strength of scikit-learn's LogisticRegression.
        info: recorded in the weights (data, split), with the counts added.
    """
    from sklearn.linear_model import LogisticRegression

    rows, labels = [], []
    for example in examples:
        memories, query, now, positives = example[:4]
        vectors = dict(zip(("query_vector", "memory_vectors"), example[4:6]))
        if len(positives) != len(memories):
            raise ValueError(
                f"fit_scorer_weights: {len(positives)} labels for {len(memories)} memories (query {query!r})"
            )
        rows.append(scorer.features(memories, query, now, **vectors, with_time=True))
        labels.append(np.asarray(positives, dtype=bool))
    if not rows:
        raise ValueError("fit_scorer_weights: no examples")
    X, y = np.concatenate(rows), np.concatenate(labels)
    if y.all() or not y.any():
        raise ValueError(f"fit_scorer_weights: labels must hold both classes, got {int(y.sum())} positives of {y.size}")
    # a feature that never varies (e.g. importance without a head) cannot be weighed: its weight is 0
    varying = X.std(axis=0) > 1e-12
    if not varying.any():
        raise ValueError("fit_scorer_weights: every feature is constant over the examples")
    model = LogisticRegression(C=C, max_iter=1000).fit(X[:, varying], y)
    coefficients = dict.fromkeys(FEATURES, 0.0) | dict(
        zip(np.array(FEATURES)[varying].tolist(), model.coef_[0].tolist())
    )
    counts = {
        "queries": len(rows),
        "pairs": int(y.size),
        "positives": int(y.sum()),
        "constant_features": [name for name, v in zip(FEATURES, varying) if not v],
        "train_accuracy": float(model.score(X[:, varying], y)),
    }
    return ScorerWeights(
        **coefficients,
        bias=float(model.intercept_[0]),
        decay=scorer.weights.decay,
        normalize=scorer.weights.normalize,
        info={"source": "logistic regression", **(info or {}), **counts},
    )
