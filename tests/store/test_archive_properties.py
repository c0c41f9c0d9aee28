"""Property-based test: random add / delete / purge / touch / search / reopen against a plain Python model.

Hypothesis drives an Archive and a dict {(owner, id): (Memory, vector)} side by side. Adds draw
arbitrary Unicode (including lone surrogates and blank text, which must be refused whole) and
repeated (owner, id) pairs; after every step the archive must agree with the model on counts,
contents, the index size, and the exact top-k scores of a search.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import timedelta

import numpy as np
import pytest
from archive_helpers import EPOCH, single_threaded_faiss
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from memnets.records import Memory
from memnets.store.archive import Archive
from memnets.store.crypto import generate_key
from memnets.store.errors import InvalidMemoryError
from memnets.timeutil import as_utc

DIM = 8
OWNERS = ("a", "b", "ab")
IDS = ("m0", "m1", "m2", "m3", "m'4", "m%")
POOL = np.random.default_rng(0).normal(size=(12, DIM)).astype(np.float32)
POOL /= np.linalg.norm(POOL, axis=1, keepdims=True)

any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=30)  # lone surrogates too
contents = st.one_of(
    st.text(min_size=1, max_size=30),
    st.text(min_size=1, max_size=30),
    st.just("plain text"),
    st.sampled_from(["", " ", "\t\n", "\u3000"]),
    any_text,
)
memories = st.builds(
    lambda owner, memory_id, minutes, content, importance: Memory(
        id=memory_id, owner=owner, t=EPOCH + timedelta(minutes=minutes), content=content, importance=importance
    ),
    st.sampled_from(OWNERS),
    st.sampled_from(IDS),
    st.integers(0, 1000),
    contents,
    st.floats(0, 1),
)


def storable(memory: Memory) -> bool:
    """Whether the store takes ``memory``'s content: valid UTF-8, not blank, no NUL (PostgreSQL holds none in text,
    so both stores refuse it: memnets.store.rows.refuse_nul)."""
    try:
        memory.content.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(memory.content.strip()) and "\x00" not in memory.content


class ArchiveMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="archive-prop-")
        self.model: dict[tuple[str, str], tuple[Memory, np.ndarray]] = {}
        self.key = None
        self.archive: Archive | None = None

    @initialize(encrypted=st.booleans())
    def open(self, encrypted: bool) -> None:
        self.key = generate_key() if encrypted else None
        self.archive = Archive(self.directory, DIM, key=self.key)

    @rule(batch=st.lists(st.tuples(memories, st.integers(0, len(POOL) - 1)), max_size=4))
    def add(self, batch) -> None:
        keys = [(m.owner, m.id) for m, _ in batch]
        vectors = POOL[[v for _, v in batch]] if batch else np.zeros((0, DIM), np.float32)
        if all(storable(m) for m, _ in batch) and len(set(keys)) == len(keys):
            self.archive.upsert([m for m, _ in batch], vectors)
            self.model.update({(m.owner, m.id): (m, POOL[v]) for m, v in batch})
            event("add stored")
        else:
            event("add refused (blank, bad Unicode, NUL or repeated key)")
            with pytest.raises(InvalidMemoryError):
                self.archive.upsert([m for m, _ in batch], vectors)

    @rule(owner=st.sampled_from(OWNERS), ids=st.lists(st.sampled_from(IDS + ("nope", "m0' OR 1=1")), max_size=3))
    def delete(self, owner, ids) -> None:
        expected = {(owner, i) for i in ids} & self.model.keys()
        assert self.archive.delete(ids, owner) == len(expected)
        for key in expected:
            del self.model[key]

    @rule(owner=st.sampled_from(OWNERS))
    def delete_owner(self, owner) -> None:
        expected = [key for key in self.model if key[0] == owner]
        assert self.archive.delete_owner(owner) == len(expected)
        for key in expected:
            del self.model[key]

    @rule(minutes=st.integers(0, 1000), owner=st.none() | st.sampled_from(OWNERS))
    def purge(self, minutes, owner) -> None:
        cutoff = EPOCH + timedelta(minutes=minutes)
        # the archive reads the naive cutoff as UTC, as Memory reads the naive t it was given
        expected = [k for k, (m, _) in self.model.items() if m.t < as_utc(cutoff) and owner in (None, k[0])]
        assert self.archive.purge_older_than(cutoff, owner=owner) == len(expected)
        for key in expected:
            del self.model[key]

    @rule(owner=st.sampled_from(OWNERS), ids=st.lists(st.sampled_from(IDS), max_size=3), days=st.integers(0, 9))
    def touch(self, owner, ids, days) -> None:
        when = EPOCH + timedelta(days=days)
        # how many memories were touched: an id named twice is one memory
        assert self.archive.touch(ids, owner, when) == len({i for i in ids if (owner, i) in self.model})
        for i in ids:
            if (owner, i) in self.model:
                memory, vector = self.model[(owner, i)]
                self.model[(owner, i)] = (memory.replace(last_access=when), vector)

    @rule()
    def reopen(self) -> None:
        self.archive.close()
        self.archive = Archive(self.directory, DIM, key=self.key)

    @rule(owner=st.sampled_from(OWNERS), query=st.integers(0, len(POOL) - 1), k=st.integers(1, 8))
    def search(self, owner, query, k) -> None:
        hits = self.archive.search(POOL[query], k, owner)
        mine = {i: (m, v) for (o, i), (m, v) in self.model.items() if o == owner}
        expected = sorted((float(v @ POOL[query]) for _, v in mine.values()), reverse=True)[:k]
        assert [s for _, s in hits] == pytest.approx(expected, abs=1e-5)
        for memory, score in hits:
            assert memory == mine[memory.id][0] and score == pytest.approx(
                float(mine[memory.id][1] @ POOL[query]), abs=1e-5
            )

    @invariant()
    def agrees_with_model(self) -> None:
        if self.archive is None:
            return
        for owner in OWNERS:
            mine = {i: m for (o, i), (m, _) in self.model.items() if o == owner}
            assert self.archive.count(owner) == len(mine)
            assert {m.id: m for m in self.archive.list_memories(owner)} == mine
            assert self.archive.get(list(IDS), owner) == [mine[i] for i in IDS if i in mine]
        assert self.archive.index_size() == len(self.model)

    def teardown(self) -> None:
        if self.archive is not None:
            self.archive.close()
        shutil.rmtree(self.directory, ignore_errors=True)


ArchiveMachine.TestCase.settings = settings(
    max_examples=20, stateful_step_count=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestArchiveMachine = ArchiveMachine.TestCase


class LongArchiveMachine(ArchiveMachine):
    """The same machine, run long (slow suite)."""


LongArchiveMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLongArchiveMachine = pytest.mark.slow(LongArchiveMachine.TestCase)


@pytest.fixture(autouse=True)
def _one_faiss_thread():
    with single_threaded_faiss():
        yield
