"""Hybrid search (memnets.memory.hybrid) through ``memnets.open``, on both stores: what the lexical ranking
finds that the encoder blurs, the store contract under it (filters before ranking, owner scoping), one
order at every k, a stale fact below its successor, the option and its refusal on an encrypted store,
and one door (MCP) end to end. The encoder is the tiny random one of tests/conftest.py: its cosine ranks
by chance, so what ranks first by a word is found by the lexical side."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import anyio
import numpy as np
import pytest
from successor_helpers import KS, QUESTION, STALE, SUCCESSOR, LyonJudge, check_current_first, facts

import memnets
from memnets.argerrors import ArgumentValueError
from memnets.memory.config import ManagerConfig
from memnets.memory.hybrid import DEPTH, HybridSearcher
from memnets.memory.search import Searcher
from memnets.retrieval.fusion import DENSE_WEIGHT, reciprocal_rank, weighted
from memnets.store import MemoryFilter

FILLERS = [
    f"note {i}: the weather was {['mild', 'grey', 'bright'][i % 3]} and we talked about {topic}"
    for i, topic in enumerate(
        ["books", "trains", "soup", "music", "gardens", "films", "shoes", "rain", "tea", "maps"] * 3
    )
]
RARE = "My dentist is Dr. Okonkwo-Baptiste on Hallam Street"


@pytest.fixture
def opened(location, encoder):
    """Opens memories at the test's location (an archive folder, or PostgreSQL with a table of its own)."""
    memories = []

    def opened(**options):
        memory = memnets.open(location[0], encoder=encoder, duplicate_threshold=None, **location[1], **options)
        memories.append(memory)
        return memory

    yield opened
    for memory in memories:
        memory.close()


def test_a_rare_name_is_found_by_its_word_for_its_owner_only(opened):
    memory = opened()
    assert memory.hybrid and "+lexical" in repr(memory)
    memory.add_many([*FILLERS, RARE], user="ann")
    memory.add_many(["Bob's dentist is Dr. Okonkwo-Baptiste too", *FILLERS[:5]], user="bob")
    for query in ("Who is Okonkwo-Baptiste?", "which dentist, okonkwo", "Hallam street"):
        hits = memory.search(query, user="ann", k=3)
        assert hits[0].memory.content == RARE, query
        assert all(hit.memory.owner == "ann" for hit in hits)
        assert all(0.0 <= hit.score <= 1.0 for hit in hits)  # the fused score
    assert [hit.memory.owner for hit in memory.search("Okonkwo", user="bob", k=6)] == ["bob"] * 6


def test_words_most_memories_hold_are_no_evidence(opened):
    """Every memory names Ann: BM25 floors the weight of such a word, and the lengths of the rows must not
    decide (min-max would stretch them over [0, 1]); hybrid ranks these as dense does."""
    memory = opened()
    memory.add_many(
        ["Ann drinks black tea", "Ann moved to Lisbon last spring", "Ann plays chess on Sundays"], user="ann"
    )
    dense = opened(search="dense")
    for query in ("Where does Ann live?", "ann"):
        assert [h.memory.id for h in memory.search(query, user="ann", k=3)] == [
            h.memory.id for h in dense.search(query, user="ann", k=3)
        ]
    assert memory.search("Lisbon", user="ann", k=1)[0].memory.content == "Ann moved to Lisbon last spring"


def test_k_results_whenever_k_match_under_filters(opened):
    memory = opened()
    kinds = ["observation", "plan"]
    for i, text in enumerate(FILLERS):
        memory.add(text, user="ann", kind=kinds[i % 2], metadata={"n": i % 5})
    memory.add(RARE, user="ann", kind="plan", metadata={"n": 4})
    for filters, matching in (
        ({"kind": "plan"}, 16),
        ({"metadata": {"n": 1}}, 6),
        ({"kind": "observation", "metadata": {"n": {"$in": [0, 2]}}}, 6),
        ({"$or": [{"metadata": {"n": 3}}, {"kind": "plan", "metadata": {"n": 4}}]}, 10),
        ({"metadata": {"n": 99}}, 0),
    ):
        for query in ("Okonkwo the dentist", "what about the weather"):
            hits = memory.search(query, user="ann", k=8, filters=filters)
            assert len(hits) == min(8, matching), (filters, query)
            assert all(MemoryFilter.parse(filters).matches(hit.memory) for hit in hits), filters
    assert memory.search("Okonkwo", user="ann", k=1, filters={"kind": "plan"})[0].memory.content == RARE
    assert memory.search("Okonkwo", user="ann", k=1, filters={"kind": "observation"})[0].memory.content != RARE


def test_the_first_k_are_the_same_at_every_k(opened):
    memory = opened()
    memory.add_many([*FILLERS, RARE], user="ann")
    longest = [(hit.memory.id, hit.score) for hit in memory.search("the dentist on a grey day", user="ann", k=DEPTH)]
    assert [s for _, s in longest] == sorted((s for _, s in longest), reverse=True)
    for k in (1, 3, 10):
        assert [(hit.memory.id, hit.score) for hit in memory.search("the dentist on a grey day", user="ann", k=k)] == (
            longest[:k]
        )


def test_a_stale_fact_found_by_its_words_answers_below_its_successor(opened):
    """The question is the stale fact's own text: the lexical side finds it (the successor holds none of its
    words), and the successor still answers first, at every k (tests/successor_helpers.py)."""
    memory = opened(supersession=LyonJudge())
    for text, when in facts():
        memory.add(text, user="ann", t=when)
    answers = {k: [(hit.memory.content, hit.score) for hit in memory.search(QUESTION, user="ann", k=k)] for k in KS}
    check_current_first(answers)


LATEST = "We moved again last week, to Paris"


class ChainJudge:
    """A SupersessionJudge for tests: "Lyon" ends "Leeds", "Paris" ends "Lyon", nothing else ends anything."""

    threshold = 0.5

    def score(self, older: str, newer: str) -> float:
        return 1.0 if (older, newer) in {(STALE, SUCCESSOR), (SUCCESSOR, LATEST)} else 0.0


def answered(memory, **options) -> dict[int, list[str]]:
    return {k: [h.memory.content for h in memory.search(QUESTION, user="ann", k=k, **options)] for k in KS}


def test_a_chain_through_a_memory_that_is_no_candidate_keeps_the_stale_fact_below(opened):
    """The stale fact is found by its words; the memory that ended it is no candidate of the answer: replaced
    since (``add(..., replaces=...)``), or excluded by the filters (the middle of Leeds -> Lyon -> Paris). Its
    current successor answers first at every k, the stale fact right after it. Before, hybrid search kept only
    the links of what the lexical side found, and k = 1 answered "I live in Leeds"."""
    memory = opened(supersession=ChainJudge())
    for text, when in facts():
        memory.add(text, user="ann", t=when)
    [successor] = [m for m in memory.list_memories(user="ann", limit=None) if m.content == SUCCESSOR]
    memory.add("I moved to Lyon, a flat by the river", user="ann", replaces=successor.id)
    for k, texts in answered(memory).items():
        assert texts[0] == "I moved to Lyon, a flat by the river", (k, texts)
        assert STALE not in texts or texts.index(STALE) == 1, (k, texts)

    home = {"topic": "home"}
    memory.add(STALE, user="bo", t=datetime(2024, 1, 1, tzinfo=UTC), metadata=home)
    memory.add(SUCCESSOR, user="bo", t=datetime(2024, 5, 1, tzinfo=UTC))
    memory.add(LATEST, user="bo", t=datetime(2024, 9, 1, tzinfo=UTC), metadata=home)
    for k in (1, 2, 10):
        texts = [h.memory.content for h in memory.search(QUESTION, user="bo", k=k, filters={"metadata": home})]
        assert texts == [LATEST, STALE][:k], (k, texts)


def test_a_stale_fact_only_the_lexical_side_finds_answers_after_its_successor_at_its_score(opened):
    """The dense side ranks the stale fact and its successor last (the query vector points away from them);
    the lexical side finds the stale fact alone, by its word, which puts it first. Its successor is fetched,
    scored as every candidate is (far, no word: low), and shows the stale fact's score: it answers first,
    in the stale fact's place, the stale fact right after it (memnets.memory.search.current_first)."""
    memory = opened(supersession=LyonJudge())
    for text, when in facts():
        memory.add(text, user="ann", t=when)
    [stale] = [m for m in memory.list_memories(user="ann", limit=None) if m.content == STALE]
    away, now = -memory.store.vectors([stale.id], "ann")[0], datetime.now(UTC)
    nearest = [m.content for m, _ in Searcher(memory.store, None, 3).search("", away, "ann", 3, None, now)]
    assert STALE not in nearest and SUCCESSOR not in nearest
    assert [m.content for m, _ in memory.store.lexical_search("Leeds", 3, "ann")] == [STALE]
    searcher = HybridSearcher(memory.store, None, 3, depth=3)
    found = searcher.search("Leeds", away, "ann", 3, None, now)
    assert [m.content for m, _ in found] == [SUCCESSOR, STALE, nearest[0]]
    assert found[0][1] == found[1][1] > found[2][1]
    alone = searcher.search("Tom", away, "ann", 3, None, now)  # found by its word too, and nothing ended it
    assert alone[0][0].content == "I have a cat named Tom"


def test_a_search_without_text_and_an_as_of_read_rank_densely(opened):
    memory = opened()
    memory.add_many([*FILLERS, RARE], user="ann")
    vector = memory.encoder.encode([RARE], kind="query").numpy()[0]
    dense = opened(search="dense")
    assert [h.memory.id for h in memory.search_vector(vector, user="ann", k=5)] == [
        h.memory.id for h in dense.search_vector(vector, user="ann", k=5)
    ]
    now = datetime.now(UTC)
    assert [h.memory.id for h in memory.search("Okonkwo", user="ann", k=5, as_of=now)] == [
        h.memory.id for h in dense.search("Okonkwo", user="ann", k=5, as_of=now)
    ]


def test_search_dense_never_reads_the_lexical_index(opened, monkeypatch):
    memory = opened(search="dense")
    memory.add_many([*FILLERS, RARE], user="ann")
    assert not memory.hybrid
    monkeypatch.setattr(type(memory.store), "lexical_search", lambda *a, **k: pytest.fail("read the index"))
    assert len(memory.search("Okonkwo", user="ann", k=3)) == 3


def test_the_option_is_checked_and_an_encrypted_store_is_dense(tmp_path, encoder):
    with pytest.raises(ValueError, match=r"ManagerConfig.search must be one of \('auto', 'hybrid', 'dense'\)"):
        ManagerConfig(search="bm25")
    key = "a passphrase for the test"
    with pytest.raises(ArgumentValueError, match="keeps no lexical index.*encrypted") as raised:
        memnets.open(tmp_path / "sealed", encoder=encoder, key=key, search="hybrid")
    assert raised.value.field == "search"
    with memnets.open(tmp_path / "sealed", encoder=encoder, key=key) as memory:  # "auto": dense, and it works
        assert not memory.hybrid
        memory.add_many([*FILLERS[:4], RARE], user="ann")
        assert len(memory.search("Okonkwo", user="ann", k=3)) == 3


def test_the_mcp_door_searches_hybrid(tmp_path, encoder):
    """One door end to end: MCP's search_memory goes through AgentMemory.search, so the option at open covers it."""
    from memnets.integrations.mcp_server import build_server

    with memnets.open(tmp_path / "memory", encoder=encoder, duplicate_threshold=None) as memory:
        memory.add_many([*FILLERS, RARE], user="ann")
        server = build_server(memory)
        result = anyio.run(server.call_tool, "search_memory", {"query": "Okonkwo-Baptiste", "user_id": "ann"})
        content = result[0] if isinstance(result, tuple) else result
        found = json.loads(content[0].text)["results"]
    assert found[0]["content"] == RARE


def test_the_fusion_rules():
    dense, lexical = [0.9, 0.5, 0.1, 0.3], [None, 4.0, 2.0, None]
    np.testing.assert_allclose(weighted(dense, lexical, 0.4), [0.4, 0.4 * 0.5 + 0.6, 0.0 + 0.0, 0.4 * 0.25])
    np.testing.assert_allclose(weighted(dense, lexical, 1.0), [1.0, 0.5, 0.0, 0.25])  # dense alone
    np.testing.assert_allclose(reciprocal_rank(dense, lexical), [1 / 61, 1 / 62 + 1 / 61, 1 / 64 + 1 / 62, 1 / 63])
    assert weighted([], []).shape == (0,)
    assert weighted([0.2], [None]).tolist() == [DENSE_WEIGHT]  # one candidate: the top of its dense scale
    with pytest.raises(ValueError, match="weight must be a number in"):
        weighted(dense, lexical, 1.5)
    with pytest.raises(ValueError, match="4 dense scores for 1 lexical"):
        weighted(dense, [None])


def test_eval_retrieval_ranks_through_both_stores(pg_url, tiny_locomo_path, tmp_path, capsys):
    """`memnets eval retrieval` with the kinds of a memory store: the bundled encoder, every turn written and
    searched as AgentMemory.search does, dense and hybrid, in an archive and on PostgreSQL (a URL holding '=')."""
    from memnets.cli import main
    from memnets.training.evaluation import stored  # noqa: F401  (registers the kinds of a memory store)
    from memnets.training.retrieval.rankers import parse_spec

    assert parse_spec(f"store_hybrid:{pg_url}")[0] == "store_hybrid:postgresql"  # no credentials in the name
    out = tmp_path / "eval.json"
    specs = ["store_dense", "store_hybrid", f"pg=store_dense:{pg_url}", f"pg-hybrid=store_hybrid:{pg_url}"]
    assert main(["eval", "retrieval", *specs, "--data", str(tiny_locomo_path), "--json", str(out)]) == 0
    reports = {r["name"]: r for r in json.loads(out.read_text())["reports"]}
    assert list(reports) == ["store_dense", "store_hybrid", "pg", "pg-hybrid"]
    for report in reports.values():
        assert report["counts"]["questions"] > 0 and report["overall"]["recall@50"] == 1.0  # every turn, once
    for a, b in (("store_dense", "pg"), ("store_hybrid", "pg-hybrid")):  # one encoder, the same search on both stores
        assert reports[a]["overall"]["recall@10"] == pytest.approx(reports[b]["overall"]["recall@10"], abs=0.2)
    assert "retrieval on every conversation" in capsys.readouterr().out
