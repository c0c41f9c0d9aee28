"""Which encoder and judge class serves a folder: torch's, or the torch-free ONNX Runtime ones.

``memnets.open``, the server and the CLI load an encoder folder (or the bundled backbone) and the
shipped change judge here. The backends of :data:`~memnets.nn.serving_encoder.SERVING_BACKENDS`
(``"onnx"``, the int8 ones, and ``"auto"`` where torch is not installed) run on
:class:`~memnets.nn.serving_encoder.ServingEncoder` and never import torch; ``"torch"`` and the GPU
backends run on :class:`~memnets.nn.encoder.MemoryEncoder`. With no backend named, the default is
``"torch"`` where torch is installed (the encoder that filled the stores made so far) and ``"onnx"``
where it is not (the core install: ``pip install memnets`` without the ``train`` extra).
"""

from __future__ import annotations

import importlib.util
import os


def torch_installed() -> bool:
    """Whether ``import torch`` can succeed here, found without importing it."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a finder that refuses torch (the tests' blocker) counts as absent
        return False


def default_backend() -> str:
    """``"torch"`` where torch is installed, else ``"onnx"`` (see the module)."""
    return "torch" if torch_installed() else "onnx"


def serves(backend: str) -> bool:
    """Whether ``backend`` runs on the serving classes (ServingEncoder, a pack's numpy heads), not on torch:
    the backends of :data:`~memnets.nn.serving_encoder.SERVING_BACKENDS`, ``"auto"`` only where torch is not
    installed (with torch, ``"auto"`` weighs torch's own faster backends)."""
    from memnets.nn.serving_encoder import SERVING_BACKENDS

    return backend in SERVING_BACKENDS and not (backend == "auto" and torch_installed())


def load_encoder(path: str | os.PathLike | None = None, backend: str | None = None):
    """The encoder of folder or backbone name ``path`` (None: the bundled all-MiniLM-L6-v2) on ``backend``
    (None: :func:`default_backend`): a ServingEncoder where the backend :func:`serves`, else a MemoryEncoder
    (whose import, without torch, raises an ImportError naming the ``train`` extra)."""
    backend = backend or default_backend()
    args = [path] if path is not None else []
    if serves(backend):
        from memnets.nn.serving_encoder import ServingEncoder

        return ServingEncoder.from_pretrained(*args, backend=backend)
    from memnets.extras import needs_extra

    with needs_extra(f"the encoder backend {backend!r} (torch)", "train"):
        from memnets.nn.encoder import MemoryEncoder
    return MemoryEncoder.from_pretrained(*args, backend=backend)


def load_default_judge():
    """The change judge shipped with memnets, on ONNX Runtime (:class:`~memnets.nn.serving_judge.ServingJudge`,
    ``"auto"``: int8 where the CPU has VNNI, five pairs in 19.2 ms against 42.4 ms on torch, idle; else the float32
    graph, the torch judge's scores within 1e-5; docs/memory.md, "Six layers"), and no torch import, whether torch is
    installed or not."""
    from memnets.nn.serving_judge import ServingJudge

    return ServingJudge.load()


__all__ = ["default_backend", "load_default_judge", "load_encoder", "serves", "torch_installed"]
