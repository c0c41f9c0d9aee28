"""The Ranker protocol and the one registry of rankers, by spec ``[NAME=]KIND[:PATH]``.

A ranker orders a conversation's turns for each query; the LoCoMo retrieval evaluation
(:func:`memnets.training.retrieval.metrics.evaluate_retriever`), the encoder's validation, ``memnets eval
retrieval`` and the benchmarks all take rankers from here. Kinds built in:

- ``bm25``: BM25 over the turns (takes no path);
- ``dense[:ENCODER]``: cosine of a MemoryEncoder folder or backbone name (``dense:all-mpnet-base-v2``,
  :mod:`memnets.nn.backbones`; default: the bundled untrained backbone);
  ``dense_onnx[:ENCODER]``, ``dense_int8[:ENCODER]``, ``dense_int8_vnni[:ENCODER]`` and
  ``dense_int8_vnni_ffn[:ENCODER]`` the same encoder on that backend (the fast paths' retrieval
  quality beside the exact one's);
- ``dated[:ENCODER]``: ``dense`` plus a weighted time feature (:mod:`memnets.training.retrieval.dated`:
  "when" questions lift turns that date their event, a named time lifts the turns dated in it);
- ``heuristic[:ENCODER]``: Generative Agents' score (recency + relevance + importance, weights 1)
  on an encoder folder (default: the backbone); importance is a constant for LoCoMo turns;
- ``learned:PACK``: the LearnedScorer of a memory pack (trained encoder, importance head, fitted weights);
  ``learned_onnx:PACK``, ``learned_int8:PACK``, ``learned_int8_vnni:PACK`` and
  ``learned_int8_vnni_ffn:PACK`` the same with the pack's encoder on those backends.
- ``hybrid[:ENCODER]``, ``hybrid_learned:PACK``: ``dense`` / ``learned`` fused with ``bm25``
  (:mod:`memnets.training.retrieval.hybrid_ranker`: the words beside the meaning, as the stores' hybrid search).

Other components add kinds with :func:`register_ranker`: :mod:`memnets.training.evaluation.memory_ranker` adds
``memory[:PACK]`` (the turns written into a memory and ranked by its search), registered from above,
since this layer imports nothing of the memory API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memnets.nn.backbones import NAMED_BACKBONES

if TYPE_CHECKING:
    from memnets.training.data.locomo import Conversation


class Ranker(Protocol):
    """Anything with ``rank(conversation, queries)``: for each query, the conversation's dia_ids
    ordered best first."""

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]: ...


RankerFactory = Callable[[str | None], Ranker]


def _bm25(path: str | None) -> Ranker:
    from memnets.training.retrieval.bm25 import BM25Ranker

    if path:
        raise ValueError("bm25 takes no path")
    return BM25Ranker()


def _encoder(path: str | None, backend: str = "torch"):
    from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder

    return MemoryEncoder.from_pretrained(path or DEFAULT_BACKBONE, backend=backend)


def _dense(path: str | None, backend: str = "torch") -> Ranker:
    from memnets.training.retrieval.dense import DenseRanker

    return DenseRanker(_encoder(path, backend))


def _dated(path: str | None) -> Ranker:
    from memnets.training.retrieval.dated import DatedRanker

    return DatedRanker(_encoder(path))


def _heuristic(path: str | None) -> Ranker:
    from memnets.scoring import HeuristicScorer
    from memnets.training.retrieval.scored import ScorerRanker

    return ScorerRanker(HeuristicScorer.generative_agents(_encoder(path)), name="heuristic")


def _learned(path: str | None, backend: str = "torch") -> Ranker:
    from memnets.pack import load_pack
    from memnets.scoring import LearnedScorer
    from memnets.training.retrieval.scored import ScorerRanker

    if not path:
        raise ValueError("learned needs a pack folder: learned:checkpoints/pack")
    return ScorerRanker(LearnedScorer.from_pack(load_pack(path, backend=backend, on_torch=True)), name="learned")


def _hybrid(path: str | None) -> Ranker:
    from memnets.training.retrieval.hybrid_ranker import HybridRanker

    return HybridRanker(_dense(path))


def _hybrid_learned(path: str | None) -> Ranker:
    from memnets.training.retrieval.hybrid_ranker import HybridRanker

    if not path:
        raise ValueError("hybrid_learned needs a pack folder: hybrid_learned:checkpoints/pack")
    return HybridRanker(_learned(path), name="hybrid_learned")


# KIND -> factory(path or None) -> ranker
RANKERS: dict[str, RankerFactory] = {
    "bm25": _bm25,
    "dense": _dense,
    "dense_onnx": partial(_dense, backend="onnx"),
    "dense_int8": partial(_dense, backend="int8"),
    "dense_int8_vnni": partial(_dense, backend="int8_vnni"),
    "dense_int8_vnni_ffn": partial(_dense, backend="int8_vnni_ffn"),
    "dated": _dated,
    "heuristic": _heuristic,
    "learned": _learned,
    "learned_onnx": partial(_learned, backend="onnx"),
    "learned_int8": partial(_learned, backend="int8"),
    "learned_int8_vnni": partial(_learned, backend="int8_vnni"),
    "learned_int8_vnni_ffn": partial(_learned, backend="int8_vnni_ffn"),
    "hybrid": _hybrid,
    "hybrid_learned": _hybrid_learned,
}


def register_ranker(kind: str, factory: RankerFactory) -> None:
    """Add a ranker kind; ``factory(path or None)`` builds it. A kind is registered once."""
    if not kind or not kind.isidentifier():
        raise ValueError(f"kind must be a non-empty identifier, got {kind!r}")
    if kind in RANKERS:
        raise ValueError(f"ranker kind {kind!r} is already registered")
    RANKERS[kind] = factory


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """``[NAME=]KIND[:PATH]`` -> (name, kind, path); the name defaults to ``KIND[:PATH]``.

    PATH is a file or folder, or a store's URL (``postgresql://...``, for the kinds of a memory store,
    :mod:`memnets.training.evaluation.stored`): a URL may hold "=" (its query string) and is not named in the
    default name (it may hold a password): that is ``KIND:SCHEME``."""
    head, equals, tail = spec.partition("=")
    name, rest = (head, tail) if equals and ":" not in head else ("", spec)
    kind, _, path = rest.partition(":")
    if kind not in RANKERS:
        raise ValueError(f"retriever spec {spec!r}: unknown kind {kind!r}; expected one of {sorted(RANKERS)}")
    scheme, is_url, _ = path.partition("://")
    if path and not is_url and not Path(path).exists() and path not in NAMED_BACKBONES:
        raise ValueError(f"retriever spec {spec!r}: path {path!r} does not exist (nor is it a backbone name)")
    return name or (f"{kind}:{scheme if is_url else path}" if path else kind), kind, path or None


def build_ranker(kind: str, path: str | None = None) -> Ranker:
    """The ranker of a registered ``kind`` on ``path`` (a folder, or None for the kind's default)."""
    if kind not in RANKERS:
        raise ValueError(f"unknown ranker kind {kind!r}; expected one of {sorted(RANKERS)}")
    return RANKERS[kind](path)
