"""LangChain adapters: the langchain-tests standard suites plus what memnets adds.

VectorStoreIntegrationTests prescribes its own fake embeddings (``get_embeddings()``, deterministic
6-d vectors) and asserts rankings under them, so its memory is opened with those embeddings as the
encoder (``EmbeddingsEncoder``). The retriever suite and the other tests use the tiny random encoder.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")

import torch
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_tests.integration_tests import (
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)
from successor_helpers import KS, QUESTION, STALE, SUCCESSOR, LyonJudge, UnsureJudge, check_current_first, facts

import memnets
from memnets.integrations.langchain import (
    EmbeddingsEncoder,
    MemnetsEmbeddings,
    MemnetsRetriever,
    MemnetsVectorStore,
)

# The suites' async tests are plain `async def` methods (LangChain runs them with asyncio_mode=auto);
# the mark runs them here under pytest-asyncio without changing the mode for the whole test suite.
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings(
        "ignore:The test <Function .* is marked with '@pytest.mark.asyncio':pytest.PytestWarning"
    ),
]

NOTES = [
    ("n1", "Alice drinks green tea every morning", {"topic": "food", "year": 2021}),
    ("n2", "Alice moved to Lisbon last spring", {"topic": "places", "year": 2023}),
    ("n3", "Alice's sister Ana plays the cello", {"topic": "family", "year": 2022}),
    ("n4", "Alice runs a half marathon in October", {"topic": "sport", "year": 2024}),
    ("n5", "Alice is allergic to peanuts", {"topic": "food", "year": 2020}),
]


@pytest.fixture(scope="module")
def tiny_encoder(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def notes_memory(tmp_path_factory, tiny_encoder):
    """A memory where user "alice" holds NOTES (module-scoped: the suites only read it)."""
    with memnets.open(tmp_path_factory.mktemp("notes") / "memory", encoder=tiny_encoder) as memory:
        MemnetsVectorStore(memory, "alice").add_texts(
            [text for _, text, _ in NOTES], [meta for *_, meta in NOTES], ids=[i for i, *_ in NOTES]
        )
        yield memory


class TestMemnetsVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path):
        memory = memnets.open(tmp_path / "memory", encoder=EmbeddingsEncoder(self.get_embeddings()))
        try:
            yield MemnetsVectorStore(memory, user="suite")
        finally:
            memory.close()


class TestMemnetsRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _notes(self, notes_memory):
        self.notes_memory = notes_memory

    @property
    def retriever_constructor(self) -> type[MemnetsRetriever]:
        return MemnetsRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"memory": self.notes_memory, "user": "alice"}

    @property
    def retriever_query_example(self) -> str:
        return "What does Alice drink in the morning?"


def test_embeddings_use_the_encoders_memory_and_query_sides(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, query_prefix="query: ", memory_prefix="memory: ")
    embeddings = MemnetsEmbeddings(encoder)
    docs = embeddings.embed_documents(["Alice likes tea", "Bob likes coffee"])
    query = embeddings.embed_query("Alice likes tea")
    assert torch.allclose(torch.tensor(docs), encoder.encode(["Alice likes tea", "Bob likes coffee"], kind="memory"))
    assert torch.allclose(torch.tensor(query), encoder.encode(["Alice likes tea"], kind="query")[0])
    assert not torch.allclose(torch.tensor(query), torch.tensor(docs[0]))  # the prefixes differ
    with pytest.raises(TypeError, match="encode"):
        MemnetsEmbeddings(42)


def test_embeddings_encoder_normalises_and_checks():
    fake = DeterministicFakeEmbedding(size=7)
    encoder = EmbeddingsEncoder(fake)
    assert encoder.dim == 7
    rows = encoder.encode(["a", "b"], kind="memory")
    assert rows.shape == (2, 7) and rows.dtype == np.float32  # numpy: the adapter serves without torch
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-6)
    raw = np.asarray(fake.embed_query("a"), dtype=np.float32)
    np.testing.assert_allclose(encoder.encode(["a"], kind="query")[0], raw / np.linalg.norm(raw), rtol=1e-6)
    assert encoder.encode([], kind="memory").shape == (0, 7)
    with pytest.raises(ValueError, match="kind"):
        encoder.encode(["a"], kind="document")
    with pytest.raises(TypeError, match="one string"):
        encoder.encode("a")


def test_vector_store_on_the_trained_encoder_scopes_by_user(tmp_path, tiny_encoder):
    store = MemnetsVectorStore.from_texts(
        [text for _, text, _ in NOTES],
        MemnetsEmbeddings(tiny_encoder),
        [meta for *_, meta in NOTES],
        ids=[i for i, *_ in NOTES],
        location=str(tmp_path / "memory"),
        user="alice",
    )
    try:
        assert store.memory.encoder is tiny_encoder
        assert isinstance(store.embeddings, MemnetsEmbeddings)
        found = store.similarity_search_with_score("Alice moved to Lisbon last spring", k=5)
        assert found[0][0] == Document(id="n2", page_content=NOTES[1][1], metadata=NOTES[1][2])
        assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
        assert found[0][1] == pytest.approx(1.0, abs=1e-4)  # cosine of a text with itself
        food = store.similarity_search("Alice moved to Lisbon last spring", k=5, filter={"topic": "food"})
        assert sorted(d.id for d in food) == ["n1", "n5"]
        recent = store.similarity_search("tea", k=5, filter={"year": {"$gte": 2023}})
        assert sorted(d.id for d in recent) == ["n2", "n4"]
        bob = MemnetsVectorStore(store.memory, "bob")
        assert bob.similarity_search("Alice moved to Lisbon last spring", k=5) == []
        assert bob.get_by_ids(["n1"]) == []
        assert [d.id for d in store.get_by_ids(["n3", "missing", "n1"])] == ["n3", "n1"]
        as_retriever = store.as_retriever(search_kwargs={"k": 2}).invoke("Alice moved to Lisbon last spring")
        assert [d.id for d in as_retriever] == [d.id for d, _ in found[:2]]
        # texts without ids get the API's outcome: a repeat is the same document, a changed time updates it
        flight = "Alice's flight to Berlin leaves at 10:30 on Monday"
        later = "Alice's flight to Berlin leaves at 11:30 on Monday"
        new_ids = store.add_texts([flight, flight, later, "Alice adopted a cat"])
        assert new_ids[0] == new_ids[1] == new_ids[2] != new_ids[3]
        assert [d.page_content for d in store.get_by_ids(new_ids[2:])] == [later, "Alice adopted a cat"]
        assert [m.content for m in store.memory.history(new_ids[0], user="alice")] == [flight, later]
        api = store.memory.add(flight, user="alice")  # the API, on the same memory, agrees
        assert (api.id, api.outcome) == (new_ids[0], "updated")
        store.delete()  # no ids: all of alice's documents
        assert store.similarity_search("Alice", k=10) == []
        assert store.memory.users() == []
    finally:
        store.memory.close()


def test_vector_store_refuses_bad_input(tmp_path, tiny_encoder):
    with memnets.open(tmp_path / "memory", encoder=tiny_encoder) as memory:
        with pytest.raises(ValueError, match="user"):
            MemnetsVectorStore(memory, "")
        store = MemnetsVectorStore(memory, "alice")
        with pytest.raises(ValueError, match="2 texts, 1 metadatas"):
            store.add_texts(["a", "b"], [{}])
        with pytest.raises(ValueError, match="location"):
            MemnetsVectorStore.from_texts(["a"], MemnetsEmbeddings(tiny_encoder))
        assert memory.users() == []


def test_unknown_arguments_and_a_string_of_texts_are_type_errors_before_any_write(placed):
    with pytest.raises(TypeError, match="unknown arguments \\['fetch'\\]"):
        placed.similarity_search("a", k=2, fetch=3)
    with pytest.raises(TypeError, match="bogus"):
        placed.as_retriever(search_kwargs={"bogus": 1}).invoke("a")
    with pytest.raises(TypeError, match="colour"):
        placed.add_texts(["unrelated"], colour=1)
    with pytest.raises(TypeError, match="not one string"):
        placed.add_texts("hello world")
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str"):
        placed.add_texts(["unrelated", 7])
    with pytest.raises(ValueError, match=r"texts\[1\] must be non-empty"):
        placed.add_texts(["unrelated", " "])
    # a bad metadata or id of a later item: before, the items ahead of it had been written
    with pytest.raises(ValueError, match=r"metadatas\[1\].*JSON-serialisable"):
        placed.add_texts(["unrelated", "b"], metadatas=[{}, {"o": object()}])
    with pytest.raises(TypeError, match=r"metadatas\[1\] must be a dict, got str"):
        placed.add_texts(["unrelated", "b"], metadatas=[{}, "oops"])
    with pytest.raises(ValueError, match=r"metadatas\[1\].*may not start with '\$'"):
        placed.add_texts(["unrelated", "b"], metadatas=[{}, {"$a": 1}])
    with pytest.raises(TypeError, match=r"ids\[1\] must be a str"):
        placed.add_texts(["unrelated", "b"], ids=[None, 123])
    with pytest.raises(ValueError, match=r"ids\[1\].*reserved for older versions"):
        placed.add_texts(["unrelated", "b"], ids=[None, "x~1"])
    assert sorted(m.id for m in placed.memory.list_memories(user="ann")) == ["a1", "a2", "b"]  # nothing written


def test_retriever_documents_carry_scores_and_filters(notes_memory):
    retriever = MemnetsRetriever(memory=notes_memory, user="alice", k=3)
    docs = retriever.invoke("Alice's sister Ana plays the cello")
    hits = notes_memory.search("Alice's sister Ana plays the cello", user="alice", k=3)
    assert [d.id for d in docs] == [h.memory.id for h in hits]
    assert docs[0].id == "n3" and docs[0].page_content == NOTES[2][1]
    assert docs[0].metadata["topic"] == "family"
    assert [d.metadata["memnets"]["score"] for d in docs] == pytest.approx([h.score for h in hits])
    assert docs[0].metadata["memnets"]["kind"] == "observation"
    food = MemnetsRetriever(memory=notes_memory, user="alice", k=5, filter={"topic": "food"}).invoke("anything")
    assert sorted(d.id for d in food) == ["n1", "n5"]
    assert MemnetsRetriever(memory=notes_memory, user="nobody").invoke("tea") == []


def test_the_vector_store_and_retriever_never_answer_a_stale_fact_above_its_successor(tmp_path, tiny_encoder):
    """Texts added in the order said (successor_helpers), a judge ending "Leeds" by "Lyon": at every k both
    answer the successor first, the stale fact right after it, one order, scores non-increasing."""
    with memnets.open(tmp_path / "memory", encoder=tiny_encoder, supersession=LyonJudge()) as memory:
        store = MemnetsVectorStore(memory, "leo")
        for text, _ in facts():
            store.add_texts([text])
        found = {k: store.similarity_search_with_score(QUESTION, k=k) for k in KS}
        check_current_first({k: [(doc.page_content, score) for doc, score in hits] for k, hits in found.items()})
        retriever = MemnetsRetriever(memory=memory, user="leo")
        documents = {k: retriever.invoke(QUESTION, k=k) for k in KS}
        check_current_first(
            {k: [(doc.page_content, doc.metadata["memnets"]["score"]) for doc in docs] for k, docs in documents.items()}
        )


def test_mmr_never_answers_a_stale_fact_in_its_successors_place(tmp_path, tiny_encoder):
    """MMR picks for diversity, and a stale fact is unlike what it shares with its successor's neighbours: with
    its successor among the candidates it is no candidate (the successor answers, or nothing does), and it comes
    only where k asks for more than the others are, right after its successor (as a search answers). Before, k = 2 at
    lambda 0.5 could answer "I live in Leeds" and leave its successor out; then k = 10 of 10 memories answered 9."""
    with memnets.open(tmp_path / "memory", encoder=tiny_encoder, supersession=LyonJudge()) as memory:
        store = MemnetsVectorStore(memory, "leo")
        for text, _ in facts():
            store.add_texts([text])
        for k, lambda_mult in ((1, 0.5), (2, 0.5), (3, 0.0), (10, 0.3)):
            picked = [
                d.page_content
                for d in store.max_marginal_relevance_search(QUESTION, k=k, fetch_k=10, lambda_mult=lambda_mult)
            ]
            stale_after = STALE not in picked or (k == 10 and picked.index(STALE) == picked.index(SUCCESSOR) + 1)
            assert len(picked) == k and stale_after, (k, lambda_mult, picked)
        assert [d.page_content for d in store.max_marginal_relevance_search(QUESTION, k=1, lambda_mult=1.0)] == [
            SUCCESSOR
        ]


@pytest.mark.parametrize("by_vector", [False, True])
def test_mmr_reads_the_likely_replacement_a_search_reads(tmp_path, tiny_encoder, by_vector):
    """A search's own likely replacement (the judge below its write-time bar, above its query_threshold) is read by
    MMR too: the older statement is no candidate beside it and comes right after it (before, MMR picked it as the
    diverse one, in its successor's place)."""
    with memnets.open(tmp_path / "memory", encoder=tiny_encoder, supersession=UnsureJudge()) as memory:
        store = MemnetsVectorStore(memory, "leo")
        for text, _ in facts():
            store.add_texts([text])
        mmr = store.max_marginal_relevance_search
        if by_vector:
            query = store.embeddings.embed_query(QUESTION)
            mmr = store.max_marginal_relevance_search_by_vector
        for k, lambda_mult in ((1, 0.5), (2, 0.0), (10, 0.3)):
            picked = [d.page_content for d in mmr(QUESTION if not by_vector else query, k=k, lambda_mult=lambda_mult)]
            assert STALE not in picked or picked.index(STALE) == picked.index(SUCCESSOR) + 1, (k, picked)
            assert len(picked) == k and (k < 10 or SUCCESSOR in picked), (k, picked)
        assert memory.get(memory.search(QUESTION, user="leo", k=10)[1].memory.id, user="leo").likely_replaced_by is None


def test_retriever_ainvoke_takes_k_as_invoke_does(notes_memory):
    """``ainvoke(query, k=...)`` overrides k as ``invoke`` does (BaseRetriever's async default refused the k)."""
    retriever = MemnetsRetriever(memory=notes_memory, user="alice", k=2)
    sync = retriever.invoke("Alice's sister Ana plays the cello", k=4)
    found = asyncio.run(retriever.ainvoke("Alice's sister Ana plays the cello", k=4))
    assert len(sync) == 4 and [d.id for d in found] == [d.id for d in sync]
    assert len(asyncio.run(retriever.ainvoke("Alice's sister Ana plays the cello"))) == 2


class PlacedEmbeddings(Embeddings):
    """Embeddings with chosen vectors, so that rankings, relevance and MMR can be checked by hand.

    Query "a" is a1 itself; cos(a1, a2) = 0.99 (a near-duplicate), cos(a1, b) = 0.7, and b is about
    as far from a2 (0.69): plain top-2 gives a1, a2; MMR with lambda 0.3 gives a1, b.
    """

    VECTORS = {
        "a1": [1.0, 0.0, 0.0],
        "a2": [0.99, 0.14107, 0.0],
        "b": [0.7, 0.0, 0.71414],
        "a": [1.0, 0.0, 0.0],
        "unrelated": [0.0, 0.0, 1.0],  # cos(a, unrelated) = 0
        "opposite": [-1.0, 0.0, 0.0],  # cos(a, opposite) = -1
    }

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.VECTORS[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.VECTORS[text]


@pytest.fixture()
def placed(tmp_path):
    """Memories at placed vectors, ranked by cosine alone (``search="dense"``: these tests pin its convention)."""
    memory = memnets.open(tmp_path / "memory", encoder=EmbeddingsEncoder(PlacedEmbeddings(), dim=3), search="dense")
    store = MemnetsVectorStore(memory, "ann")
    store.add_texts(["a1", "a2", "b"], [{"n": 1}, {"n": 2}, {"n": 3}], ids=["a1", "a2", "b"])
    yield store
    memory.close()


def test_relevance_scores_follow_langchains_convention(placed):
    """Relevance is the cosine clipped at 0: an unrelated memory scores 0, not (1 + cos) / 2 = 0.5."""
    placed.add_texts(["unrelated", "opposite"], ids=["u", "o"])
    scored = placed.similarity_search_with_relevance_scores("a", k=5)
    assert [doc.id for doc, _ in scored] == ["a1", "a2", "b", "u", "o"]
    assert [score for _, score in scored] == pytest.approx([1.0, 0.99, 0.7, 0.0, 0.0], abs=1e-4)
    kept = placed.similarity_search_with_relevance_scores("a", k=3, score_threshold=0.9)
    assert [doc.id for doc, _ in kept] == ["a1", "a2"]
    retriever = placed.as_retriever(search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.9})
    assert [doc.id for doc in retriever.invoke("a")] == ["a1", "a2"]


def test_mmr_prefers_a_new_fact_to_a_near_duplicate(placed):
    assert [d.id for d in placed.similarity_search("a", k=2)] == ["a1", "a2"]
    assert [d.id for d in placed.max_marginal_relevance_search("a", k=2, fetch_k=3, lambda_mult=0.3)] == ["a1", "b"]
    assert [d.id for d in placed.max_marginal_relevance_search("a", k=2, fetch_k=3, lambda_mult=1.0)] == ["a1", "a2"]
    retriever = placed.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 3, "lambda_mult": 0.3})
    assert [d.id for d in retriever.invoke("a")] == ["a1", "b"]
    vector = PlacedEmbeddings().embed_query("a")
    assert [d.id for d in placed.max_marginal_relevance_search_by_vector(vector, k=2, fetch_k=3, lambda_mult=0.3)] == [
        "a1",
        "b",
    ]
    only = placed.max_marginal_relevance_search("a", k=2, fetch_k=3, lambda_mult=0.3, filter={"n": {"$gte": 2}})
    assert [d.id for d in only] == ["a2", "b"]
    with pytest.raises(ValueError, match="k <= fetch_k"):
        placed.max_marginal_relevance_search("a", k=3, fetch_k=2)
    with pytest.raises(ValueError, match="lambda_mult"):
        placed.max_marginal_relevance_search("a", lambda_mult=1.5)


def test_with_hybrid_search_relevance_is_the_fused_score(tmp_path):
    """Hybrid search (the default where the store keeps a lexical index): the fused score, in [0, 1] already."""
    with memnets.open(tmp_path / "memory", encoder=EmbeddingsEncoder(PlacedEmbeddings(), dim=3)) as memory:
        assert memory.hybrid
        store = MemnetsVectorStore(memory, "ann")
        store.add_texts(["a1", "a2", "b", "unrelated", "opposite"], ids=["a1", "a2", "b", "u", "o"])
        hits = memory.search("a1", user="ann", k=5)
        relevance = store.similarity_search_with_relevance_scores("a1", k=5)
        assert [d.id for d, _ in relevance] == [h.memory.id for h in hits] and relevance[0][0].id == "a1"
        assert [r for _, r in relevance] == pytest.approx([h.score for h in hits])
        assert all(0.0 <= r <= 1.0 for _, r in relevance)


def test_search_by_vector_ranks_as_search_by_text(placed):
    vector = [2.0, 0.0, 0.0]  # any length: memnets normalises the query
    by_vector = placed.similarity_search_by_vector_with_score(vector, k=3)
    by_text = placed.similarity_search_with_score("a", k=3)
    assert [d.id for d, _ in by_vector] == [d.id for d, _ in by_text]
    assert [s for _, s in by_vector] == pytest.approx([s for _, s in by_text])
    assert [d.id for d in placed.similarity_search_by_vector(vector, k=1, filter={"n": 3})] == ["b"]
    with pytest.raises(ValueError, match="non-zero"):
        placed.similarity_search_by_vector([0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="3 finite numbers"):
        placed.similarity_search_by_vector([1.0, 0.0])
    with pytest.raises(TypeError, match="unknown arguments \\['fetch'\\]"):
        placed.similarity_search_by_vector(vector, fetch=3)
    assert [d.id for d in placed.search("a", search_type="mmr", k=2, fetch_k=3, lambda_mult=0.3)] == ["a1", "b"]


def test_with_a_pack_relevance_is_the_learned_probability(tmp_path, tiny_encoder):
    from memnets.pack import export_pack
    from memnets.scoring import ScorerWeights

    pack = export_pack(
        tmp_path / "pack", tiny_encoder, scorer_weights=ScorerWeights(recency=0.0, relevance=3.0, importance=0.0)
    )
    with memnets.open(tmp_path / "memory", pack=pack, search="dense") as memory:  # the learned score alone
        store = MemnetsVectorStore(memory, "ann")
        store.add_texts([text for _, text, _ in NOTES], ids=[i for i, *_ in NOTES])
        query = NOTES[2][1]
        hits = memory.search(query, user="ann", k=5)
        relevance = store.similarity_search_with_relevance_scores(query, k=5)
        assert [d.id for d, _ in relevance] == [h.memory.id for h in hits]
        assert [r for _, r in relevance] == pytest.approx([1 / (1 + math.exp(-h.score)) for h in hits])
        assert all(0.0 < r < 1.0 for _, r in relevance)
        vector = memory.encoder.encode([query], kind="query")[0]
        by_vector = store.similarity_search_by_vector_with_score(vector.tolist(), k=5)
        assert [s for _, s in by_vector] == pytest.approx([h.score for h in hits], abs=1e-5)  # the same learned score
        picked = store.max_marginal_relevance_search(query, k=2, fetch_k=5, lambda_mult=1.0)
        assert [d.id for d in picked] == [h.memory.id for h in hits[:2]]
