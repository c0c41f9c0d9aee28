"""Supersession in the write path: a newer memory that ends the validity of an older one of the same speaker.

"I live in Paris", then "I moved to Berlin last month": the second is a new memory (the sentence
frame rule of :mod:`memnets.memory.writes` catches restatements only), and without this step the
first stays current and may rank first for "Where do I live?". After each write, :class:`Supersession`
picks the candidates: among the user's :data:`CANDIDATE_POOL` current memories nearest to the new one by
the store's index, those of the same kind, the same scope (:func:`~memnets.memory.consistency.same_scope`:
agent and session, the one scope rule of every step that reads or changes another memory) and the same
speaker (a field: the message's ``speaker``, else the ``"{speaker}: "`` prefix; a text of no speaker and one
whose only speaker is its prefix, which may be a label such as "Update: ", count as one: :func:`one_speaker`),
still valid (or, ended or not, valid from after it), at most :data:`CANDIDATES`, however near; an assistant's
reply is judged against nothing. No cosine floor: the judge decides what is another subject, not the encoder.
A floor on the stored texts' cosine let the speaker prefix choose what was judged (through messages, ``"user: "``
lifts all of a speaker's memories over it) and kept a fifth of the changes said through plain ``add`` from the
judge (docs/memory.md, "The candidates").

A :class:`SupersessionJudge` reads each pair, the texts as said (the speaker prefix off, so
"Bob: ..." and "user: ..." judge alike), in the order their facts began to hold (``valid_from``, not the
order they were written: a statement from before a newer fact, imported after it, is the one ended).
For each score at or above the judge's threshold the older memory gets a new version (so the decision is
in its ``history``) with ``valid_to`` closed at the newer one's ``valid_from``, ``invalidated_by`` the
newer one's id and ``invalidation_score`` the score; the write path writes it in the same store
transaction as the new memory (``WritePath.commit``). An older version that a write stores (a
backdated statement, :mod:`memnets.memory.validity`) is history already and is not judged again.

A score below the threshold but at or above the judge's ``order_threshold``, where it has one (the
score from which the newer statement is more likely than not the one that holds, chosen on validation),
ends nothing: the older memory gets a new version with ``likely_replaced_by`` the newer one's id and
``likely_replaced_score`` the score, and stays valid. Search ranks it below that one all the same, so the
answer that most likely holds comes first while a wrong guess loses no fact. Such a link is a guess, made once:
a new memory likely replaces only the candidate it scores highest, and none where it ends one (a statement
about the user's new job ends the old job, not a morning run "before work" as well; on validation this links a
third as many of the user's other memories for two changes fewer, docs/memory.md). A judge that does not say
its ``order_threshold`` links nothing.

A search reads likely replacements too, with the question in hand (:meth:`Supersession.search_links`): among its
first :data:`SEARCH_DEPTH` hits, a hit that nothing ranks below yet and a newer hit under it that the write path
would have judged against it (:func:`comparable`), its cosine to the query within :data:`SEARCH_MARGIN` of the older
one's, are read by the judge, at most :data:`SEARCH_PAIRS` pairs, the best hits' first; from its ``query_threshold``
(lower than ``order_threshold``: the question has already put both among its first answers, which the write path's
bar must do without, for every question at once) the newer one answers in the older one's place for that search.
Nothing is written. A judge without a ``query_threshold`` reads none.

``invalidated_by`` is its own field: ``superseded_by`` marks an older *version* row, which reads
never return, while an invalidated memory stays current (an agent may still ask about it, and
``as_of`` reads find it valid before its end). A search never ranks it above the memory that
invalidated it, at any k, and fetches that one when only the ended one was found
(:func:`memnets.memory.search.current_first`). ``update(id, valid_to=None)`` reopens it (a new version
without ``valid_to`` and ``invalidated_by``): a wrong decision is reversible.

The judge is given to ``memnets.open(..., supersession=judge)``; "auto" is the pack's judge, else the
one shipped with memnets (:class:`~memnets.nn.change_judge.ChangeJudge`); None leaves the step off.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from memnets.memory.consistency import same_scope, speaker
from memnets.memory.revision import successor
from memnets.records import Memory
from memnets.store.rows import closed_by
from memnets.text import strip_speaker

CANDIDATES = 5  # older memories a new one is judged against (one batch of the judge)
SEARCH_DEPTH = 10  # a search's first hits read for likely replacements (Supersession.search_links)
SEARCH_MARGIN = 1.0  # of the query's cosine: a newer hit this far under an older one may answer for it (1.0: none
# narrower gained on validation at the shipped query_threshold, docs/memory.md; SEARCH_PAIRS bounds the cost)
SEARCH_PAIRS = 12  # pairs a search judges at most: every pair of its first hit (9), then the next hits' (cost bound)
JUDGED_KEPT = 4096  # pairs a search's judge scores are kept for (a repeated question judges nothing again)
CANDIDATE_POOL = 20  # nearest memories searched for them (an index search: a write stays fast on a large store)
ASSISTANT = "assistant"  # the role whose replies end no memory (they echo and confirm the user's facts)


@runtime_checkable
class SupersessionJudge(Protocol):
    """Decides whether a newer memory ends the validity of an older one (same user, scope and speaker).

    A judge may also have ``scores(pairs)``, many (older, newer) pairs at once; the write path uses it."""

    threshold: float  # (optional ``order_threshold`` and ``query_threshold``, at most it: the module docstring)

    def score(self, older: str, newer: str) -> float:
        """In [0, 1]; >= threshold: ``newer`` supersedes ``older``."""


def who(memory: Memory) -> str | None:
    """Who said ``memory``: its message's ``speaker`` field, else the ``"{speaker}: "`` prefix of its text
    (casefolded), else None (a text of no named speaker)."""
    named = memory.metadata.get("speaker") if isinstance(memory.metadata, dict) else None
    return named.casefold() if isinstance(named, str) else speaker(memory)[1]


def one_speaker(a: Memory, b: Memory) -> bool:
    """Whether ``a`` and ``b`` may be judged as statements of one speaker: the same :func:`who`, or one of no
    speaker beside one whose only speaker is the ``"{speaker}: "`` prefix of its text. Such a prefix may be a
    label ("Update: I moved to Lyon", "Note: ..."), not a name: the judge reads it in the text (:func:`said`)
    and tells a label from another person's news as it does in any text."""
    if who(a) == who(b):
        return True
    return (who(a) is None and prefixed_only(b)) or (who(b) is None and prefixed_only(a))


def prefixed_only(memory: Memory) -> bool:
    """``memory``'s speaker is its text's prefix alone: no message's ``speaker`` field says who said it."""
    return who(memory) is not None and not (isinstance(memory.metadata, dict) and "speaker" in memory.metadata)


def said(older: Memory, newer: Memory) -> tuple[str, str]:
    """The texts the judge reads: as said, the speaker prefixes off where both name one speaker (so "Bob: ..."
    and "user: ..." judge alike), the whole texts where one names none (:func:`one_speaker`)."""
    if who(older) == who(newer):
        return strip_speaker(older.content), strip_speaker(newer.content)
    return older.content, newer.content


def replied(memory: Memory) -> bool:
    """``memory`` is an assistant's reply (its message's role)."""
    return isinstance(memory.metadata, dict) and memory.metadata.get("role") == ASSISTANT


def comparable(older: Memory, newer: Memory) -> bool:
    """Whether the judge may read ``older`` against ``newer``: the same kind, scope (:func:`same_scope`) and speaker
    (:func:`one_speaker`), neither an assistant's reply (the write path's candidates, a search's likely replacements)."""
    return (
        older.kind == newer.kind
        and same_scope(older, newer)
        and not replied(older)
        and not replied(newer)
        and one_speaker(older, newer)
    )


def lower_score(judge: SupersessionJudge, name: str, threshold: float) -> float | None:
    """``judge``'s optional score ``name`` (``order_threshold``, ``query_threshold``): None, or a number in [0,
    ``threshold``]; ValueError naming it otherwise."""
    value = getattr(judge, name, None)
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= threshold
    ):
        raise ValueError(
            f"supersession judge {judge!r:.60}: {name} must be None or a number in [0, threshold {threshold}], got "
            f"{value!r}"
        )
    return None if value is None else float(value)


class Supersession:
    """The supersession step of a store's write path, with ``judge`` deciding (see the module docstring)."""

    def __init__(self, store, judge: SupersessionJudge):
        if not isinstance(judge, SupersessionJudge):
            raise TypeError(
                f"supersession must implement SupersessionJudge (threshold, score(older, newer)), got {judge!r:.60}"
            )
        threshold = getattr(judge, "threshold", None)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(
                f"supersession judge {judge!r:.60}: threshold must be a number in [0, 1], got {threshold!r}"
            )
        order, query = (lower_score(judge, name, threshold) for name in ("order_threshold", "query_threshold"))
        self.store, self.judge = store, judge
        self.order_threshold = threshold if order is None else order
        self.query_threshold = query
        self.search_margin, self.search_pairs = SEARCH_MARGIN, SEARCH_PAIRS
        self._judged: dict[tuple[str, str], float] = {}  # a search's pair scores, by the texts read
        self._judged_lock = threading.Lock()

    def candidates(self, memory: Memory, vector: np.ndarray, later: Container[str] = frozenset()) -> list[Memory]:
        """The current memories ``memory`` is judged against: same user, kind, scope and speaker, near it,
        not among ``later`` (the ids its own write stores after it); valid from before it and still valid, or
        valid from after it, ended or not (an old statement imported after newer ones ends at the first of them
        that changed it, not at the last). None for an assistant's reply."""
        if replied(memory):
            return []
        found = self.store.search(vector, CANDIDATE_POOL, memory.owner)
        return [
            other
            for other, _ in found
            if other.id != memory.id
            and other.id not in later
            and (other.valid_to is None or other.valid_from > memory.valid_from)
            and comparable(other, memory)
        ][:CANDIDATES]

    def endings(
        self, memory: Memory, vector: np.ndarray, later: Container[str] = frozenset()
    ) -> list[tuple[Memory, Memory]]:
        """(a memory, its next version) for each candidate the judge says ``memory`` ends (closed), or likely
        replaces (``likely_replaced_by``: the best-scored candidate alone, where none is ended), those valid from
        no later than it; and for ``memory`` itself, closed
        (or linked) by the earliest candidate valid from after it that the judge says ends (or likely replaces)
        it: a statement from before a newer fact, written after it (an old transcript imported late; in write
        order the stale fact had stayed open)."""
        candidates = self.candidates(memory, vector, later)
        before = [other.valid_from <= memory.valid_from for other in candidates]
        pairs = [(other, memory) if b else (memory, other) for other, b in zip(candidates, before, strict=True)]
        out, enders = [], []
        scores = self._scores(pairs)
        ahead = [n for n, earlier in enumerate(before) if earlier]  # the candidates ``memory`` may replace
        best = max(ahead, key=lambda n: scores[n], default=None)  # the first of equal scores
        ends_one = any(scores[n] >= self.judge.threshold for n in ahead)
        for n, ((older, newer), score, earlier) in enumerate(zip(pairs, scores, before, strict=True)):
            linked = earlier and n == best and not ends_one  # a likely replacement: one, beside no ending
            if score >= self.judge.threshold or (score >= self.order_threshold and (linked or not earlier)):
                if earlier:
                    out.append((older, self.decided(older, newer, score)))
                else:
                    enders.append((score < self.judge.threshold, newer.valid_from, score, newer))
        if enders:  # an ending before a likely replacement, then the earliest
            *_, score, first = min(enders, key=lambda ender: ender[:2])
            out.append((memory, self.decided(memory, first, score)))
        return out

    def search_links(self, hits: Sequence[Memory], relevance: Sequence[float]) -> dict[str, str]:
        """The likely replacements a search reads among ``hits`` (its first :data:`SEARCH_DEPTH`, in the order it
        ranks them, with each one's cosine to the query in ``relevance``): {an older hit's id: the id of the newer
        hit that answers in its place} (the module docstring). Each older hit that nothing ranks below yet links the
        best-scored newer hit under it, valid from after it, :func:`comparable`, within :attr:`search_margin` of its
        cosine, judged at ``query_threshold`` or more; none where the judge has no ``query_threshold``. At most
        :attr:`search_pairs` pairs are judged, those of the best hits first (a search's cost stays bounded however
        many of its hits are one speaker's statements)."""
        if self.query_threshold is None:
            return {}
        top = list(zip(hits, relevance))[:SEARCH_DEPTH]
        pairs = [
            (older, newer)
            for n, (older, near) in enumerate(top)
            if older.invalidated_by is None and older.likely_replaced_by is None
            for newer, cosine in top[n + 1 :]
            if cosine >= near - self.search_margin and newer.valid_from > older.valid_from and comparable(older, newer)
        ][: self.search_pairs]
        best: dict[str, tuple[float, str]] = {}
        for (older, newer), score in zip(pairs, self._search_scores(pairs), strict=True):
            if score >= self.query_threshold and score > best.get(older.id, (-1.0, ""))[0]:
                best[older.id] = (score, newer.id)
        return {older: newer for older, (_, newer) in best.items()}

    def ranked_links(
        self, memories: Sequence[Memory], vectors: np.ndarray, scores: np.ndarray, query_vector: np.ndarray
    ) -> dict[str, str]:
        """:meth:`search_links` of ``memories`` ranked by ``scores`` (higher first; ties in the order given), each
        one's cosine to the query from its stored vector (``vectors`` [n, dim]): for a caller that ranks memories it
        holds, as the memory manager's RECALL and view do."""
        ranked = np.argsort(-np.asarray(scores), kind="stable")[:SEARCH_DEPTH]
        relevance = np.asarray(vectors)[ranked] @ query_vector
        return self.search_links([memories[n] for n in ranked], relevance.tolist())

    def _search_scores(self, pairs: Sequence[tuple[Memory, Memory]]) -> list[float]:
        """:meth:`_scores` of a search's pairs, those judged before read back (at most :data:`JUDGED_KEPT` kept)."""
        texts = [said(older, newer) for older, newer in pairs]
        with self._judged_lock:
            known = {pair: self._judged[pair] for pair in texts if pair in self._judged}
        missing = [n for n, pair in enumerate(texts) if pair not in known]
        found = dict(zip((texts[n] for n in missing), self._scores([pairs[n] for n in missing]), strict=True))
        with self._judged_lock:
            if len(self._judged) + len(found) > JUDGED_KEPT:
                self._judged.clear()
            self._judged.update(found)
        return [known[pair] if pair in known else found[pair] for pair in texts]

    def withdraw(self, memory: Memory, when: datetime, update: Callable) -> None:
        """Before ``memory`` says something else (``update(id, text)``): the decisions its old text made are
        withdrawn, ``update(other, released, None)`` for each current memory it ended or likely replaced
        (:func:`released`), so that the new text is judged afresh; a decision that no longer held had stayed,
        and a correction that moved its fact to before the one it had ended left each ended by the other."""
        gone = {memory.id}
        for other in decided_by(self.store.list_memories(memory.owner, limit=None), gone):
            update(other, released(other, gone, when), None)

    def decided(self, older: Memory, newer: Memory, score: float) -> Memory:
        """``older``'s next version by the judge's ``score`` against ``newer``: ended at the threshold
        (:func:`closed_by_judge`), else likely replaced (:func:`linked_by_judge`)."""
        judged = closed_by_judge if score >= self.judge.threshold else linked_by_judge
        return judged(older, newer, score)

    def _scores(self, pairs: Sequence[tuple[Memory, Memory]]) -> list[float]:
        """The judge's scores of (older, newer) memory pairs, read as said (:func:`said`), checked."""
        if not pairs:
            return []
        texts = [said(older, newer) for older, newer in pairs]
        many = getattr(self.judge, "scores", None)
        found = list(many(texts)) if callable(many) else [self.judge.score(*pair) for pair in texts]
        if len(found) != len(texts):
            raise ValueError(f"supersession judge {self.judge!r:.60}: {len(found)} scores for {len(texts)} pairs")
        return [self._checked(score) for score in found]

    def _checked(self, score) -> float:
        if isinstance(score, bool) or not isinstance(score, (int, float, np.floating)):
            raise TypeError(
                f"supersession judge {self.judge!r:.60}: score must be a number, got {type(score).__name__}"
            )
        score = float(score)
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"supersession judge {self.judge!r:.60}: score must lie in [0, 1], got {score!r}")
        return score

    def apply(self, written: list[Memory], vectors: np.ndarray, update: Callable) -> list[Memory]:
        """Inside a write's transaction: for each current memory of ``written`` (with its row of ``vectors``)
        it added or changed, ``update(memory, closed, None)`` writes each memory it ends (or that ends it) as
        its closed version; never against one that the same write stores after it, and never for an older
        version the write stored (a backdated statement is history already). Returns ``written`` as it was."""
        last = {m.id: n for n, m in enumerate(written)}  # linear in the write's size (a set per memory was not)
        for n, (memory, vector) in enumerate(zip(written, vectors)):
            if memory.outcome != "unchanged" and memory.superseded_by is None:
                for ended, closed in self.endings(memory, vector, WrittenAfter(last, n)):
                    update(ended, closed, None)
        return written


class WrittenAfter(Container[str]):
    """The ids a write stores after its ``n``-th memory (``last``: each id's last position in the write)."""

    def __init__(self, last: dict[str, int], n: int):
        self.last, self.n = last, n

    def __contains__(self, memory_id: object) -> bool:
        return self.last.get(memory_id, -1) > self.n  # type: ignore[arg-type]


def closed_by_judge(older: Memory, newer: Memory, score: float) -> Memory:
    """``older``'s next version, its validity ended where ``newer``'s begins (:func:`~memnets.store.rows.closed_by`),
    by the judge's ``score``."""
    return closed_by(older, newer).replace(
        invalidated_by=newer.id, invalidation_score=score, updated_at=max(older.updated_at, newer.updated_at)
    )


def linked_by_judge(older: Memory, newer: Memory, score: float) -> Memory:
    """``older``'s next version, still valid, ranked below ``newer`` that the judge's ``score`` says more likely
    than not replaces it."""
    return older.replace(
        likely_replaced_by=newer.id, likely_replaced_score=score, updated_at=max(older.updated_at, newer.updated_at)
    )


def decided_by(memories: Sequence[Memory], gone: set[str]) -> list[Memory]:
    """The memories of ``memories`` (none of ``gone``) that a memory of ``gone`` ended or likely replaced."""
    return [m for m in memories if m.id not in gone and (m.invalidated_by in gone or m.likely_replaced_by in gone)]


def unlinked(memory: Memory, gone: set[str]) -> Memory:
    """``memory`` without the decisions that the memories ``gone`` made: its ending by one of them undone (valid
    again) and its likely replacement by one of them dropped."""
    fields: dict = {}
    if memory.invalidated_by in gone:
        fields.update(valid_to=None, invalidated_by=None, invalidation_score=None)
    if memory.likely_replaced_by in gone:
        fields.update(likely_replaced_by=None, likely_replaced_score=None)
    return memory.replace(**fields)


def released(memory: Memory, gone: set[str], when: datetime) -> Memory:
    """The next version of ``memory`` (written at ``when``) once the decisions of the memories ``gone`` are withdrawn
    (:func:`unlinked`): they were deleted, or said something else since."""
    return successor(memory, unlinked(memory, gone).replace(t=when))


__all__ = [
    "CANDIDATES", "CANDIDATE_POOL", "SEARCH_DEPTH", "SEARCH_MARGIN", "SEARCH_PAIRS", "Supersession", "SupersessionJudge", "comparable",
    "decided_by", "released", "unlinked",
]  # fmt: skip
