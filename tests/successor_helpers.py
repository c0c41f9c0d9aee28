"""Shared by every door's test of the search order: a user's changed fact and the checks of its answers.

The user said "I live in Leeds", later "I moved to Lyon", and a few other things. The question is the
stale fact's own text, so any encoder (the tiny random one too) puts the stale fact nearest it, well
above its successor, and the fillers below both (with the tiny encoder of tests/conftest.py: cosines
1.0, 0.955 and at most 0.942). A judge ends "Leeds" by "Lyon" (:class:`LyonJudge` in process; a
server opened with ``--set supersession=auto`` has the judge shipped with memnets, which decides the same here). With
the tiny encoder every memory is about as near the question, so a search's judge reads every newer one against the
ones above it (:meth:`~memnets.memory.supersession.Supersession.search_links`): the fillers are statements that the
shipped judge does not read as replacing "I moved to Lyon" ("I work as a nurse" it did, 0.83).
Before search ranked a stale fact below its successor whatever k, k = 1 answered "Leeds".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import pytest

STALE = "I live in Leeds"
SUCCESSOR = "I moved to Lyon"
FILLERS = (
    "I am learning Spanish",
    "My sister plays the cello",
    "I drink green tea",
    "The garden has roses",
    "My bike is red",
    "I like jazz",
    "I bake bread at weekends",
    "I have a cat named Tom",
)
QUESTION = STALE  # nearest the stale fact by construction
KS = (1, 3, 10)  # 10: every memory of the user


class LyonJudge:
    """A SupersessionJudge for tests: "Lyon" ends "Leeds" (score 1.0), nothing else ends anything."""

    threshold = 0.5

    def score(self, older: str, newer: str) -> float:
        return 1.0 if (older, newer) == (STALE, SUCCESSOR) else 0.0


class LikelyLyonJudge:
    """A SupersessionJudge for tests that is less sure: "Lyon" more likely than not replaces "Leeds" (0.7, between
    its ``order_threshold`` and its ``threshold``), so "Leeds" stays valid and ranks below "Lyon"."""

    threshold, order_threshold = 0.9, 0.5

    def score(self, older: str, newer: str) -> float:
        return 0.7 if (older, newer) == (STALE, SUCCESSOR) else 0.0


class UnsureJudge:
    """A SupersessionJudge for tests: "Lyon" may have replaced "Leeds" (0.6): below its order_threshold, so the write
    path links nothing, above its query_threshold, so a search that finds both about as near reads it. Counts the
    pairs it reads."""

    threshold, order_threshold, query_threshold = 0.9, 0.8, 0.5

    def __init__(self):
        self.read: list[tuple[str, str]] = []

    def scores(self, pairs):
        self.read.extend(pairs)
        return [0.6 if (older, newer) == (STALE, SUCCESSOR) else 0.0 for older, newer in pairs]

    def score(self, older: str, newer: str) -> float:
        return self.scores([(older, newer)])[0]


def facts() -> list[tuple[str, datetime]]:
    """(text, when said) of the user's memories in the order to write them: the stale fact first (January
    2024), its successor (February), then the fillers (one a month after)."""
    texts = (STALE, SUCCESSOR, *FILLERS)
    return [(text, datetime(2024 + n // 12, n % 12 + 1, 1, tzinfo=UTC)) for n, text in enumerate(texts)]


def check_current_first(answers: Mapping[int, Sequence[tuple[str, float]]]) -> None:
    """Asserts the rule on one door's answers to :data:`QUESTION`, ``{k: [(content, score), ...]}`` for each
    of :data:`KS`: k answers, the successor first and the stale fact (where present) right after it,
    scores non-increasing, and each shorter answer the start of the longest (one order and the same scores
    at every k)."""
    assert set(answers) == set(KS), answers
    longest = list(answers[max(KS)])
    assert len(longest) == 2 + len(FILLERS), longest
    for k in KS:
        answer = list(answers[k])
        texts, scores = [text for text, _ in answer], [score for _, score in answer]
        assert len(answer) == k and texts[0] == SUCCESSOR, (k, answer)
        assert STALE not in texts or texts.index(STALE) == 1, (k, answer)
        assert all(a >= b for a, b in zip(scores, scores[1:])), (k, answer)
        assert texts == [text for text, _ in longest[:k]], (k, answer, longest)
        assert scores == pytest.approx([score for _, score in longest[:k]], abs=1e-5), (k, answer, longest)
