"""Ranking a LoCoMo conversation's turns with any Scorer (heuristic or learned).

Each turn becomes a Memory whose time and last access are its session's date; "now" is the date
of the conversation's last session, so recency favours later sessions as it would for an agent
that lived through the conversation. Turn and query vectors are encoded once per conversation.
:func:`fit_split_weights` fits the LearnedScorer's weights on a split with the same ranker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime

import numpy as np

from memnets.protocols import TextEncoder
from memnets.records import Memory
from memnets.scoring import ScorerWeights, WeightedScorer, fit_scorer_weights
from memnets.training.data.locomo import Conversation, memory_id
from memnets.training.retrieval.bm25 import rank_by_scores

logger = logging.getLogger(__name__)

CONSTANT_IMPORTANCE = 0.5


def turn_memories(
    conversation: Conversation, importance: Callable[[Sequence[str]], np.ndarray] | None = None
) -> list[Memory]:
    """The conversation's turns as memories owned by the conversation, in chronological order.

    ``importance`` scores the memory texts (an ``Importance`` of :mod:`memnets.memory.signals`, such
    as ``HeuristicImportance()``); None = a constant.
    """
    texts = [turn.content for turn in conversation.turns]
    scores = [CONSTANT_IMPORTANCE] * len(texts) if importance is None else [float(v) for v in importance(texts)]
    return [
        Memory(
            id=memory_id(conversation.sample_id, turn.dia_id),
            owner=conversation.sample_id,
            t=turn.t,
            content=text,
            importance=score,
            kind="message",
            metadata={"dia_id": turn.dia_id, "session": turn.session},
        )
        for turn, text, score in zip(conversation.turns, texts, scores)
    ]


def conversation_now(conversation: Conversation) -> datetime:
    """The moment questions are asked: the date of the last session."""
    return conversation.sessions[-1].t


class ScorerRanker:
    """A ranker (``rank(conversation, queries) -> dia_ids``) that orders turns by ``scorer.score``.

    Args:
        scorer: a Scorer with an ``encoder`` (HeuristicScorer(encoder) or LearnedScorer).
        importance: scores the turns' texts into the importance stored on the memories (a LearnedScorer
            replaces it with its head's probability); None = a constant.
    """

    def __init__(
        self,
        scorer,
        name: str = "scored",
        importance: Callable[[Sequence[str]], np.ndarray] | None = None,
        batch_size: int = 64,
    ) -> None:
        if getattr(scorer, "encoder", None) is None:
            raise ValueError("ScorerRanker needs a scorer with an encoder (to embed turns and queries once)")
        self.scorer, self.name, self.importance, self.batch_size = scorer, name, importance, batch_size

    def encode(self, conversation: Conversation, queries: Sequence[str]) -> tuple[list[Memory], np.ndarray, np.ndarray]:
        """The conversation's memories, their vectors [N, d] and the query vectors [Q, d]."""
        memories = turn_memories(conversation, self.importance)
        encoder = self.scorer.encoder
        memory_vectors = encoder.encode(
            [m.content for m in memories], kind="memory", batch_size=self.batch_size
        ).numpy()
        query_vectors = encoder.encode(list(queries), kind="query", batch_size=self.batch_size).numpy()
        return memories, memory_vectors, query_vectors

    def scores(self, conversation: Conversation, queries: Sequence[str]) -> np.ndarray:
        """The scorer's scores [len(queries), len(turns)] (hybrid ranking fuses them with BM25's)."""
        if not queries:
            return np.zeros((0, len(conversation.turns)))
        memories, memory_vectors, query_vectors = self.encode(conversation, queries)
        now = conversation_now(conversation)
        return np.array(
            [
                self.scorer.score(memories, query, now, query_vector=vector, memory_vectors=memory_vectors)
                for query, vector in zip(queries, query_vectors)
            ],
            dtype=np.float64,
        ).reshape(len(queries), len(memories))

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        ids = [turn.dia_id for turn in conversation.turns]
        return [rank_by_scores(row, ids) for row in self.scores(conversation, queries)]

    def fit_examples(
        self, conversations: Iterable[Conversation], categories: Sequence[int] = (1, 2, 3, 4)
    ) -> Iterator[tuple]:
        """(memories, question, now, labels, query_vector, memory_vectors) per QA item with evidence,
        label = the turn is evidence: the input of :func:`memnets.scoring.fit_scorer_weights`."""
        for conversation in conversations:
            items = [item for item in conversation.qa if item.category in categories and item.evidence]
            if not items:
                continue
            memories, memory_vectors, query_vectors = self.encode(conversation, [item.question for item in items])
            now = conversation_now(conversation)
            for item, vector in zip(items, query_vectors):
                evidence = set(item.evidence)
                labels = [m.metadata["dia_id"] in evidence for m in memories]
                yield memories, item.question, now, labels, vector, memory_vectors


def fit_split_weights(
    encoder: TextEncoder, importance_head, config, split: str, progress: bool = True
) -> ScorerWeights:
    """The LearnedScorer's weights fitted on one split of a data config (``memnets export``).

    Every QA item of the split's conversations (categories 1-4, with evidence) against its own
    conversation's turns, label: the turn is evidence; features from ``encoder`` and
    ``importance_head`` (the ones the pack will hold). See :func:`memnets.scoring.fit_scorer_weights`.
    """
    from memnets.progress import track
    from memnets.training.data.formats import load_conversations

    conversations = load_conversations(config.path, config.splits[split])
    ranker = ScorerRanker(WeightedScorer(encoder, importance_head=importance_head))
    examples = track(ranker.fit_examples(conversations), desc=f"scorer features ({split})", disable=not progress)
    info = {
        "data": str(config.path),
        "split": split,
        "conversations": list(config.splits[split]),
        "categories": [1, 2, 3, 4],
    }
    weights = fit_scorer_weights(examples, ranker.scorer, info=info)
    logger.info("scorer weights fitted on %s: %s", split, weights)
    return weights
