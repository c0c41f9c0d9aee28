"""BM25 baseline ranker (bm25s, Lucene variant, English stop words), one index per conversation."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import bm25s
import numpy as np

from memnets.training.data.locomo import Conversation

# bm25s sets its logger to DEBUG when imported, past the level a command chose (``-q`` showed its
# "Building index" lines): its records follow the root logger's level, as every other library's do.
logging.getLogger("bm25s").setLevel(logging.NOTSET)


def rank_by_scores(scores: np.ndarray, ids: Sequence[str]) -> list[str]:
    """ids ordered by descending score; ties keep the conversation's order (stable)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return [ids[i] for i in order]


class BM25Ranker:
    """Ranks a conversation's turns (their memory text) for each query with BM25."""

    name = "BM25"

    def __init__(self, k1: float = 1.5, b: float = 0.75, stopwords: str = "en") -> None:
        self.k1, self.b, self.stopwords = k1, b, stopwords

    def scores(self, documents: Sequence[str], queries: Sequence[str]) -> np.ndarray:
        """BM25 scores [len(queries), len(documents)].

        A query (or a set of documents) with no terms left after the stopwords, e.g. "what is it?",
        matches nothing: its scores are 0 (bm25s itself raises IndexError / ValueError on them).
        """
        out = np.zeros((len(queries), len(documents)))
        document_tokens = bm25s.tokenize(list(documents), stopwords=self.stopwords, show_progress=False)
        if not queries or not document_tokens.vocab:
            return out
        index = bm25s.BM25(k1=self.k1, b=self.b)
        index.index(document_tokens, show_progress=False)
        query_tokens = bm25s.tokenize(list(queries), stopwords=self.stopwords, return_ids=False, show_progress=False)
        for row, tokens in enumerate(query_tokens):
            if tokens:
                out[row] = index.get_scores(tokens)
        return out

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        ids = [turn.dia_id for turn in conversation.turns]
        scores = self.scores([turn.content for turn in conversation.turns], queries)
        return [rank_by_scores(row, ids) for row in scores]
