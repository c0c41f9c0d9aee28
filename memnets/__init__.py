"""memnets: trainable memory components for LLM agents.

A contrastively trained memory encoder, an importance scorer and a recall gate, exported into
one pack that a FAISS retriever and a hierarchical memory manager load in place of the
hand-set scores of Generative Agents and MemGPT.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``memnets.open``, ``memnets.AgentMemory`` and ``memnets.SearchHit``, imported on first use
    (so ``import memnets`` stays light and the submodules import without cycles)."""
    if name in ("open", "AgentMemory", "SearchHit"):
        from memnets import api

        return getattr(api, name)
    raise AttributeError(f"module 'memnets' has no attribute {name!r}")
