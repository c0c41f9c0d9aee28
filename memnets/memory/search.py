"""The one re-rank rule of archive search: fetch ``fetch_factor * k`` nearest, read their vectors, score them.

``AgentMemory.search`` (with a pack's scorer) and ``MemoryManager``'s RECALL both find memories this
way: the store's inner-product search narrows a user's memories to ``fetch_factor * k`` candidates
(filtered before ranking), and a :class:`~memnets.scoring.Scorer` (recency, relevance, importance)
scores them from their stored vectors. What each caller does with the scores differs: the API keeps
the top ``k``; the manager leaves out what it already holds and diversifies with MMR. Without a pack,
``AgentMemory.search`` ranks by cosine alone (a hand-set recency + importance mix retrieves far worse
on LoCoMo, docs/benchmarks.md).

A stale fact never answers above its successor, at any k (:func:`current_first`): a memory whose
validity a newer one ended (``invalidated_by``, :mod:`memnets.memory.supersession`) ranks below the
memory that ended it, and that one shows at least its score (it answers in the stale fact's place); so
does a memory that a newer one more likely than not replaced (``likely_replaced_by``: the judge's score
below its threshold, the memory still valid). A search of the current facts fetches those successors when
only the ended one was found (:meth:`Searcher.successors`: down the chain to the current one,
owner-scoped, only those that pass the search's filters) and scores them as the others, so the same
memories answer in the same order at every k. An as-of /
known-at read fetches none: it ranks the versions of its time as found (the ended memory was valid
then; no memory is still above one among them that ended it). With the write path's supersession step, a search
also reads likely replacements of its own among its first hits, the question in hand
(:meth:`~memnets.memory.supersession.Supersession.search_links`), and ranks them by the same rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple, TypeVar

import numpy as np

from memnets.memory.supersession import SEARCH_DEPTH
from memnets.records import Memory
from memnets.store.filters import MemoryFilter
from memnets.store.protocol import Chunks, SearchVectors, supports
from memnets.store.rows import memory_of_version

T = TypeVar("T")  # what a read of candidates returns (Searcher._deepened)


def successor_id(memory: Memory) -> str | None:
    """The id of the memory that ``memory`` ranks below: the one that ended its validity, else the one that
    more likely than not replaced it (:mod:`memnets.memory.supersession`), else None."""
    return memory.invalidated_by or memory.likely_replaced_by


class SearchHit(NamedTuple):
    """One search result: the memory and its score (cosine, or the pack's learned score; with hybrid search their
    fusion with the lexical score, :mod:`memnets.memory.hybrid`), higher first."""

    memory: Memory
    score: float


def score(scorer, memories: Sequence[Memory], query: str, now: datetime, query_vector, vectors) -> np.ndarray:
    """``scorer``'s scores of ``memories`` (with their ``vectors`` [n, dim]) for the query: float64 [n]."""
    scores = scorer.score(memories, query, now, query_vector=query_vector, memory_vectors=vectors)
    return np.asarray(scores, dtype=np.float64).reshape(len(memories))


class Searcher:
    """Archive search of one store re-ranked by ``scorer`` (None: the store's cosine, as it ranks).

    Args:
        store: the memory store searched.
        scorer: a :class:`~memnets.scoring.Scorer`, or None for the store's own ranking.
        fetch_factor: candidates fetched per result wanted, for the scorer to choose from.
        supersession: the write path's :class:`~memnets.memory.supersession.Supersession`, whose judge reads the
            likely replacements among a search's first hits (:meth:`linked`); None reads none.
    """

    def __init__(self, store, scorer, fetch_factor: int, supersession=None):
        self.store, self.scorer, self.fetch_factor = store, scorer, fetch_factor
        self.supersession = supersession
        self.read: dict[str, np.ndarray] = {}  # the stored vectors the last search() read, by memory id

    def _keep(self, memories: Sequence[Memory], vectors: np.ndarray) -> np.ndarray:
        """Remember the stored ``vectors`` [n, dim] of ``memories`` that a search read (see :meth:`vectors_of`)."""
        self.read.update((m.id, v) for m, v in zip(memories, vectors))
        return vectors

    def vectors_of(self, memories: Sequence[Memory], owner: str) -> np.ndarray:
        """The stored vectors [n, dim] of ``memories`` (the last :meth:`search`'s hits): those it read already,
        the others read by id (none where the store hands a search's vectors back, :meth:`candidates`)."""
        missing = [m for m in memories if m.id not in self.read]
        if missing:
            self._keep(missing, self.store.vectors([m.id for m in missing], owner))
        if not memories:
            return np.zeros((0, self.store.dim), np.float32)
        return np.stack([self.read[m.id] for m in memories])

    def fetch(
        self, query_vector: np.ndarray, k: int, owner: str, filters: MemoryFilter | None = None
    ) -> list[tuple[Memory, float]]:
        """The ``fetch_factor * k`` nearest current memories of ``owner`` passing ``filters``, nearest first."""
        return self.store.search(query_vector, self.fetch_factor * k, owner, filters=filters)

    def candidates(
        self, query_vector: np.ndarray, k: int, owner: str, filters: MemoryFilter | None = None
    ) -> tuple[list[Memory], np.ndarray]:
        """:meth:`fetch`'s memories with their stored vectors [n, dim]: from the search's own read where the
        store returns them (:class:`~memnets.store.protocol.SearchVectors`), else read by id after it."""
        if supports(self.store, SearchVectors):
            found, vectors = self.store.search_with_vectors(query_vector, self.fetch_factor * k, owner, filters=filters)
            return [m for m, _ in found], vectors
        memories = [m for m, _ in self.fetch(query_vector, k, owner, filters)]
        return memories, self.store.vectors([m.id for m in memories], owner)

    def search(
        self,
        query: str,
        query_vector: np.ndarray,
        owner: str,
        k: int,
        filters: MemoryFilter | None,
        now: datetime,
        read_links: bool = True,
    ) -> list[tuple[Memory, float]]:
        """The ``k`` best memories of ``owner`` for the query with the scores they show, best first, by
        :func:`current_first` (a stale fact never above the memory that ended it): by the store's cosine
        (no scorer: :meth:`nearest`), or by the scorer's score of its ``fetch_factor * k`` candidates and
        the current successors of the ended ones among them (:meth:`successors`); with ``read_links``, the
        likely replacements the judge reads among them too (:meth:`linked`; a hybrid search reads them once, in its
        fused order). The stored vectors it read are kept for :meth:`vectors_of`."""
        self.read = {}
        if self.scorer is None:
            return self.nearest(query_vector, owner, k, filters, read_links)
        depth = max(k, self.links_depth(filters)) if read_links else k
        memories, vectors = self._deepened(
            lambda depth: self.candidates(query_vector, depth, owner, filters), depth, filters, lambda read: read[0]
        )
        memories, vectors, links = self.with_successors(memories, vectors, owner, filters)
        self._keep(memories, vectors)
        if not memories:
            return []
        scores = score(self.scorer, memories, query, now, query_vector, vectors)
        hits = sorted(zip(memories, scores.tolist()), key=lambda hit: -hit[1])
        links = self.linked(hits, links, owner, query_vector, filters) if read_links else links
        return current_first(hits, links)[:k]

    def with_successors(
        self, memories: list[Memory], vectors: np.ndarray, owner: str, filters: MemoryFilter | None
    ) -> tuple[list[Memory], np.ndarray, dict[str, str]]:
        """``memories`` (with their ``vectors`` [n, dim]) and the current successors of the ended ones among them
        (:meth:`successors`) with theirs, and the links read on the way: what a re-scored search ranks."""
        added, links = self.successors(memories, owner, filters)
        if added:
            memories = [*memories, *added]
            vectors = np.concatenate([vectors, self.store.vectors([m.id for m in added], owner)])
        return memories, vectors, links

    def nearest(
        self, query_vector: np.ndarray, owner: str, k: int, filters: MemoryFilter | None, read_links: bool = True
    ) -> list[tuple[Memory, float]]:
        """The ``k`` best by the store's cosine as :func:`current_first` ranks them, exact at every k: the
        store's ``k`` nearest with the current successors of the ended ones among them (:meth:`successors`).
        One search is enough: a memory shows no less than its own cosine, and one the search left out shows
        no more than the k-th cosine it gave, unless it ended one of them, and then it was fetched as a successor."""
        found = self._deepened(
            lambda depth: self._nearest(query_vector, depth, owner, filters),
            max(k, self.links_depth(filters)) if read_links else k,
            filters,
            lambda read: [m for m, _ in read],
        )
        added, links = self.successors([m for m, _ in found], owner, filters)
        hits = sorted([*found, *zip(added, self.cosines(added, owner, query_vector))], key=lambda hit: -hit[1])
        links = self.linked(hits, links, owner, query_vector, filters) if read_links else links
        return current_first(hits, links)[:k]

    def links_depth(self, filters: MemoryFilter | None) -> int:
        """The hits a search reads for likely replacements of its own (:meth:`linked`): none without a judge that
        reads them or for an as-of / known-at read, else :data:`~memnets.memory.supersession.SEARCH_DEPTH`, so that
        its first answers are the same at every k."""
        reads = self.supersession is not None and self.supersession.query_threshold is not None
        return SEARCH_DEPTH if reads and not (filters is not None and filters.time_travel) else 0

    def linked(
        self,
        hits: Sequence[tuple[Memory, float]],
        links: Mapping[str, str],
        owner: str,
        query_vector: np.ndarray,
        filters: MemoryFilter | None,
    ) -> dict[str, str]:
        """``links`` (read down the chains, :meth:`successors`) with the likely replacements the judge reads among
        the first :meth:`links_depth` of ``hits`` (ranked, best first), each judged by the memories' cosines to the query
        (:meth:`~memnets.memory.supersession.Supersession.search_links`): what :func:`current_first` ranks by."""
        depth = self.links_depth(filters)
        if not depth:
            return dict(links)
        top = [memory for memory, _ in hits[:depth]]
        relevance = self.vectors_of(top, owner) @ query_vector
        return {**links, **self.supersession.search_links(top, relevance.tolist())}

    @staticmethod
    def _deepened(read: Callable[[int], T], k: int, filters: MemoryFilter | None, memories: Callable[[T], list]) -> T:
        """``read(k)``, and for an as-of / known-at read ``read`` deeper (4x each time) while an ended memory among
        its ``memories`` lacks its successor (:func:`unanswered`) and a deeper read finds more. Such a read answers
        the versions of its time, which only it can find (:meth:`successors` fetches none), so a stale fact's
        successor is fetched by reading on; the store ranks every visible version for it anyway (exact)."""
        found = read(k)
        if filters is None or not filters.time_travel:
            return found
        depth, count = k, -1
        while unanswered(memories(found)) and len(memories(found)) > count:
            count, depth = len(memories(found)), depth * 4
            found = read(depth)
        return found

    def _nearest(
        self, query_vector: np.ndarray, k: int, owner: str, filters: MemoryFilter | None
    ) -> list[tuple[Memory, float]]:
        """The store's k nearest (memory, cosine), their vectors kept where the store hands them back."""
        if not supports(self.store, SearchVectors):
            return [(m, float(s)) for m, s in self.store.search(query_vector, k, owner, filters=filters)]
        found, vectors = self.store.search_with_vectors(query_vector, k, owner, filters=filters)
        self._keep([m for m, _ in found], vectors)
        return [(m, float(s)) for m, s in found]

    def successors(
        self, memories: Sequence[Memory], owner: str, filters: MemoryFilter | None
    ) -> tuple[list[Memory], dict[str, str]]:
        """(the current successors of the ended memories among ``memories`` that are not among them, the
        links read on the way: {id: the id of the memory that ended or replaced it}).

        Each ended memory's chain is read down from its :func:`successor_id` (and ``superseded_by`` where
        that memory was replaced since), one read of ``owner``'s memories by id per step, until it ends
        (a memory nothing ended, or one deleted, expired or already read: a cycle stops there). Every memory
        on the way that is current (no ``superseded_by``) and passes ``filters``
        (:meth:`~memnets.store.filters.MemoryFilter.matches`, the stores' rule: a search never answers a
        memory its filters exclude) is added: each shows at least the ended memory's score
        (:func:`current_first`), so each belongs in the answer as much as the ended one does.
        An as-of / known-at read (``filters.time_travel``) fetches none here (:meth:`_deepened` reads on
        instead): it answers the versions of its time, where the ended memory was valid and its successor, if it
        held yet, is a version of its own."""
        if filters is not None and filters.time_travel:
            return [], {}
        hits = {m.id for m in memories}
        read: dict[str, Memory] = {}
        links = {m.id: after for m in memories if (after := successor_id(m)) is not None}
        wanted = set(links.values()) - hits
        while wanted:  # one read per step down the chains
            for memory in self.store.get(sorted(wanted), owner):
                read[memory.id] = memory
                if (after := memory.superseded_by or successor_id(memory)) is not None:
                    links[memory.id] = after
            wanted = {links[i] for i in wanted if i in links} - hits - read.keys()
        added = {}
        for start in hits & links.keys():
            after, seen = links[start], {start}
            while after in read and after not in seen:  # a hit on the way: its own chain starts there
                seen.add(after)
                memory = read[after]
                if memory.superseded_by is None and (filters is None or filters.matches(memory)):
                    added[after] = memory
                after = links.get(after)
        return list(added.values()), {i: after for i, after in links.items() if i not in hits}

    def cosines(self, memories: Sequence[Memory], owner: str, query_vector: np.ndarray) -> list[float]:
        """Each memory's score as the store's search gives it: the inner product of its stored vector with
        the query, or of its best further window where it has them (:mod:`memnets.store.chunks`)."""
        if not memories:
            return []
        ids = [m.id for m in memories]
        scores = self._keep(memories, self.store.vectors(ids, owner)) @ query_vector
        if supports(self.store, Chunks):
            windows = self.store.chunk_vectors(ids, owner)
            scores = [max(s, float((w @ query_vector).max(initial=-np.inf))) for s, w in zip(scores, windows)]
        return [float(s) for s in scores]


def unanswered(memories: Sequence[Memory]) -> bool:
    """Whether a memory among ``memories`` names a successor (:func:`successor_id`) that is not among them, as
    itself or as an older version ``{id}~{n}``."""
    present = {m.id for m in memories} | {memory_of_version(m.id) for m in memories}
    return any((after := successor_id(m)) is not None and after not in present for m in memories)


def current_first(
    hits: Sequence[tuple[Memory, float]], links: Mapping[str, str] | None = None
) -> list[tuple[Memory, float]]:
    """``hits`` (memory, own score; ties keep their order) ranked as a search answers them, with the score
    each shows: no memory above one that ended it. A search's answer is the first k.

    A memory's successors are the memories among ``hits`` that ended it (or likely replaced it), directly or
    in turn: its chain of :func:`successor_id` (through ``links``, {id: the id that ended or replaced it}, for
    memories not among ``hits`` and for hits whose record names none: a search's own likely replacements,
    :meth:`Searcher.linked`; a cycle is read once round; an older version ``{id}~{n}`` among ``hits``, as an
    as-of or known-at read answers it, stands for memory ``id``). The rule: a memory shows the best of its own
    score and those of the memories among ``hits`` it ended or likely replaced, directly or in turn (the
    judge said it holds in their place, so it answers what they answered: "Lyon's been great so far" takes
    the place of "I live in Leeds" for "Where do I live?", which it alone is too far from to answer); the
    list is sorted by shown score, highest first, at equal shown scores the memory with fewer successors
    first (so each successor before every memory it ended), then in the order given. So the list is
    sorted by the score it shows, a stale fact is never above its successor, and where the stale fact
    outranks all else the first answer is its successor.
    """
    links = links or {}
    position = {memory.id: n for n, (memory, _) in enumerate(hits)}
    for n, (memory, _) in enumerate(hits):  # an as-of / known-at read answers a successor as its older version
        position.setdefault(memory_of_version(memory.id), n)
    shown = [own for _, own in hits]
    successors = [0] * len(hits)
    for n, (memory, own) in enumerate(hits):
        after, seen = successor_id(memory) or links.get(memory.id), {memory.id}
        while after is not None and after not in seen:
            seen.add(after)
            if after in position:
                later = position[after]
                shown[later], successors[n] = max(shown[later], own), successors[n] + 1
                after = successor_id(hits[later][0]) or links.get(hits[later][0].id)
            else:
                after = links.get(after)
    ranked = sorted(range(len(hits)), key=lambda n: (-shown[n], successors[n], n))
    return [(hits[n][0], shown[n]) for n in ranked]


__all__ = ["SearchHit", "Searcher", "current_first", "score", "successor_id"]
