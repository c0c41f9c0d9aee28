"""The parts behind the AgentMemory facade, on the real embedded store with the tiny encoder: the one
re-rank rule (memory/search.py) that search and the manager's RECALL share, the write path driven by
an observer's policy of its own (WritePath.observe), and the LocalState capability that replaced
guessing a store's folder from its attributes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memnets.api import AgentMemory
from memnets.memory.config import ManagerConfig
from memnets.memory.search import Searcher
from memnets.memory.signals import HeuristicImportance
from memnets.memory.writes import WritePath
from memnets.records import Memory
from memnets.store import LocalState, MemoryFilter, open_store, supports
from memnets.store.archive import Archive

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
EXACT = 0.9999  # the tiny random encoder puts every text near every other: merge identical texts only
WORDS = "red green blue one two three cat dog bird north south east sun moon star left right up".split()


class ImportanceScorer:
    """A scorer that ranks by importance alone, so the re-ranked order is known apart from the cosine."""

    def score(self, memories, query, now, *, query_vector=None, memory_vectors=None):
        return np.array([m.importance for m in memories])


def test_search_and_recall_rank_by_one_rule(encoder, tmp_path):
    store = open_store(tmp_path / "m", encoder.dim)
    config = ManagerConfig(k=2, search="dense")  # the candidates are the dense nearest computed below
    with AgentMemory(store, encoder, scorer=ImportanceScorer(), owns_store=True, config=config) as memory:
        scores = {f"m{i}": (i * 7 % 12) / 12 for i in range(12)}  # importance in an order unrelated to the text
        for i, (memory_id, importance) in enumerate(scores.items()):
            memory.add(" ".join(WORDS[i : i + 3]), user="ann", id=memory_id, importance=importance, t=T0)
        memory.add("red green sun", user="bob", importance=1.0, t=T0)  # another user's: never a candidate
        query = "red green sun"
        vector = encoder.encode([query], kind="query").numpy()[0]
        nearest = [m.id for m, _ in memory.store.search(vector, 3 * 2, "ann")]  # fetch_factor 3 * k 2
        expected = sorted(nearest, key=lambda i: -scores[i])[:2]
        assert expected != nearest[:2]  # the scorer, not the cosine, decides

        hits = memory.search(query, user="ann", k=2)
        recalled = memory.manager("ann", mmr_lambda=1.0).recall(query, k=2)

        assert [hit.memory.id for hit in hits] == expected
        assert [m.id for m in recalled] == expected
        assert [hit.score for hit in hits] == pytest.approx([scores[i] for i in expected])


def test_without_a_scorer_search_is_the_stores_ranking(encoder, tmp_path):
    with open_store(tmp_path / "s", encoder.dim) as store:
        memories = [Memory(id=f"m{i}", owner="ann", t=T0, content=w) for i, w in enumerate(WORDS[:6])]
        store.upsert(memories, encoder.encode([m.content for m in memories]).numpy())
        vector = encoder.encode(["cat dog"], kind="query").numpy()[0]
        found = Searcher(store, None, 3).search("cat dog", vector, "ann", 4, None, T0)
        assert [(m.id, pytest.approx(s)) for m, s in found] == [(m.id, s) for m, s in store.search(vector, 4, "ann")]


def at_cosine(cosine: float) -> np.ndarray:
    """A unit vector of 4 dims whose inner product with the query :data:`QUERY` is ``cosine``."""
    return np.array([cosine, np.sqrt(1.0 - cosine**2), 0.0, 0.0], dtype=np.float32)


QUERY = at_cosine(1.0)
# id: (cosine to QUERY, the id of the memory that ended it); A was ended by B, B in turn by C
CHAIN = {"A": (0.9, "B"), "F1": (0.8, None), "B": (0.5, "C"), "F2": (0.4, None), "C": (0.3, None), "F3": (0.2, None)}
# the one order at every k: C first of its chain, showing A's 0.9 (it holds in A's place), B and A after it
CHAIN_ORDER = [("C", 0.9), ("B", 0.9), ("A", 0.9), ("F1", 0.8), ("F2", 0.4), ("F3", 0.2)]


def stored(store, rows: dict, owner: str = "ann", **fields) -> None:
    """Writes ``rows`` ({id: (cosine, invalidated_by)}) to ``store`` as ``owner``'s memories."""
    memories = [
        Memory(
            id=memory_id,
            owner=owner,
            t=T0,
            content=f"fact {memory_id}",
            invalidated_by=ended_by,
            valid_to=T0 if ended_by else None,
            **fields.get(memory_id, {}),
        )
        for memory_id, (_, ended_by) in rows.items()
    ]
    store.upsert(memories, np.stack([at_cosine(cosine) for cosine, _ in rows.values()]))


def answer(found) -> list[tuple[str, float]]:
    return [(memory.id, pytest.approx(score, abs=1e-6)) for memory, score in found]


def test_a_successor_ranks_before_what_it_ended_down_a_chain_in_one_order_at_every_k(tmp_path):
    """Without a scorer: A (the nearest) was ended by B, B by C (far from the query). At every k the answer
    is the start of one order, each successor showing the score of what it ended and answering before it
    (before: A first at k = 1; then F1 first, C below it at its own far score)."""
    with open_store(tmp_path / "s", 4) as store:
        stored(store, CHAIN)
        stored(store, {"A": (0.9, None)}, owner="bob")  # another user's: never fetched as a successor
        searcher = Searcher(store, None, 3)
        for k in range(1, len(CHAIN) + 1):
            assert answer(searcher.search("", QUERY, "ann", k, None, T0)) == CHAIN_ORDER[:k]


def test_a_successor_the_filters_exclude_is_never_answered(tmp_path):
    """C ended B but is of another topic: a search for the topic answers B as the last of A's chain that
    passes, at A's score, and A below it."""
    with open_store(tmp_path / "s", 4) as store:
        home = {"metadata": {"topic": "home"}}
        stored(store, CHAIN, A=home, B=home, F2=home)
        searcher = Searcher(store, None, 3)
        for k in (1, 2, 3):
            found = searcher.search("", QUERY, "ann", k, MemoryFilter.parse(home), T0)
            assert answer(found) == [("B", 0.9), ("A", 0.9), ("F2", 0.4)][:k]


def test_a_replaced_successor_answers_as_its_replacement_and_a_cycle_or_a_deleted_one_ends_a_chain(tmp_path):
    with open_store(tmp_path / "s", 4) as store:
        stored(store, {"A": (0.9, "B"), "D": (0.2, None), "X": (0.7, "Y"), "Y": (0.6, "X"), "G": (0.5, "gone")})
        stored(store, {"B": (0.3, None)}, B={"superseded_by": "D"})  # B, replaced by D since: an older version
        found = Searcher(store, None, 3).search("", QUERY, "ann", 6, None, T0)
        assert answer(found) == [("D", 0.9), ("A", 0.9), ("X", 0.7), ("Y", 0.7), ("G", 0.5)]


class CosineScorer:
    """A scorer that scores each memory by its stored vector's cosine to the query: the scorer's path
    with scores known apart from it."""

    def score(self, memories, query, now, *, query_vector=None, memory_vectors=None):
        return memory_vectors @ query_vector


def test_with_a_scorer_the_fetched_successor_is_scored_by_it(tmp_path):
    with open_store(tmp_path / "s", 4) as store:
        stored(store, CHAIN)
        assert answer(Searcher(store, CosineScorer(), 1).search("", QUERY, "ann", 1, None, T0)) == [("C", 0.9)]
        for k in (1, 2, 3):  # fetch_factor 3: F1 is among the candidates at every k
            assert answer(Searcher(store, CosineScorer(), 3).search("", QUERY, "ann", k, None, T0)) == CHAIN_ORDER[:k]


class WriteNow:
    """An observer holding nothing in process: each new observation is written at once (the write path's
    ObservePolicy, the way a manager without tiers would be)."""

    def __init__(self, writes: WritePath):
        self.writes, self.versions = writes, []

    def held(self):
        return {}

    def held_vectors(self, kind):
        return []

    def buffered(self, memory_id):
        return False

    def repeated(self, memory, t):
        return memory.replace(last_access=max(t, memory.last_access))

    def store_held(self, memory, t):
        raise AssertionError(f"nothing is held, yet {memory.id} was to be written from the buffer")

    def versioned(self, current, new, vector, t):
        self.versions.append((current.id, new.content))

    def added(self, memory, vector):
        self.writes.persist([memory], vector[None, :])


def test_write_path_observes_for_a_policy_of_its_own(encoder, tmp_path):
    with open_store(tmp_path / "s", encoder.dim) as store:
        writes = WritePath(store, encoder, HeuristicImportance(), ManagerConfig(duplicate_threshold=EXACT))
        policy = WriteNow(writes)

        def observe(text, at, id=None):
            memory = Memory(id=id or uuid.uuid4().hex, owner="ann", t=T0 + timedelta(minutes=at), content=text)
            return writes.observe(memory, policy, scored=False, explicit=id is not None)

        first = observe("red green blue", 0, id="a")
        assert first.outcome == "added" and 0.0 <= first.importance <= 1.0
        assert [m.content for m in store.list_memories("ann")] == ["red green blue"]

        again = observe("red green blue", 5)  # the same text under a new id: the stored memory, accessed now
        assert (again.outcome, again.id) == ("unchanged", "a")
        assert store.get(["a"], "ann")[0].last_access == T0 + timedelta(minutes=5)

        changed = observe("red green blue sky", 9, id="a")  # the id of a stored memory with other text
        assert (changed.outcome, changed.id, changed.t) == ("updated", "a", T0)
        assert store.get(["a"], "ann")[0].content == "red green blue sky"
        assert [m.content for m in store.history("a", "ann")] == ["red green blue"]
        assert policy.versions == [("a", "red green blue sky")]
        assert store.count("ann") == 1


def test_local_state_is_declared_by_the_archive(encoder, tmp_path):
    with open_store(tmp_path / "s", encoder.dim) as archive:
        assert supports(archive, LocalState) and archive.directory == tmp_path / "s"


def test_postgres_has_no_local_state(encoder, pg_url):
    with open_store(pg_url, encoder.dim, table="t" + uuid.uuid4().hex[:16]) as store:
        assert not supports(store, LocalState)


class FolderUndeclared(Archive):
    """The archive with its folder, declaring no local state: nothing may be kept beside it."""

    supports_local_state = False


def test_a_folder_is_used_for_state_only_when_declared(encoder, tmp_path):
    # a store's directory attribute alone no longer makes the managers save their tiers beside it
    with AgentMemory(FolderUndeclared(tmp_path / "s", encoder.dim), encoder, owns_store=True) as memory:
        manager = memory.manager("ann")
        manager.observe("red green blue", t=T0)
        assert manager.state_path is None
    assert sorted(p.name for p in (tmp_path / "s").glob("manager-*.json")) == []
    with AgentMemory(open_store(tmp_path / "declared", encoder.dim), encoder, owns_store=True) as memory:
        memory.manager("ann").observe("red green blue", t=T0)
    assert len(list((tmp_path / "declared").glob("manager-*.json"))) == 1
