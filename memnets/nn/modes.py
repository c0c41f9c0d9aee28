"""Eval mode for one inference call, without paying for it on every call.

``Module.eval()`` and ``Module.train(mode)`` rewrite the ``training`` flag of every submodule
each time: for MiniLM's 120-odd modules that is about 3 ms on a 2-core machine, and the encoder's
``encode`` did it twice per call, so one agent query (a batch of one) paid 6 ms for mode flags,
more than its FAISS search, store read and scoring together (docs/benchmarks.md, "One query end
to end"). An encoder or head loaded for inference is already in eval mode everywhere;
:func:`evaluating` then only walks the tree once and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def evaluating(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``module`` in eval mode inside the block, its previous mode restored after it (as
    ``was = m.training; m.eval(); ...; m.train(was)``), switching nothing when no submodule is in
    training mode."""
    switch = any(part.training for part in module.modules())
    was_training = module.training
    if switch:
        module.eval()
    try:
        yield module
    finally:
        if switch:
            module.train(was_training)
