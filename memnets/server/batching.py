"""Batched encoding for a server: texts of requests that arrive together go through one forward pass.

:class:`BatchingEncoder` wraps a :class:`~memnets.protocols.TextEncoder` and is one itself, so it
replaces ``AgentMemory.encoder`` without the memory API knowing: request threads call
``encode(texts, kind)`` as before and block; one background thread takes the first waiting call,
gathers the calls that may share its pass (up to ``max_batch`` texts), runs the wrapped encoder once
on all their texts and hands each caller its rows. Calls share a pass when they have the same
``kind``, or whatever their kinds when the wrapped encoder has a ``plain_kind`` (the kind it embeds
as given, the other differing only by a prefix: :attr:`memnets.nn.encoder.MemoryEncoder.plain_kind`):
then texts of the other kind go in with their prefix under the plain kind, so searches and adds
share passes instead of alternating (a pass of ~8 adds after each pass of ~30 searches at 50
clients). When the first call found the encoder idle, the batch waits at most ``max_wait_s`` for
company (a call alone: a bounded delay); when calls queued while the last forward pass ran, the next
pass starts at once with them. Under load the forward
passes carry many requests each, so throughput is far above one pass per request
(bench/experiments/load.py measures both).

With ``batch=False`` (the server's ``--no-batching``) every call encodes alone in its own thread,
one forward pass per call: the server wraps its encoder either way (its metrics count the passes).
"""

from __future__ import annotations

import ctypes
import logging
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

logger = logging.getLogger(__name__)

DEFAULT_MAX_WAIT_S = 0.005  # one encode of a short text with MiniLM on a CPU core takes ~5-10 ms
DEFAULT_MAX_BATCH = 64
ENCODER_THREAD = "memnets-encode"  # the batching thread's name, its OpenMP threads' too (see name_os_thread)
PR_SET_NAME = 15  # prctl(2): name the calling thread


@dataclass
class _Call:
    texts: list[str]
    kind: str
    done: threading.Event = field(default_factory=threading.Event)
    vectors: np.ndarray | None = None
    error: BaseException | None = None


class BatchingEncoder:
    """A TextEncoder that coalesces concurrent ``encode`` calls into batched calls of ``encoder``.

    Args:
        encoder: the encoder to batch (``encode(texts, kind=...)``, ``dim``, ``tokenizer``).
        max_wait_s: how long a batch whose first call found the encoder idle waits for others (0: take
            only what is queued); a batch of calls that queued during the last pass never waits.
        max_batch: the most texts in one forward pass (a single larger call still goes alone).
        on_batch: called with the number of texts of every forward pass, whether it waited ``max_wait_s``
            for them and the pass's seconds (the server's metrics: batch sizes and the encoder's busy time).
        batch: False: no batching (each call encodes alone, in its caller's thread; no background thread).
    """

    def __init__(
        self,
        encoder,
        *,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        max_batch: int = DEFAULT_MAX_BATCH,
        on_batch: Callable[[int, bool, float], None] | None = None,
        batch: bool = True,
    ) -> None:
        if isinstance(max_wait_s, bool) or not isinstance(max_wait_s, (int, float)) or not 0 <= max_wait_s <= 1:
            raise ValueError(f"BatchingEncoder: max_wait_s must be a number of seconds in [0, 1], got {max_wait_s!r}")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"BatchingEncoder: max_batch must be an int >= 1, got {max_batch!r}")
        self.encoder = encoder
        self.dim = encoder.dim
        self.tokenizer = getattr(encoder, "tokenizer", None)
        self.plain_kind = getattr(encoder, "plain_kind", None)  # set: every kind shares a pass (see the module)
        self.max_wait_s = float(max_wait_s)
        self.max_batch = max_batch
        self.on_batch = on_batch
        self.batch = bool(batch)
        self._queue: queue.Queue[_Call | None] = queue.Queue()
        self._thread = None
        if self.batch:
            self._thread = threading.Thread(target=self._run, name=ENCODER_THREAD, daemon=True)
            self._thread.start()

    def __getattr__(self, name):  # fingerprint, model, ... of the wrapped encoder
        if name == "encoder":
            raise AttributeError(name)
        return getattr(self.encoder, name)

    def encode(self, texts: Sequence[str], kind: str = "memory", **kwargs):
        """[len(texts), dim] unit rows (of the wrapped encoder's type: a tensor or an array), computed in a
        forward pass shared with concurrent callers."""
        texts = list(texts)
        if kwargs or not texts or not self.batch:  # options a batch cannot share, or no batching: encode alone
            started = time.perf_counter()
            vectors = self.encoder.encode(texts, kind=kind, **kwargs)
            if texts:
                self._observe(len(texts), False, time.perf_counter() - started)
        else:
            call = _Call(texts, kind)
            self._queue.put(call)
            call.done.wait()
            if call.error is not None:
                raise call.error
            vectors = call.vectors
        return vectors

    def close(self) -> None:
        """Stop the batching thread (calls already queued are served first)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)

    def _run(self) -> None:
        # Calls taken while filling a batch they do not join (another kind, too many texts), oldest
        # first, and the stop mark: they are served before anything newer. A batch skips over calls
        # of the other kind instead of ending at the first one: with searches (queries) and adds
        # (memories) interleaved, ending there made the mean batch the mean run of one kind (~3 at
        # 20% adds, whatever the concurrency).
        name_os_thread(ENCODER_THREAD)
        pending: deque[_Call | None] = deque()
        while True:
            # Calls already waiting (queued while the last forward pass ran) start the next pass at once;
            # only a first call that found the encoder idle waits max_wait_s for company. Waiting with
            # calls queued left the encoder idle ~7% of the time at 50 clients.
            waiting = bool(pending) or not self._queue.empty()
            first = pending.popleft() if pending else self._queue.get()
            if first is None:
                if not pending:
                    return
                pending.append(None)  # serve the calls set aside before stopping
                continue
            batch, size = [first], len(first.texts)
            for call in [call for call in pending if self._joins(call, first, 0)]:
                if not self._joins(call, first, size):
                    break
                pending.remove(call)
                batch.append(call)
                size += len(call.texts)
            deadline = time.monotonic() + (0.0 if waiting else self.max_wait_s)
            while size < self.max_batch:
                try:
                    nxt = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if self._joins(nxt, first, size):
                    batch.append(nxt)
                    size += len(nxt.texts)
                else:
                    pending.append(nxt)
            self._encode(batch, size, waited=not waiting and self.max_wait_s > 0)

    def _joins(self, call: _Call | None, first: _Call, size: int) -> bool:
        """Whether ``call`` may join the batch of ``first`` that holds ``size`` texts so far."""
        if call is None or size + len(call.texts) > self.max_batch:
            return False
        return call.kind == first.kind or self.plain_kind is not None

    def _encode(self, batch: list[_Call], size: int, waited: bool) -> None:
        kind = batch[0].kind
        if any(call.kind != kind for call in batch):  # kinds share the pass under the plain kind
            kind = self.plain_kind
            texts = [self.encoder.prefix(call.kind) + text for call in batch for text in call.texts]
        else:
            texts = [text for call in batch for text in call.texts]
        started = time.perf_counter()
        try:
            vectors = self.encoder.encode(texts, kind=kind)
        except BaseException as error:  # each caller gets the error of its batch
            for call in batch:
                call.error = error
                call.done.set()
            return
        self._observe(size, waited, time.perf_counter() - started)
        start = 0
        for call in batch:
            call.vectors = vectors[start : start + len(call.texts)]
            start += len(call.texts)
            call.done.set()

    def _observe(self, size: int, waited: bool, seconds: float) -> None:
        if self.on_batch is not None:
            try:
                self.on_batch(size, waited, seconds)
            except Exception:  # metrics must never fail an encode
                logger.exception("BatchingEncoder: on_batch failed")


def name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` in the operating system too (Linux: /proc, top -H, py-spy), not
    only in Python. The OpenMP threads torch starts from this thread for its passes inherit the name, so
    the encoder's CPU is told apart from the request threads' (bench/experiments/load.py splits a server's
    CPU by it). Elsewhere, or if the call fails, the thread keeps its name: nothing depends on it."""
    if sys.platform != "linux":
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        logger.debug("BatchingEncoder: could not name the encoder's thread", exc_info=True)
