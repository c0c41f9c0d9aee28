"""The contracts that cross module boundaries, in one light module (typing only, no torch import).

:class:`TextEncoder` is what every part that embeds text takes: the scorers, the memory manager and
AgentMemory, the rankers, the embedding caches. A :class:`~memnets.nn.encoder.MemoryEncoder` is one;
so is a :class:`~memnets.nn.embedding_cache.CachedEncoder`, or an adapter around another model.
The other contracts live next to the code that defines them: ``Scorer`` in :mod:`memnets.scoring`,
``Ranker`` in :mod:`memnets.training.retrieval.rankers`, ``MemoryStore`` in :mod:`memnets.store.protocol`,
``Importance`` and ``Gate`` in :mod:`memnets.memory.signals`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

Kind = Literal["memory", "query"]


@runtime_checkable
class TextEncoder(Protocol):
    """Texts -> unit vectors.

    ``encode(texts, kind)`` returns a CPU float32 tensor ``[len(texts), dim]`` of L2-normalised rows,
    in input order; ``kind`` is "memory" for what is stored and "query" for what is searched with
    (an encoder may prefix them differently). ``tokenizer`` (a Hugging Face tokenizer) counts tokens
    for the context budget. ``fingerprint`` names what the vectors mean (weights, configuration, dim
    and variant): a store records the fingerprint of the encoder that filled it and refuses another
    (vectors of two encoders live in different spaces); ``memnets archive reembed`` moves a store to
    a new encoder.
    """

    dim: int
    tokenizer: Any
    fingerprint: str

    def encode(self, texts: Sequence[str], kind: Kind = "memory", **kwargs: Any) -> torch.Tensor: ...
