"""memnets: trainable memory components for LLM agents.

A contrastively trained memory encoder, an importance head and a recall-gate head, exported into
one pack that a FAISS retriever and a hierarchical memory manager load in place of the
hand-set scores of Generative Agents and MemGPT.

The public API is importable from here (``memnets.open``, ``memnets.Memory``, ...). Each name is
imported from its module on first use, so ``import memnets`` stays light (no torch) and the
submodules import without cycles. A new public name is one line in ``_EXPORTS`` and one in the
``TYPE_CHECKING`` block below, which shows type checkers and IDEs the same names (a test keeps the
two equal); that block never runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memnets.agent import Agent
    from memnets.api import AgentMemory, SearchHit, open, reembed
    from memnets.llm import LLM, LLMError
    from memnets.memory.manager import ManagerConfig, MemoryManager
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.heads import ImportanceHead, RecallGateHead
    from memnets.pack import Pack, export_pack, load_pack
    from memnets.protocols import TextEncoder
    from memnets.records import Memory
    from memnets.retrieval.faiss_retriever import FaissRetriever
    from memnets.scoring import HeuristicScorer, LearnedScorer, Scorer, ScorerWeights
    from memnets.server.client import Client
    from memnets.store import (
        ArchiveError,
        InvalidMemoryError,
        MemoryFilter,
        MemoryStore,
        StoreCorruptError,
        StoreError,
        StoreFormatError,
        StoreIntegrityError,
        StoreKeyError,
        StoreReadOnlyError,
        StoreUnavailableError,
        open_store,
    )
    from memnets.store.archive import Archive
    from memnets.store.identity import EncoderMismatchError

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # one memory for many users
    "open": "memnets.api",
    "reembed": "memnets.api",
    "AgentMemory": "memnets.api",
    "SearchHit": "memnets.api",
    "Memory": "memnets.records",
    "Client": "memnets.server.client",  # the same methods as AgentMemory, on a memnets server
    # trained components and their pack
    "TextEncoder": "memnets.protocols",
    "MemoryEncoder": "memnets.nn.encoder",
    "ImportanceHead": "memnets.nn.heads",
    "RecallGateHead": "memnets.nn.heads",
    "Pack": "memnets.pack",
    "load_pack": "memnets.pack",
    "export_pack": "memnets.pack",
    # scoring and retrieval
    "Scorer": "memnets.scoring",
    "ScorerWeights": "memnets.scoring",
    "HeuristicScorer": "memnets.scoring",
    "LearnedScorer": "memnets.scoring",
    "FaissRetriever": "memnets.retrieval.faiss_retriever",
    # stores and the memory manager
    "MemoryStore": "memnets.store",
    "MemoryFilter": "memnets.store",
    "open_store": "memnets.store",
    "Archive": "memnets.store.archive",
    "StoreError": "memnets.store",
    "StoreFormatError": "memnets.store",
    "StoreKeyError": "memnets.store",
    "StoreIntegrityError": "memnets.store",
    "StoreCorruptError": "memnets.store",
    "StoreReadOnlyError": "memnets.store",
    "StoreUnavailableError": "memnets.store",
    "InvalidMemoryError": "memnets.store",
    "ArchiveError": "memnets.store",
    "EncoderMismatchError": "memnets.store.identity",
    "MemoryManager": "memnets.memory.manager",
    "ManagerConfig": "memnets.memory.manager",
    # the agent loop
    "Agent": "memnets.agent",
    "LLM": "memnets.llm",
    "LLMError": "memnets.llm",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memnets' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
