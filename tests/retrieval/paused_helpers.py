"""A FAISS retriever whose background rebuilds wait to be let go: tests/retrieval/test_faiss_retriever.py and
tests/retrieval/test_faiss_retriever_lifecycle.py run adds, removes or a close while a rebuild is certainly in flight."""

from __future__ import annotations

import threading

from memnets.retrieval.faiss_retriever import FaissRetriever


class PausedBuild(FaissRetriever):
    """A retriever whose background rebuilds set ``started`` and wait for ``go`` before their build."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.started, self.go = threading.Event(), threading.Event()

    def _build(self, kind, vectors, labels):
        if threading.current_thread().name.startswith("faiss-upkeep"):
            self.started.set()
            assert self.go.wait(60)
        return super()._build(kind, vectors, labels)
