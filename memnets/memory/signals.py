"""The two decisions the manager asks for, each with a heuristic and a trained implementation.

- Importance: how much long-term value an observation has, in [0, 1]. It decides which observations
  are kept, which are written through to the archive at once, and which working memories are
  buried first.
- Recall gate: whether a query needs memories from the archive (its answer is not in the context).

The heuristics run with no trained parts (the baseline and the default before training); the
``Head*`` classes wrap the trained heads that a pack supplies: those of :mod:`memnets.nn.heads` (torch), or
their numpy forms of :mod:`memnets.nn.serving_heads` where the pack serves without torch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from memnets.text import strip_speaker

_WORD = re.compile(r"\w+")
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|my|me|we|our|mine)\b", re.IGNORECASE)
_SPECIFIC = re.compile(r"\d|(?<=[a-z,;] )[A-Z][a-z]+")  # a number, or a capitalised word mid-sentence


class Importance(Protocol):
    name: str

    def __call__(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """Importance in [0, 1] of each text (``vectors``: their unit embeddings ``[N, d]``)."""
        ...


class HeuristicImportance:
    """Length and specificity, standing in for Generative Agents' LLM rating of poignancy.

    ``0.5 * min(1, words / full_length) + 0.25 * [mentions a number or a proper name mid-sentence]
    + 0.25 * [first-person statement]``: long, specific, personal statements ("I adopted a beagle
    named Rex in May") score high, short acknowledgements ("Wow, nice!") low. The speaker prefix
    ("Ann: ") of a turn is not counted.
    """

    name = "heuristic"

    def __init__(self, full_length: int = 25):
        if full_length < 1:
            raise ValueError(f"full_length must be a positive number of words, got {full_length}")
        self.full_length = full_length

    def score_text(self, text: str) -> float:
        body = strip_speaker(text)
        length = min(1.0, len(_WORD.findall(body)) / self.full_length)
        specific = 1.0 if _SPECIFIC.search(body) else 0.0
        personal = 1.0 if _FIRST_PERSON.search(body) else 0.0
        return 0.5 * length + 0.25 * specific + 0.25 * personal

    def __call__(self, texts: Sequence[str], vectors: np.ndarray | None = None) -> np.ndarray:
        return np.array([self.score_text(text) for text in texts], dtype=np.float64)


class HeadImportance:
    """The trained importance head (``predict_proba`` of an ImportanceHead, or of the numpy ServingImportance
    of a pack served without torch, on the memory embeddings)."""

    def __init__(self, head):
        self.head = head
        self.name = "learned"

    def __call__(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        probabilities = self.head.predict_proba(vectors, texts=list(texts))  # texts: heads with text features
        return np.clip(np.asarray(probabilities, dtype=np.float64).reshape(-1), 0.0, 1.0)


def keeps(importance: float, threshold: float) -> bool:
    """The observation filter: whether a new memory of this ``importance`` is kept (it reaches ``threshold``).

    A manager keeps an observation at its ``keep_threshold``; ``add(messages=..., keep="important")``
    keeps a message at the memory's ``write_through_threshold`` (:mod:`memnets.memory.messages`).
    """
    return importance >= threshold


@dataclass(frozen=True)
class GateVerdict:
    """The gate's decision and the score it thresholded (higher = more need to recall)."""

    recall: bool
    score: float


class Gate(Protocol):
    name: str

    def __call__(self, query_vector: np.ndarray, context_vectors: np.ndarray) -> GateVerdict:
        """Whether the query (``[d]``) needs the archive, given the context's vectors (``[W, d]``)."""
        ...


# the heuristic gate's cosine; chosen on conv-49 (validation) with the default scorer: 0.5 / 0.6 / always
# gave 29.7 / 31.5 / 31.5% evidence in view with 133 / 152 / 156 of 156 searches (docs/memory.md)
DEFAULT_GATE_THRESHOLD = 0.6


class HeuristicGate:
    """Recall when no context message is similar enough to the query.

    Score = ``1 - max_w cos(query, context_w)`` (1 for an empty context); recall when the best
    match's cosine is below ``threshold`` (default :data:`DEFAULT_GATE_THRESHOLD`), i.e. when
    score > ``1 - threshold``.
    """

    name = "heuristic"

    def __init__(self, threshold: float = DEFAULT_GATE_THRESHOLD):
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"heuristic gate threshold is a cosine and must lie in [-1, 1], got {threshold}")
        self.threshold = threshold

    def __call__(self, query_vector: np.ndarray, context_vectors: np.ndarray) -> GateVerdict:
        if len(context_vectors) == 0:
            return GateVerdict(True, 1.0)
        best = float(np.max(np.asarray(context_vectors) @ np.asarray(query_vector)))
        return GateVerdict(best < self.threshold, 1.0 - best)


class FixedGate:
    """Always (or never) recall: the two ends of the searches-versus-recall trade-off."""

    def __init__(self, recall: bool):
        self.recall = recall
        self.name = "always" if recall else "never"

    def __call__(self, query_vector: np.ndarray, context_vectors: np.ndarray) -> GateVerdict:
        return GateVerdict(self.recall, 1.0 if self.recall else 0.0)


class HeadGate:
    """The trained recall gate: ``predict_proba(q [1,d], ctx [1,W,d], mask [1,W])`` of a RecallGateHead (or of the
    numpy ServingGate of a pack served without torch).

    Recall when the probability reaches ``threshold`` (default: the head's stored threshold).
    """

    def __init__(self, head, threshold: float | None = None):
        self.head = head
        stored = getattr(head, "threshold", None)
        self.threshold = float(threshold if threshold is not None else (stored if stored is not None else 0.5))
        self.name = "learned"

    def __call__(self, query_vector: np.ndarray, context_vectors: np.ndarray) -> GateVerdict:
        query = np.asarray(query_vector, dtype=np.float32).reshape(1, -1)
        if len(context_vectors) == 0:
            context, mask = np.zeros((1, 1, query.shape[1]), np.float32), np.zeros((1, 1), bool)
        else:
            context = np.asarray(context_vectors, dtype=np.float32)[None]
            mask = np.ones((1, context.shape[1]), bool)
        probability = float(np.asarray(self.head.predict_proba(query, context, mask)).reshape(-1)[0])
        return GateVerdict(probability >= self.threshold, probability)


def pack_components(pack) -> dict:
    """What a loaded :class:`~memnets.pack.Pack` supplies to a memory (``memnets.open``) or a
    ``MemoryManager``, by argument name.

    ``encoder`` always; ``importance`` (:class:`HeadImportance`) and, from a threshold named
    ``"importance"``, ``write_through_threshold``, when the pack has the importance head; ``gate``
    (:class:`HeadGate`, threshold ``"gate"`` of the pack or the head's own) when it has the recall
    gate; ``scorer`` (:class:`~memnets.scoring.LearnedScorer`) when it has fitted scorer weights;
    ``duplicate_threshold`` from a threshold named ``"duplicate"`` (``memnets.open``'s near-duplicate
    cosine, which depends on the encoder). A pack's supersession head is not among them: supersession is
    opt-in (``memnets.open(..., supersession="auto")`` takes it, :mod:`memnets.memory.opening`).
    Parts the pack lacks are left out, so the caller's defaults (the heuristics) stay. It lives here,
    not on the Pack, because the memory layer sits above the pack format.
    """
    from memnets.scoring import LearnedScorer

    components: dict = {"encoder": pack.encoder}
    if pack.importance is not None:
        components["importance"] = HeadImportance(pack.importance)
        if "importance" in pack.thresholds:
            components["write_through_threshold"] = float(pack.thresholds["importance"])
    if pack.gate is not None:
        components["gate"] = HeadGate(pack.gate, pack.thresholds.get("gate"))
    if pack.scorer_weights is not None:
        components["scorer"] = LearnedScorer.from_pack(pack)
    if "duplicate" in pack.thresholds:  # the near-duplicate cosine measured for this pack's encoder
        components["duplicate_threshold"] = float(pack.thresholds["duplicate"])
    return components
