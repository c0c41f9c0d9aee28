"""Ranking a conversation's turns through a memory store, as an agent searches it: dense or hybrid.

The rankers of :mod:`memnets.training.retrieval.rankers` score turns in process. These write a conversation's
turns into a real store with ``memnets.open`` and ``add_many`` (every turn kept: no near-match
merging) and rank them with ``AgentMemory.search``, the path every door takes, so a figure is the
store's own: its lexical index, its filters, its fusion. Kinds, registered when this module is
imported (:mod:`memnets.training.evaluation.retrieval` imports it, so ``memnets eval retrieval`` knows them):

- ``store_dense[:URL]``: dense search (``search="dense"``), the bundled all-MiniLM-L6-v2;
- ``store_hybrid[:URL]``: hybrid search (``search="hybrid"``, :mod:`memnets.memory.hybrid`).

(The kind ``memory`` of :mod:`memnets.training.evaluation.memory_ranker` writes a conversation as chat messages
through the whole write path, merging and superseding as an agent's memory does, into a temporary
archive, and searches it as ``memnets.open`` defaults; these keep every turn, so that a figure is the
search's alone, next to ``bm25`` and ``dense``, on either store.)

Without a URL the store is an archive in a temporary folder (one per conversation); with a
``postgresql://`` URL it is that server's, in tables named ``memnets_eval_<random>`` (left there,
empty: each conversation's memories are deleted once ranked).

A ranking is the search's answer for k = :data:`~memnets.memory.hybrid.DEPTH` (at most :data:`HEAD`; a hybrid search answers
the first k of that one for every k up to it, so R@k and MRR@10 are the search's for any such k), then
what a search for k = :data:`HEAD` adds below it (the largest k reported), then the other turns in the
conversation's order.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Sequence

from memnets.memory.hybrid import DEPTH
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.metrics import DEFAULT_KS
from memnets.training.retrieval.rankers import register_ranker
from memnets.training.retrieval.scored import turn_memories

HEAD = max(DEFAULT_KS)  # the largest k the evaluation reports


class StoredRanker:
    """Ranks turns with ``AgentMemory.search`` of a store at ``location`` (None: a temporary archive).

    Args:
        search: ``memnets.open``'s ``search`` ("dense" or "hybrid").
        location: a ``postgresql://`` URL, or None for an archive in a temporary folder per conversation.
    """

    def __init__(self, search: str, location: str | None = None) -> None:
        self.search, self.location = search, location
        self.name = f"store_{search}"
        self.table = f"memnets_eval_{uuid.uuid4().hex[:12]}"  # on PostgreSQL: this ranker's tables
        self._encoder = None

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        from memnets.api import open as open_memory
        from memnets.nn.encoder import MemoryEncoder

        if self._encoder is None:
            self._encoder = MemoryEncoder.from_pretrained()
        with tempfile.TemporaryDirectory(prefix="memnets-eval-") as folder:
            location, options = (folder, {}) if self.location is None else (self.location, {"table": self.table})
            with open_memory(
                location, encoder=self._encoder, search=self.search, duplicate_threshold=None, **options
            ) as memory:
                return self._ranked(memory, conversation, queries)

    @staticmethod
    def _ranked(memory, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        """The conversation's turns written as a fresh user's memories, ranked for each query, then deleted."""
        user = f"{conversation.sample_id}-{uuid.uuid4().hex[:8]}"
        memories = [m.replace(owner=user) for m in turn_memories(conversation)]
        turns = {m.id: turn.dia_id for m, turn in zip(memories, conversation.turns)}
        memory.add_many(memories, user=user)
        try:
            rankings = []
            for query in queries:
                found = {}  # memory id -> None, in the order found: the first search's answer, then what the next adds
                for k in sorted({min(DEPTH, HEAD), HEAD}):
                    found |= dict.fromkeys(hit.memory.id for hit in memory.search(query, user=user, k=k))
                head = [turns[memory_id] for memory_id in found]
                rankings.append(head + [turn.dia_id for turn in conversation.turns if turn.dia_id not in set(head)])
            return rankings
        finally:
            memory.delete_all(user=user)


def _factory(search: str):
    def build(location: str | None) -> StoredRanker:
        if location is not None and not location.startswith(("postgresql://", "postgres://")):
            raise ValueError(
                f"memory rankers take a postgresql:// URL or nothing (a temporary archive), got {location!r}"
            )
        return StoredRanker(search, location)

    return build


register_ranker("store_dense", _factory("dense"))
register_ranker("store_hybrid", _factory("hybrid"))

__all__ = ["HEAD", "StoredRanker"]
