"""memnets: trainable memory components for LLM agents.

A contrastively trained memory encoder, an importance scorer and a recall gate, exported into
one pack that a FAISS retriever and a hierarchical memory manager load in place of the
hand-set scores of Generative Agents and MemGPT.
"""

__version__ = "0.1.0"
