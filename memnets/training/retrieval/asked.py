"""Ranking each question over the conversation as it stood when it was asked.

Every evaluation ranks through :func:`rank_as_asked`, so that no question finds a memory written
after it (:func:`memnets.training.data.asked.seen_at`): LongMemEval's ``question_date``, a JSONL question's
``time``, LoCoMo's last session (where nothing is hidden, and the ranking is the ranker's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memnets.timeutil import as_utc
from memnets.training.data.asked import seen_at
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.rankers import Ranker


def rank_as_asked(
    ranker: Ranker, conversation: Conversation, queries: Sequence[str], asked: Sequence[datetime]
) -> list[list[str]]:
    """Per query, the dia_ids of the turns it could have seen, best first.

    Queries asked at the same moment are ranked together (one call of the ranker); a query asked
    before every turn gets an empty ranking.
    """
    if len(asked) != len(queries):
        raise ValueError(f"rank_as_asked: {len(asked)} times for {len(queries)} queries")
    groups: dict[datetime, list[int]] = {}
    for index, moment in enumerate(asked):
        groups.setdefault(as_utc(moment, f"asked[{index}]"), []).append(index)
    rankings: list[list[str]] = [[] for _ in queries]
    for moment, indices in groups.items():
        seen = seen_at(conversation, moment)
        if not seen.turns:
            continue
        ranked = ranker.rank(seen, [queries[i] for i in indices])
        if len(ranked) != len(indices):
            raise ValueError(f"ranker returned {len(ranked)} rankings for {len(indices)} queries")
        for index, ranking in zip(indices, ranked):
            rankings[index] = ranking
    return rankings
