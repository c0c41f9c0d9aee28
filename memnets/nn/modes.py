"""Eval mode and one thread for inference calls, without paying for either on every call.

``Module.eval()`` and ``Module.train(mode)`` rewrite the ``training`` flag of every submodule
each time: for MiniLM's 120-odd modules that is about 3 ms on a 2-core machine, and the encoder's
``encode`` did it twice per call, so one agent query (a batch of one) paid 6 ms for mode flags,
more than its FAISS search, store read and scoring together (docs/history.md, "One query end
to end"). An encoder or head loaded for inference is already in eval mode everywhere;
:func:`evaluating` then only walks the tree once and writes nothing.

The recall gate and the supersession head are small MLPs run on a few dozen rows per call, where a
second intra-op thread only adds waiting: :func:`single_threaded` (the importance head, run on
every search's candidates, computes in numpy instead: :mod:`memnets.nn.numpy_mlp`).
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


@contextmanager
def single_threaded() -> Iterator[None]:
    """torch's ops in the block run on one intra-op thread; the calling thread's count is restored after.

    For the heads' MLPs (a 391 x 64 layer on the 15 candidates of a query): with two threads every
    op waits for an OpenMP team on a second core, so the importance head's forward took 1.3-2.7 ms
    per query at load 2-4 and 16 ms with a benchmark on both cores, against 0.08 ms on one thread
    (docs/history.md, "One query end to end"; it now computes in numpy). With torch's OpenMP
    backend (its Linux, macOS and Windows wheels) the setting belongs to the calling thread, so
    other threads' calls, an encoder's batch among them, keep their count.
    """
    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
