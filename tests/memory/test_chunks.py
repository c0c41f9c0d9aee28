"""Long memories: a memory longer than the encoder's window is embedded window by window and found
by a fact at its very end, once, at its best window's score; through the API (both stores), the
LangChain door and the manager; every rewrite, expiry, erasure and re-embedding takes its windows.

The fast tests run the tiny random encoder with MiniLM's real tokenizer (windows of 126 tokens);
a query equal to the fact ranks the window that holds it near 1 and anything else lower. The slow
test asks all-MiniLM-L6-v2 a question about a fact at the end of 50,000 characters.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

import memnets
from memnets.chunking import window_tokens, windows
from memnets.store import open_store
from memnets.store.chunks import to_blob
from memnets.store.reembed import reembed

FACT = "Finally, the code of the blue bicycle lock in the basement is 4417, and the spare key hangs behind the kitchen door."
FILLER = " ".join(
    f"Day {i}: the weather was mild and we walked along the river, talking about books and the garden."
    for i in range(600)
)
LONG = FILLER[: 50_000 - len(FACT) - 1] + " " + FACT
UNRELATED = [
    "Alice drinks green tea every morning",
    "Alice moved to Lisbon last spring",
    "The team meeting with Omar is at 4 pm on Tuesday",
    "Day 3: the weather was mild and we walked along the river.",
]


def fill(memory, user: str = "ann"):
    for text in UNRELATED:
        memory.add(text, user=user)
    return memory.add(LONG, user=user, metadata={"src": "notes"})


def test_the_chunk_rule_cuts_real_text_in_overlapping_windows(encoder):
    assert len(LONG) == 50_000
    window = window_tokens(encoder)
    assert window == encoder.max_length - 2  # [CLS] and [SEP]; no memory prefix
    parts = windows(encoder, LONG)
    assert len(parts) > 50
    tokens = [len(encoder.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in parts]
    assert max(tokens) <= window and min(tokens[:-1]) >= window - 8  # full windows (a word start moves a few)
    starts = []
    for part in parts:
        assert part in LONG  # real text of the memory, never a decoded token string
        starts.append(LONG.index(part, starts[-1] if starts else 0))
    ends = [start + len(part) for start, part in zip(starts, parts)]
    assert starts[0] < encoder.window_end(LONG)  # the first further window overlaps the main one
    assert all(nxt < end for nxt, end in zip(starts[1:], ends)) and ends[-1] == len(LONG)  # overlapping, to the end
    assert parts[-1].endswith(FACT)
    assert windows(encoder, "a short memory") == [] and windows(encoder, FILLER[:300]) == []

    class NoTokenizer:
        dim, tokenizer, max_length = 32, None, 128

    assert window_tokens(NoTokenizer()) is None and windows(NoTokenizer(), LONG) == []


def test_a_fact_at_the_end_of_50000_characters_is_found_through_the_api(encoder, location):
    with memnets.open(location[0], encoder=encoder, search="dense", **location[1]) as memory:  # the window's cosine
        long = fill(memory)
        store = memory.store
        [chunks] = store.chunk_vectors([long.id], "ann")
        assert len(chunks) == len(windows(encoder, LONG))
        hits = memory.search(FACT, user="ann", k=5)
        assert [h.memory.id for h in hits][0] == long.id and len(hits) == 5
        assert [h.memory.id for h in hits].count(long.id) == 1 and hits[0].memory.content == LONG
        query = np.asarray(encoder.encode([FACT], kind="query")[0])
        assert hits[0].score == pytest.approx(float((chunks @ query).max()), abs=1e-5)  # its best window
        assert float(store.vectors([long.id], "ann")[0] @ query) < hits[0].score - 1e-3  # not its first window
        assert int(np.argmax(chunks @ query)) == len(chunks) - 1  # the window at the end
        filtered = memory.search(FACT, user="ann", k=2, filters={"metadata": {"src": "notes"}})
        assert [h.memory.id for h in filtered] == [long.id]
        assert memory.search(FACT, user="bob", k=5) == []


def test_a_fact_at_the_end_is_found_through_langchain(encoder, tmp_path):
    pytest.importorskip("langchain_core")
    from memnets.integrations.langchain import MemnetsVectorStore

    with memnets.open(tmp_path / "memory", encoder=encoder) as memory:
        vectors = MemnetsVectorStore(memory, user="ann")
        vectors.add_texts(UNRELATED)
        [long_id] = vectors.add_texts([LONG], metadatas=[{"src": "notes"}])
        found = vectors.similarity_search(FACT, k=3)
        assert found[0].page_content == LONG and found[0].id == long_id
        assert [doc.page_content for doc in found].count(LONG) == 1


def test_a_fact_at_the_end_is_found_through_langgraph(encoder, tmp_path):
    pytest.importorskip("langgraph")
    from memnets.integrations.langgraph import MemnetsStore

    with memnets.open(tmp_path / "memory", encoder=encoder, search="dense") as memory:  # the window's cosine
        store = MemnetsStore(memory)
        for n, text in enumerate(UNRELATED):
            store.put(("notes", "ann"), f"u{n}", {"content": text})
        store.put(("notes", "ann"), "long", {"content": LONG, "src": "notes"})
        found = store.search(("notes", "ann"), query=FACT, limit=3)
        assert found[0].key == "long" and found[0].value["content"] == LONG
        assert [item.key for item in found].count("long") == 1
        assert found[0].score == pytest.approx(best_window_score(encoder, memory, "long", "notes.ann"), abs=1e-5)


def test_a_fact_at_the_end_is_found_through_mcp(encoder, tmp_path):
    pytest.importorskip("mcp")
    import anyio
    from mcp.shared.memory import create_connected_server_and_client_session

    from memnets.integrations.mcp_server import build_server

    with memnets.open(tmp_path / "memory", encoder=encoder, search="dense") as memory:  # the window's cosine
        server = build_server(memory)

        async def run():
            async with create_connected_server_and_client_session(server) as session:
                for text in UNRELATED:
                    assert not (await session.call_tool("add_memory", {"text": text, "user_id": "ann"})).isError
                added = await session.call_tool("add_memory", {"text": LONG, "user_id": "ann"})
                found = await session.call_tool("search_memory", {"query": FACT, "user_id": "ann", "k": 3})
                return added.structuredContent, found.structuredContent

        added, found = anyio.run(run)
        hits = found["results"]
        assert hits[0]["id"] == added["id"] and hits[0]["content"] == LONG
        assert [hit["id"] for hit in hits].count(added["id"]) == 1
        assert hits[0]["score"] == pytest.approx(best_window_score(encoder, memory, added["id"], "ann"), abs=1e-5)


def best_window_score(encoder, memory, memory_id: str, user: str) -> float:
    """The best score of FACT against the memory's stored windows (the door must report it: a search
    by the first window alone would score lower)."""
    [chunks] = memory.store.chunk_vectors([memory_id], user)
    assert len(chunks) == len(windows(encoder, LONG))
    query = np.asarray(encoder.encode([FACT], kind="query")[0])
    return float((chunks @ query).max())


def test_the_manager_writes_a_long_observation_with_its_windows(encoder, tmp_path):
    with memnets.open(tmp_path / "memory", encoder=encoder, search="dense") as memory:  # the window's cosine
        for text in UNRELATED:
            memory.add(text, user="ann")
        manager = memory.manager("ann", write_through_threshold=0.0)
        observed = manager.observe(LONG, importance=0.9)
        assert len(memory.store.chunk_vectors([observed.id], "ann")[0]) == len(windows(encoder, LONG))
        assert memory.search(FACT, user="ann", k=3)[0].memory.id == observed.id
        changed = manager.observe(LONG.replace("4417", "5528"), importance=0.9)  # a changed fact: its new version
        assert changed.outcome == "updated" and changed.id == observed.id
        [chunks] = memory.store.chunk_vectors([observed.id], "ann")
        query = np.asarray(encoder.encode([FACT.replace("4417", "5528")], kind="query")[0])
        assert memory.search(FACT.replace("4417", "5528"), user="ann", k=1)[0].score == pytest.approx(
            float((chunks @ query).max()), abs=1e-5
        )
        manager.close()


def test_update_ttl_and_sweep_take_the_windows_with_the_memory(encoder, tmp_path, monkeypatch):
    import memnets.timeutil as timeutil

    with memnets.open(tmp_path / "memory", encoder=encoder) as memory:
        long = fill(memory)
        store = memory.store
        memory.update(long.id, user="ann", metadata={"src": "diary"})  # same text: its windows stay
        assert len(store.chunk_vectors([long.id], "ann")[0]) == len(windows(encoder, LONG))
        assert memory.search(FACT, user="ann", k=1)[0].memory.id == long.id
        memory.update(long.id, "A short text now.", user="ann")  # re-chunked: none left
        assert store.chunk_vectors([long.id], "ann")[0].shape == (0, encoder.dim)
        assert all(len(store.chunk_vectors([m.id], "ann")[0]) == 0 for m in memory.history(long.id, user="ann"))
        assert memory.search(FACT, user="ann", k=1)[0].memory.id != long.id
        expiring = memory.add(LONG.replace("blue", "green"), user="ann", ttl=timedelta(minutes=5))
        assert memory.search(FACT.replace("blue", "green"), user="ann", k=1)[0].memory.id == expiring.id
        later = timeutil.now() + timedelta(minutes=10)
        monkeypatch.setattr(timeutil, "now", lambda: later)
        assert expiring.id not in {h.memory.id for h in memory.search(FACT, user="ann", k=10)}
        assert memory.sweep_expired() == 1
        with pytest.raises(KeyError):
            store.chunk_vectors([expiring.id], "ann")


def test_erasure_leaves_no_window_vector_in_any_file(encoder, tmp_path):
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=encoder) as memory:
        long = fill(memory, user="zoe")
        memory.add("Bob waters the plants on Sundays", user="bob")
        [chunks] = memory.store.chunk_vectors([long.id], "zoe")
        needles = [to_blob(chunks[n : n + 1]) for n in (0, len(chunks) // 2, len(chunks) - 1)]
        assert all(needle in (folder / "archive.sqlite3").read_bytes() + _wal(folder) for needle in needles)
        memory.delete_all(user="zoe")
    data = b"".join(path.read_bytes() for path in Path(folder).rglob("*") if path.is_file())
    assert not [n for n in needles if n in data]
    assert b"bicycle lock" not in data and b"Bob waters" in data


def test_erasure_on_postgresql_leaves_no_window_vector_in_the_table_files(encoder, pg_url):
    pytest.importorskip("psycopg")
    from archive_helpers import relation_bytes

    table = "e" + uuid.uuid4().hex[:12]
    with memnets.open(pg_url, encoder=encoder, table=table) as memory:
        long = fill(memory, user="zoe")
        memory.add("Bob waters the plants on Sundays", user="bob")
        [chunks] = memory.store.chunk_vectors([long.id], "zoe")
        needles = [to_blob(chunks[n : n + 1]) for n in (0, len(chunks) // 2, len(chunks) - 1)]
        assert all(needle in relation_bytes(pg_url, table) for needle in needles)
        memory.delete_all(user="zoe")  # the default scrub: VACUUM FULL
        on_disk = relation_bytes(pg_url, table)
    assert not [n for n in needles if n in on_disk]


def _wal(folder: Path) -> bytes:
    wal = folder / "archive.sqlite3-wal"
    return wal.read_bytes() if wal.exists() else b""


def test_reembedding_embeds_the_windows_with_the_new_encoder(encoder, tiny_model_dir, location):
    from memnets.nn.encoder import MemoryEncoder

    narrow = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)  # another encoder: other windows
    with memnets.open(location[0], encoder=encoder, **location[1]) as memory:
        long = fill(memory)
        memory.update(long.id, LONG.replace("4417", "4418"), user="ann")  # an older version, without windows
    with open_store(location[0], None, **location[1]) as store:  # stopped after one batch, resumed below
        first = reembed(store, narrow, batch_size=2, max_batches=1)
    assert not first.swapped and first.embedded == 2
    report = memnets.reembed(location[0], encoder=narrow, batch_size=2, **location[1])
    assert report.swapped and first.embedded + report.embedded == report.total
    with memnets.open(location[0], encoder=narrow, **location[1]) as memory:
        [chunks] = memory.store.chunk_vectors([long.id], "ann")
        current = LONG.replace("4417", "4418")
        assert len(chunks) == len(windows(narrow, current)) > len(windows(encoder, current))
        expected = np.asarray(narrow.encode(windows(narrow, current), kind="memory"))
        np.testing.assert_allclose(chunks, expected, atol=1e-5)
        hit = memory.search(FACT.replace("4417", "4418"), user="ann", k=1)[0]
        assert hit.memory.id == long.id


@pytest.mark.slow
def test_the_bundled_encoder_answers_a_question_about_the_end_of_a_long_memory(tmp_path):
    """all-MiniLM-L6-v2: the question finds the 50,000-character memory first; its first window
    alone ranks below a memory that only shares the topic."""
    with memnets.open(tmp_path / "memory") as memory:
        for text in [*UNRELATED, "I ride my bicycle to work when it does not rain"]:
            memory.add(text, user="ann")
        long = memory.add(LONG, user="ann")
        hits = memory.search("What is the code of my bicycle lock?", user="ann", k=3)
        assert hits[0].memory.id == long.id
        query = np.asarray(memory.encoder.encode(["What is the code of my bicycle lock?"], kind="query")[0])
        bicycle = next(h for h in memory.search("bicycle", user="ann", k=6) if "ride" in h.memory.content)
        assert float(memory.store.vectors([long.id], "ann")[0] @ query) < float(
            memory.store.vectors([bicycle.memory.id], "ann")[0] @ query
        )
