"""Dense ranking with time: cosine similarity plus a weighted time feature (``memnets.temporal.questions``).

A question that asks *when* lifts the turns that date their event ("yesterday", "last week", "in
May"); a question that names a time lifts the turns whose resolved dates (else their session's date)
fall in it. Each turn's time expressions are resolved from its own session's date; the questions
are asked at the conversation's last session. ``memnets eval retrieval dated`` ranks with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memnets.protocols import TextEncoder
from memnets.temporal.questions import dated_memory, time_features
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.bm25 import rank_by_scores
from memnets.training.retrieval.dense import DenseRanker

DEFAULT_TIME_WEIGHT = 0.1  # chosen on the validation split (docs/results/temporal_retrieval.md)


class DatedRanker:
    """Ranks turns by cosine similarity + ``time_weight`` x the question's time feature."""

    def __init__(
        self, encoder: TextEncoder, time_weight: float = DEFAULT_TIME_WEIGHT, name: str = "dated", batch_size: int = 64
    ) -> None:
        self.encoder, self.time_weight, self.name, self.batch_size = encoder, float(time_weight), name, batch_size

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        turns = conversation.turns
        scores = DenseRanker(self.encoder, batch_size=self.batch_size).scores(conversation, queries)
        dated = [dated_memory(turn.text, turn.t) for turn in turns]
        asked = conversation.sessions[-1].t
        ids = [turn.dia_id for turn in turns]
        return [
            rank_by_scores(row + self.time_weight * np.asarray(time_features(query, asked, dated)), ids)
            for query, row in zip(queries, scores)
        ]
