"""Who may write now: one memory's writes serialised per owner, and refused once the memory closed.

Every write of :mod:`memnets.memory.writes` and :mod:`memnets.memory.deletion` runs inside
:meth:`Writers.owning`, which holds an in-process lock per owner (a deletion never comes between a
write's near-match check and the write it decides) and, for a write, the store's transaction holding
those owners' write locks (:class:`~memnets.store.AtomicWrites`: the check and the write are one step for
other processes and machines too). A deletion's store calls stay transactions of their own: the
embedded store's room for a deletion on a full disk (:mod:`memnets.store.disk_reserve`) is made between
them. Nothing else serialises writes: two users' writes never wait for each other here (on the embedded
store SQLite itself has one writer at a time; PostgreSQL runs them side by side,
``bench/experiments/concurrent_writers.py``).

:meth:`Writers.close` lets the writes under way finish and refuses new ones, so a closing memory
never closes its store under a write; the count it keeps is held for an increment, not for a write.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager

from memnets.store.protocol import AtomicWrites, supports


class Writers:
    """The write serialisation of one store's writers in this process.

    Args:
        store: the store written.
        what: names the writer in the error of a write after :meth:`close` ("this {what} is closed").
    """

    def __init__(self, store, what: str = "memory"):
        self.store, self.what = store, what
        self._atomic = supports(store, AtomicWrites)
        self._locks: weakref.WeakValueDictionary[str, threading.RLock] = weakref.WeakValueDictionary()
        self._state = threading.Condition(threading.Lock())  # guards _active, _closed and _locks
        self._active = 0
        self._closed = False

    @contextmanager
    def owning(self, owners: Iterable[str], *, transaction: bool = True) -> Iterator[None]:
        """A block that writes for ``owners``: their in-process locks and, with ``transaction`` where the store
        can, one store transaction holding their write locks (both taken in sorted order); RuntimeError once
        :meth:`close` began."""
        owners = sorted(set(owners))
        with self._state:
            if self._closed:
                raise RuntimeError(f"this {self.what} is closed")
            self._active += 1
            locks = [self._lock(owner) for owner in owners]
        try:
            with ExitStack() as stack:
                for lock in locks:
                    stack.enter_context(lock)
                for owner in owners if transaction and self._atomic else ():
                    stack.enter_context(self.store.atomic_write(owner))
                yield
        finally:
            with self._state:
                self._active -= 1
                self._state.notify_all()

    def close(self) -> bool:
        """Refuse new writes and wait for those under way; False when closed already (by another call)."""
        with self._state:
            if self._closed:
                return False
            self._closed = True
            self._state.wait_for(lambda: self._active == 0)
            return True

    def _lock(self, owner: str) -> threading.RLock:
        """(Under ``_state``) the in-process lock of ``owner``, alive while a write holds it."""
        lock = self._locks.get(owner)
        if lock is None:
            lock = self._locks[owner] = threading.RLock()
        return lock


__all__ = ["Writers"]
