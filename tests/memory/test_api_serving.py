"""What a server needs from AgentMemory, as public methods (so no route touches a store, an encoder or
a manager's insides): ``get_many``, ``explain`` (a search with its score parts), ``manager_snapshot``
and ``ping``; on the embedded store with the tiny encoder."""

from __future__ import annotations

import numpy as np
import pytest

import memnets
from memnets.memory.explain import ScoreParts

TEXTS = ["red green blue", "one two three", "cat dog bird", "north south east"]
EXACT = 0.9999  # the tiny random encoder puts every text near every other: merge identical texts only


class CountingEncoder:
    """The real encoder, with the kinds of its encode calls recorded (a spy, not a mock)."""

    def __init__(self, encoder):
        self.encoder, self.kinds = encoder, []
        self.dim, self.tokenizer, self.fingerprint = encoder.dim, encoder.tokenizer, encoder.fingerprint

    def encode(self, texts, kind="memory", **kwargs):
        self.kinds.append(kind)
        return self.encoder.encode(texts, kind=kind, **kwargs)


@pytest.fixture()
def memory(encoder, tmp_path):
    with memnets.open(tmp_path / "memory", encoder=CountingEncoder(encoder), duplicate_threshold=EXACT) as opened:
        yield opened


def test_get_many_reads_the_users_memories_among_the_ids(memory):
    ids = [m.id for m in memory.add_many(TEXTS[:3], user="ann")]
    bob = memory.add(TEXTS[3], user="bob")
    found = memory.get_many([ids[2], "unknown", bob.id, ids[0]], user="ann")
    assert sorted(m.id for m in found) == sorted([ids[2], ids[0]])  # bob's and unknown ids left out
    assert memory.get_many([], user="ann") == []
    with pytest.raises(TypeError, match="ids must be a list"):
        memory.get_many(ids[0], user="ann")
    with pytest.raises(ValueError, match=r"ids\[1\]"):
        memory.get_many([ids[0], ""], user="ann")


def test_explain_is_search_with_its_parts_from_one_encode(memory, encoder):
    memory.add_many(TEXTS, user="ann")
    memory.encoder.kinds.clear()
    found = memory.explain(TEXTS[2], users=["ann", "nobody"], k=3)
    assert memory.encoder.kinds == ["query"]  # the hits and their parts from one encode of the query
    assert found.ranker == "cosine" and found.weights is None and found.by_user["nobody"] == []
    hits = found.by_user["ann"]
    assert [(h.memory.id, h.score) for h in hits] == [
        (h.memory.id, h.score) for h in memory.search(TEXTS[2], user="ann", k=3)
    ]
    query = np.asarray(encoder.encode([TEXTS[2]], kind="query"), dtype=np.float32)[0]
    for hit in hits:
        stored = np.asarray(encoder.encode([hit.memory.content], kind="memory"), dtype=np.float32)[0]
        assert isinstance(hit.parts, ScoreParts) and hit.parts.learned is None
        assert hit.parts.relevance == pytest.approx(float(query @ stored), abs=1e-4)
        assert 0 < hit.parts.recency <= 1 and hit.parts.importance == hit.memory.importance
    with pytest.raises(TypeError, match="users must be a list"):
        memory.explain(TEXTS[2], users="ann")


@pytest.mark.parametrize("search", ["dense", "hybrid"])
def test_explain_takes_its_hits_vectors_from_the_search_not_a_second_read(encoder, tmp_path, monkeypatch, search):
    """issue 53: the search's results carry what explain needs; the hits' vectors are never read again by id."""
    with memnets.open(tmp_path / "memory", encoder=encoder, duplicate_threshold=EXACT, search=search) as memory:
        memory.add_many(TEXTS, user="ann")
        expected = memory.search(TEXTS[1], user="ann", k=3)
        monkeypatch.setattr(memory.store, "vectors", lambda *a, **k: pytest.fail("explain read the vectors again"))
        found = memory.explain(TEXTS[1], users=["ann"], k=3)
    assert [(h.memory.id, h.score) for h in found.by_user["ann"]] == [(h.memory.id, h.score) for h in expected]
    query = np.asarray(encoder.encode([TEXTS[1]], kind="query"), dtype=np.float32)[0]
    for hit in found.by_user["ann"]:
        stored = np.asarray(encoder.encode([hit.memory.content], kind="memory"), dtype=np.float32)[0]
        assert hit.parts.relevance == pytest.approx(float(query @ stored), abs=1e-4)


def test_manager_snapshot_copies_the_tiers_of_this_memorys_managers_only(memory, encoder, tmp_path):
    manager = memory.manager("ann", state_path=None, resume=False)
    kept = manager.observe("ann adopted a beagle named rex", importance=0.9)
    manager.context_for("what is the dog's name?")
    shot = memory.manager_snapshot(manager, gate_decisions=1)
    assert kept.id in [m.id for m in shot.context + shot.working + shot.pending]
    assert len(shot.gate) == 1 and shot.moves["GATE"] == 1
    with memnets.open(tmp_path / "other", encoder=encoder) as other:
        with pytest.raises(ValueError, match="not a manager of this memory"):
            other.manager_snapshot(manager)
    with pytest.raises(ValueError, match="gate_decisions"):
        memory.manager_snapshot(manager, gate_decisions=-1)


def test_ping_answers_while_open_and_refuses_once_closed(encoder, tmp_path):
    memory = memnets.open(tmp_path / "memory", encoder=encoder)
    memory.ping()
    memory.close()
    with pytest.raises(RuntimeError, match="closed"):
        memory.ping()
