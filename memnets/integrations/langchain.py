"""LangChain adapters on a memnets memory: a retriever, a vector store and the encoder as ``Embeddings``.

- :class:`MemnetsRetriever`: a ``BaseRetriever`` over one user's memories (``k`` results), ranked by
  ``AgentMemory.search`` (the memory's encoder, its store and, with a pack, the learned scorer).
- :class:`MemnetsVectorStore`: a ``VectorStore`` whose documents are one user's memories: a document's
  id is the memory id, its ``page_content`` the memory's content, its metadata the memory's metadata.
  ``add_texts`` is ``AgentMemory.add`` per text, with the API's outcome: a text without an id that
  says what one of the user's memories says is that memory (its id is returned), one that changes a
  fact of a near match is that memory's new version, anything else a new memory; a document with
  an id that exists writes a new version of that memory (the old one stays in its history);
  ``delete`` removes a memory with its history.
- :class:`MemnetsEmbeddings`: a memnets encoder as LangChain ``Embeddings`` (documents are encoded as
  memories, queries as queries, each with the encoder's own prefix).
- :class:`EmbeddingsEncoder`: the other direction, any LangChain ``Embeddings`` as the encoder of a
  memnets memory (``memnets.open(folder, encoder=EmbeddingsEncoder(embeddings))``), so a memory can run
  on a hosted embedding model, or on the fake embeddings LangChain's standard tests prescribe.
- :func:`message_dicts` (from :mod:`memnets.integrations.chat`): LangChain chat messages
  (``HumanMessage``, ``AIMessage``, ...) as the messages ``AgentMemory.add(messages=...)`` takes.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from memnets.argerrors import ArgumentTypeError
from memnets.extras import needs_extra
from memnets.memory.encoding import embed
from memnets.memory.ids import check_new_id
from memnets.memory.mmr import mmr_current_first
from memnets.memory.texts import check_text
from memnets.records import Memory
from memnets.scoring import min_max
from memnets.store.filters import MemoryFilter
from memnets.store.rows import encode_row
from memnets.timeutil import now

with needs_extra("memnets.integrations.langchain", "langchain"):
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore

    from memnets.integrations.chat import message_dicts as message_dicts  # re-exported: LangChain messages in


class MemnetsEmbeddings(Embeddings):
    """A memnets text encoder (``memory.encoder``, a pack's or a trained ``MemoryEncoder``) as LangChain Embeddings."""

    def __init__(self, encoder):
        if not callable(getattr(encoder, "encode", None)):
            raise TypeError(
                f"MemnetsEmbeddings: encoder must have .encode(texts, kind=...), got {type(encoder).__name__}"
            )
        self.encoder = encoder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors of ``texts`` encoded as memories."""
        return self.encoder.encode(list(texts), kind="memory").tolist()

    def embed_query(self, text: str) -> list[float]:
        """Unit vector of ``text`` encoded as a query."""
        return self.encoder.encode([text], kind="query")[0].tolist()


class EmbeddingsEncoder:
    """LangChain ``Embeddings`` as a memnets text encoder: ``encode(texts, kind) -> [n, dim]`` unit rows.

    Memories go through ``embed_documents``, queries through ``embed_query``; rows are L2-normalised
    because memnets stores rank by inner product. ``dim`` is measured once by embedding a probe text
    when it is not given.
    """

    def __init__(self, embeddings: Embeddings, dim: int | None = None):
        if not isinstance(embeddings, Embeddings):
            raise TypeError(
                f"EmbeddingsEncoder: embeddings must be a LangChain Embeddings, got {type(embeddings).__name__}"
            )
        self.embeddings = embeddings
        self.dim = int(dim) if dim is not None else len(embeddings.embed_query("dimension probe"))
        if self.dim < 1:
            raise ValueError(f"EmbeddingsEncoder: dim must be positive, got {self.dim}")

    @property
    def fingerprint(self) -> str:
        """What a store records of these embeddings (their weights are not ours to hash): the class,
        the model it names (``model``, ``model_name`` or ``deployment``, when it has one) and the dim."""
        kind = type(self.embeddings)
        names = (getattr(self.embeddings, name, None) for name in ("model", "model_name", "deployment"))
        model = next((name for name in names if isinstance(name, str) and name), "unnamed")
        return f"langchain:{self.dim}:{kind.__module__}.{kind.__qualname__}/{model}"

    @property
    def source(self) -> str:
        return f"LangChain embeddings {type(self.embeddings).__qualname__}"

    def encode(self, texts: Sequence[str], kind: str = "memory", **_: Any) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not one string")
        if kind == "memory":
            rows = self.embeddings.embed_documents(list(texts)) if texts else []
        elif kind == "query":
            rows = [self.embeddings.embed_query(text) for text in texts]
        else:
            raise ValueError(f"kind must be 'memory' or 'query', got {kind!r}")
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(rows), self.dim)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # as torch's normalize


def as_embeddings(encoder) -> Embeddings:
    """The LangChain view of a memory's encoder (the wrapped Embeddings of an EmbeddingsEncoder)."""
    return encoder.embeddings if isinstance(encoder, EmbeddingsEncoder) else MemnetsEmbeddings(encoder)


def as_encoder(embedding: Embeddings):
    """The memnets encoder for LangChain Embeddings (the memnets encoder inside MemnetsEmbeddings)."""
    return embedding.encoder if isinstance(embedding, MemnetsEmbeddings) else EmbeddingsEncoder(embedding)


def _document(memory, **extra_metadata) -> Document:
    metadata = dict(memory.metadata or {})
    if extra_metadata:
        metadata["memnets"] = extra_metadata
    return Document(id=memory.id, page_content=memory.content, metadata=metadata)


def _filters(filter: Mapping[str, Any] | MemoryFilter | None) -> MemoryFilter | None:
    """A search filter: a MemoryFilter, or a dict of metadata field -> value or operators."""
    if filter is None or isinstance(filter, MemoryFilter):
        return filter
    return MemoryFilter(metadata=filter)


class MemnetsRetriever(BaseRetriever):
    """The ``k`` memories of one user that best answer a query, as Documents.

    Each Document has the memory's id, content and metadata, plus ``metadata["memnets"]`` with the
    search ``score``, the memory's time ``t`` (ISO) and ``kind``. ``filter`` is a dict of metadata
    field -> value or ``{"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte"|"$in": value}``, or a MemoryFilter.
    ``invoke(query, k=...)`` overrides ``k`` for one call.
    """

    memory: Any
    user: str
    k: int = 5
    filter: Any = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        hits = self.memory.search(query, user=self.user, k=self.k if k is None else k, filters=_filters(self.filter))
        return [
            _document(hit.memory, score=float(hit.score), t=hit.memory.t.isoformat(), kind=hit.memory.kind)
            for hit in hits
        ]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        """The same search in a worker thread, ``k`` included (BaseRetriever's default async path drops
        the keyword arguments that ``ainvoke`` passes)."""
        return await asyncio.to_thread(self._get_relevant_documents, query, run_manager=run_manager.get_sync(), k=k)


class MemnetsVectorStore(VectorStore):
    """One user's memories as a LangChain VectorStore.

    Args:
        memory: the :class:`memnets.api.AgentMemory` (``memnets.open(...)``); its encoder embeds
            texts and queries. To use other LangChain Embeddings, open the memory with
            ``encoder=EmbeddingsEncoder(embeddings)`` or build the store with :meth:`from_texts`.
        user: the memnets user (owner) whose memories this store holds.
    """

    def __init__(self, memory, user: str):
        if not isinstance(user, str) or not user:
            raise ValueError(f"MemnetsVectorStore: user must be a non-empty string, got {user!r}")
        self.memory = memory
        self.user = user

    @property
    def embeddings(self) -> Embeddings:
        return as_embeddings(self.memory.encoder)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add texts as memories through ``AgentMemory.add``; returns the id of each text's memory.

        The API's outcome, text by text (docs/memory.md): a text without an id that says what one
        of the user's memories says returns that memory's id (nothing new is stored), one that
        changes a fact of a near match (a time, a number, a name) returns the id of the memory it
        updated (the old text stays in its history), anything else a new id. A given id that
        exists gets a new version (the old one stays in its history).
        """
        _no_extra(kwargs, "add_texts")
        if isinstance(texts, str):  # a str is an iterable of one-letter texts: refuse it before writing any
            raise TypeError(f"add_texts: texts must be a list of strings, not one string ({texts!r:.40})")
        texts = list(texts)
        metadatas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        ids = list(ids) if ids is not None else [None] * len(texts)
        if not (len(metadatas) == len(ids) == len(texts)):
            raise ValueError(f"add_texts: got {len(texts)} texts, {len(metadatas)} metadatas and {len(ids)} ids")
        for n, item in enumerate(zip(texts, metadatas, ids)):  # all checked first: a bad one leaves nothing written
            self._check_item(n, *item)
        return [
            self.memory.add(text, user=self.user, id=id_ or None, metadata=dict(metadata or {})).id
            for text, metadata, id_ in zip(texts, metadatas, ids)
        ]

    def _check_item(self, n: int, text, metadata, id_) -> None:
        """The checks a memory of item ``n`` meets when it is stored (the text, the id, the record and its row,
        built as the store builds it), made before any item is written; errors name the argument and ``n``."""
        check_text(text, f"add_texts: texts[{n}]")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ArgumentTypeError(
                f"add_texts: metadatas[{n}] must be a dict, got {type(metadata).__name__}", field="metadatas"
            )
        if id_:
            check_new_id(id_, f"add_texts: ids[{n}]")
        record = Memory(id=id_ or "new", owner=self.user, t=now(), content=text, metadata=dict(metadata or {}))
        encode_row(record, np.zeros(self.memory.encoder.dim, np.float32), f"add_texts: metadatas[{n}]")

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete the memories with these ids (missing ones are ignored); ``ids=None`` deletes all of the user's."""
        if ids is None:
            self.memory.delete_all(user=self.user)
        else:
            for id_ in ids:
                self.memory.delete(id_, user=self.user)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids, in the given order; missing ids are left out."""
        return [_document(memory) for memory in self._get(ids)]

    def similarity_search(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | MemoryFilter | None = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k=k, filter=filter, **kwargs)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | MemoryFilter | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Best first: cosine similarity, or the pack's learned score when the memory has a pack (with hybrid
        search, their fusion with the lexical score: :mod:`memnets.memory.hybrid`)."""
        _no_extra(kwargs, "similarity_search_with_score")
        hits = self.memory.search(query, user=self.user, k=k, filters=_filters(filter))
        return [(_document(hit.memory), float(hit.score)) for hit in hits]

    def similarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Mapping[str, Any] | MemoryFilter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """The ``k`` documents best for a query embedding (of this store's ``embeddings.embed_query``),
        ranked as :meth:`similarity_search` ranks without hybrid search (no text: the dense score alone)."""
        return [doc for doc, _ in self.similarity_search_by_vector_with_score(embedding, k=k, filter=filter, **kwargs)]

    def similarity_search_by_vector_with_score(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Mapping[str, Any] | MemoryFilter | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """:meth:`similarity_search_by_vector` with each document's score (as in :meth:`similarity_search_with_score`)."""
        _no_extra(kwargs, "similarity_search_by_vector")
        hits = self.memory.search_vector(_unit(embedding), user=self.user, k=k, filters=_filters(filter))
        return [(_document(hit.memory), float(hit.score)) for hit in hits]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """LangChain's relevance convention, [0, 1] with 1 the most relevant: for a cosine-ranked
        memory the cosine clipped at 0 (LangChain's own cosine relevance, ``1 - distance``, is the
        cosine; clipped so that it stays in [0, 1]), so an unrelated memory scores near 0, not the
        0.5 and more of ``(1 + cosine) / 2``; with a pack, the sigmoid of its learned score (a
        logistic regression's logit, so the result is its probability that the memory is evidence); with
        hybrid search (``memory.hybrid``, :mod:`memnets.memory.hybrid`) the fused score, in [0, 1] already."""
        if self.memory.scorer is None or self.memory.hybrid:
            return _cosine_relevance
        return _sigmoid

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Mapping[str, Any] | MemoryFilter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """``k`` documents picked by maximal marginal relevance (:func:`memnets.memory.mmr.mmr`) among
        the ``fetch_k`` best for ``query``: relevant and unlike each other (``lambda_mult`` 1 is plain
        top-k, 0 the most diverse)."""
        _no_extra(kwargs, "max_marginal_relevance_search")
        _check_mmr(k, fetch_k, lambda_mult)
        hits = self.memory.search(query, user=self.user, k=fetch_k, filters=_filters(filter))
        return self._mmr(hits, k, lambda_mult, query)

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Mapping[str, Any] | MemoryFilter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """:meth:`max_marginal_relevance_search` for a query embedding."""
        _no_extra(kwargs, "max_marginal_relevance_search_by_vector")
        _check_mmr(k, fetch_k, lambda_mult)
        vector = _unit(embedding)
        hits = self.memory.search_vector(vector, user=self.user, k=fetch_k, filters=_filters(filter))
        return self._mmr(hits, k, lambda_mult, vector)

    def _mmr(self, hits, k: int, lambda_mult: float, query: str | np.ndarray) -> list[Document]:
        """MMR over search hits: relevance is the cosine, or a pack's scores min-max scaled to [0, 1]
        (as the memory manager picks its view), redundancy the cosine between the memories' vectors. A memory
        whose successor is among the hits, or the likely replacement a search reads for ``query`` (its text or
        vector), is no candidate, and comes after it where places are left
        (:func:`~memnets.memory.mmr.mmr_current_first`), so k come back whenever k were found."""
        if not hits:
            return []
        vectors = self.memory.store.vectors([hit.memory.id for hit in hits], self.user)
        scores = np.asarray([hit.score for hit in hits], dtype=np.float64)
        relevance = scores if self.memory.scorer is None else min_max(scores)
        memories = [hit.memory for hit in hits]
        links = self._links(memories, vectors, scores, query)
        picked = mmr_current_first(memories, vectors, relevance, scores, k, lambda_=lambda_mult, links=links)
        return [_document(hits[n].memory) for n in picked]

    def _links(self, memories: list[Memory], vectors: np.ndarray, scores: np.ndarray, query) -> dict[str, str]:
        """The likely replacements the memory's judge reads among the hits for ``query``, as its search read them
        (:meth:`~memnets.memory.supersession.Supersession.ranked_links`); none where it reads none."""
        step = self.memory.supersession
        if step is None or step.query_threshold is None:
            return {}
        vector = embed(self.memory.encoder, [query], kind="query")[0] if isinstance(query, str) else query
        return step.ranked_links(memories, vectors, scores, vector)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict] | None = None,
        *,
        ids: list[str] | None = None,
        location: str | None = None,
        user: str = "default",
        **open_options: Any,
    ) -> MemnetsVectorStore:
        """Open the memory at ``location`` with ``embedding`` as its encoder and add ``texts`` for ``user``.

        ``embedding`` may be :class:`MemnetsEmbeddings` (its memnets encoder is used as is) or any
        LangChain Embeddings; ``open_options`` (``pack``, ``key``, ...) go to ``memnets.open``.
        """
        import memnets

        if location is None:
            raise ValueError("MemnetsVectorStore.from_texts: location (a folder or a postgresql:// URL) is required")
        memory = memnets.open(location, encoder=as_encoder(embedding), **open_options)
        store = cls(memory, user)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    # ------------------------------------------------------------------ helpers
    def _get(self, ids: Iterable[str]) -> list:
        """The current memories with these ids (older versions, stored as ``id~n``, are no documents)."""
        found = (self.memory.get(id_, user=self.user) for id_ in ids)
        return [memory for memory in found if memory is not None and memory.superseded_by is None]


def _no_extra(kwargs: Mapping[str, Any], method: str) -> None:
    """Refuse search options this store does not know, rather than ignore them."""
    if kwargs:
        raise TypeError(f"MemnetsVectorStore.{method}: unknown arguments {sorted(kwargs)}")


def _unit(embedding: Sequence[float]) -> np.ndarray:
    """An embedding as a unit float32 row (memnets ranks by inner product of unit vectors)."""
    vector = np.asarray(embedding, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vector))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError("embedding must be a non-zero vector of finite numbers")
    return vector / norm


def _check_mmr(k: int, fetch_k: int, lambda_mult: float) -> None:
    if not isinstance(k, int) or not isinstance(fetch_k, int) or k < 1 or fetch_k < k:
        raise ValueError(f"max_marginal_relevance_search: need 1 <= k <= fetch_k, got k={k!r}, fetch_k={fetch_k!r}")
    if not 0.0 <= lambda_mult <= 1.0:
        raise ValueError(f"max_marginal_relevance_search: lambda_mult must lie in [0, 1], got {lambda_mult!r}")


def _cosine_relevance(score: float) -> float:
    return max(score, 0.0)


def _sigmoid(score: float) -> float:
    return 1.0 / (1.0 + math.exp(-score)) if score >= 0 else math.exp(score) / (1.0 + math.exp(score))
