"""The write transaction of :meth:`~memnets.store.core.SqlStore.atomic_write`, as an object the store hands around.

``atomic_write(owner)`` makes the store calls of the thread that opened it one transaction (the public
contract, :class:`~memnets.store.protocol.AtomicWrites`): a write path's near-match search and the write it
decides. What that block needs is state of its own: the connection the engine holds for it (PostgreSQL's
pooled one; the archive has one connection, held under its lock) and what the writes inside it do once it
commits (index sync, scrubbing), which must wait for the commit and be dropped on a rollback. That state is
a :class:`WriteTransaction`, made by ``atomic_write``, yielded to the block and handed to the engine's
transaction; :class:`OpenWrites` says which one a store call of a thread joins. The calls join by their
thread because the contract names the thread (the block's callers call the store itself, not the object);
the map is opened and closed by ``atomic_write`` alone, no thread-local.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class WriteTransaction:
    """One open ``atomic_write``: the engine's connection for it (None where the engine keeps none) and the
    steps that run once it committed, in order."""

    conn: object | None = None
    after_commit: list[Callable[[], None]] = field(default_factory=list)


class OpenWrites:
    """The open write transactions of one store, by the thread whose calls join them."""

    def __init__(self) -> None:
        self._by_thread: dict[int, WriteTransaction] = {}

    def current(self) -> WriteTransaction | None:
        """The transaction the calling thread's store calls join (None outside ``atomic_write``)."""
        return self._by_thread.get(threading.get_ident())

    @contextmanager
    def opened(self) -> Iterator[WriteTransaction]:
        """A new transaction that the calling thread's store calls join until the block ends."""
        thread, held = threading.get_ident(), WriteTransaction()
        self._by_thread[thread] = held
        try:
            yield held
        finally:
            del self._by_thread[thread]

    def after(self, step: Callable[[], None]) -> None:
        """Run ``step`` (what follows a committed write) now, or, inside the calling thread's open
        transaction, once it commits."""
        held = self.current()
        if held is None:
            step()
        else:
            held.after_commit.append(step)
