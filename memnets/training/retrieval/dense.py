"""Dense ranker: cosine similarity between encoded queries and a conversation's turns."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memnets.protocols import TextEncoder
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.bm25 import rank_by_scores


class DenseRanker:
    """Ranks turns by the inner product of L2-normalised embeddings from any encoder with
    `encode(texts, kind=...)` (a MemoryEncoder, or an adapter around another model)."""

    def __init__(self, encoder: TextEncoder, name: str = "dense", batch_size: int = 64) -> None:
        self.encoder, self.name, self.batch_size = encoder, name, batch_size

    def scores(self, conversation: Conversation, queries: Sequence[str]) -> np.ndarray:
        """Cosine similarities [len(queries), len(turns)] (hybrid ranking fuses them with BM25's), float32 products
        taken in numpy: inside a bf16 autocast (a CPU fit in ``bf16-mixed`` validates within one) torch's would
        be bfloat16, which numpy cannot hold."""
        memories = self.encoder.encode(
            [turn.content for turn in conversation.turns], kind="memory", batch_size=self.batch_size
        )
        questions = self.encoder.encode(list(queries), kind="query", batch_size=self.batch_size)
        return questions.numpy() @ memories.numpy().T

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        ids = [turn.dia_id for turn in conversation.turns]
        return [rank_by_scores(row, ids) for row in self.scores(conversation, queries)]
