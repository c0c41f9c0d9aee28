"""What one app holds: the memory once it is open, the batching encoder it was opened with, this
process's managers, the tokens, the metrics and the pack's manifest as read at load.

The memory is opened by ``opener(wrap)`` in a background thread (so ``/healthz`` answers at once):
``wrap`` turns the encoder the memory is about to be opened with into the server's
:class:`~memnets.server.batching.BatchingEncoder`, so that the memory's writes, searches and
managers all encode through it from the start; nothing is swapped into the memory afterwards.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from memnets.server.auth import Tokens
from memnets.server.batching import BatchingEncoder
from memnets.server.metrics import ServerMetrics

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 2  # what a 503 tells the client to wait
THREADS = 64  # worker threads for memory calls (the 50-client benchmark keeps them busy)


class ServerError(Exception):
    """An error the server answers with its own code (not one of the API's exceptions)."""

    def __init__(self, code: str, message: str, field: str | None = None, headers: dict | None = None) -> None:
        super().__init__(message)
        self.code, self.field, self.headers = code, field, headers or {}


class ServerState:
    """The memory of one app and what serves it (see the module docstring)."""

    def __init__(self, opener: Callable[..., Any], tokens: Tokens, *, batching: bool, max_wait_s: float, pack) -> None:
        self.tokens = tokens
        self.metrics = ServerMetrics()
        self.memory = None
        self.encoder: BatchingEncoder | None = None
        self.manifest: dict | None = None
        self.load_error: str | None = None
        self.batching = batching
        self.max_wait_s = max_wait_s
        self.pack = pack
        self.managers: dict[str, Any] = {}
        self._managers_lock = threading.Lock()
        self._opener = opener
        self.limiter = anyio.CapacityLimiter(THREADS)

    def load(self) -> None:
        """Open the memory through the batching encoder and read the pack's manifest once; on failure
        keep the reason for /readyz."""
        try:
            self.manifest = pack_manifest(self.pack)
            self.memory = self._opener(self._wrap)
            freeze_loaded_objects()
            logger.info("memnets server: memory open (%r)", self.memory)
        except Exception as error:  # reported by /readyz and every route
            self.load_error = f"{type(error).__name__}: {error}"
            logger.exception("memnets server: cannot open the memory")

    def _wrap(self, encoder) -> BatchingEncoder:
        """The server's encoder around ``encoder`` (the opener's; a MemoryEncoder on the torch backend with
        its passes traced, :meth:`memnets.nn.encoder.MemoryEncoder.trace_for_serving`), kept to be closed
        at shutdown. Any other TextEncoder is wrapped as it is."""
        getattr(encoder, "trace_for_serving", lambda: None)()
        self.encoder = BatchingEncoder(
            encoder, max_wait_s=self.max_wait_s, on_batch=self.metrics.encoded, batch=self.batching
        )
        return self.encoder

    def require(self):
        """The open memory; ServerError("not_ready") while it loads or when it could not be opened."""
        if self.memory is None:
            message = self.load_error or "the memory is still loading (the encoder and the store)"
            raise ServerError("not_ready", message, headers={"Retry-After": str(RETRY_AFTER_S)})
        return self.memory

    async def call(self, function, *args, **kwargs):
        """``function(*args, **kwargs)`` in a worker thread (the event loop never waits on the model or the database)."""
        return await anyio.to_thread.run_sync(partial(function, *args, **kwargs), limiter=self.limiter)

    def manager(self, user: str):
        """This process's manager of ``user`` (tiers in memory, every kept observation written through)."""
        memory = self.require()
        with self._managers_lock:
            manager = self.managers.get(user)
            if manager is None or manager.closed:
                manager = memory.manager(user, state_path=None, resume=False, write_through_threshold=0.0)
                self.managers[user] = manager
            return manager

    def drop_manager(self, user: str):
        """Forget this process's manager of ``user`` (its memories were deleted); returns it to be closed, or None."""
        with self._managers_lock:
            return self.managers.pop(user, None)

    def close(self) -> None:
        if self.memory is not None:
            for manager in self.managers.values():
                manager.close()
            self.memory.close()
        if self.encoder is not None:
            self.encoder.close()


def freeze_loaded_objects() -> None:
    """Move every object alive now (the encoder's modules and tensors, the tokenizer, the store's
    indexes: ~440k objects with MiniLM) to the garbage collector's permanent generation, which its
    collections never scan. They live as long as the server; without this, each full collection of a
    serving process walked them all (~240 ms holding the GIL, twice in 20 s at 50 clients), stalling
    the event loop, every request thread and the encoder's next pass alike."""
    gc.collect()
    gc.freeze()


def pack_manifest(pack) -> dict | None:
    """The manifest of ``pack`` (a loaded Pack, or its folder, whose manifest.json is read here once,
    refusing a link), or None without a pack. The server answers this copy: nothing it answers is
    read from disk after load."""
    if pack is None:
        return None
    manifest = getattr(pack, "manifest", None)
    if manifest is not None:
        return manifest
    from memnets.pack import MANIFEST
    from memnets.safefiles import read_regular

    return json.loads(read_regular(Path(pack), MANIFEST))
