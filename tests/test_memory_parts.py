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
from memnets.store import LocalState, open_store, supports
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
    with AgentMemory(store, encoder, scorer=ImportanceScorer(), owns_store=True, config=ManagerConfig(k=2)) as memory:
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
