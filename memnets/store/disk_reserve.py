"""Room kept on disk so that a deletion still works when the disk is full.

A deletion writes before it frees: SQLite appends the changed pages to its write-ahead log, and
only the checkpoint after the commit gives the space back; that checkpoint may itself grow the
database file by the pages the log still holds (up to SQLite's auto-checkpoint of 1,000 pages).
On a full disk those writes fail, and an erasure the user asked for cannot be honoured. So the
archive keeps a file of :data:`RESERVE_BYTES` (really allocated, not sparse) in its folder; a
deletion that fails with "disk full" deletes the reserve, checkpoints, and runs again, and the
reserve is put back, as far as the disk allows, once the deletion's checkpoint has returned the
freed pages. A deletion whose log outgrows the reserve (many thousands of rows at once on a disk
with nothing else free) can still fail: delete in smaller calls then.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

RESERVE_FILE = "disk_reserve"
# 4 MiB for the checkpoint (1,000 log pages of 4 KiB folded into the file) + 4 MiB of the deletion's own log
RESERVE_BYTES = 8 << 20
_SMALLEST = 256 << 10  # on a nearly full disk, a smaller reserve than none
log = logging.getLogger(__name__)


def disk_full(error: BaseException) -> bool:
    """Whether ``error`` is a write that found no room: SQLite's SQLITE_FULL ("database or disk is full")
    or a file write's ENOSPC. What the deletion's retry below and the server's 507 both recognise."""
    if isinstance(error, OSError):
        return error.errno == errno.ENOSPC
    return getattr(error, "sqlite_errorname", None) == "SQLITE_FULL"


class DiskReserve:
    """The reserve file of the archive in ``directory``."""

    def __init__(self, directory: Path, size: int = RESERVE_BYTES) -> None:
        self.path = directory / RESERVE_FILE
        self.size = size

    def ensure(self) -> bool:
        """Create the reserve if it is missing, as large as the disk allows up to ``size``; False if no room at all
        (or ``size`` is 0: then a reserve left by an earlier open is removed)."""
        if self.size == 0:
            self.path.unlink(missing_ok=True)
            return False
        if self.path.is_file() and self.path.stat().st_size >= self.size:
            return True
        size = self.size
        while size >= min(_SMALLEST, self.size):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
                try:
                    os.posix_fallocate(fd, 0, size)  # blocks really allocated, so that freeing them frees space
                finally:
                    os.close(fd)
                return True
            except OSError as error:
                self.path.unlink(missing_ok=True)
                if error.errno != errno.ENOSPC:
                    log.warning("%s: could not reserve space for deletions on a full disk (%s)", self.path, error)
                    return False
                size //= 2
        log.warning("%s: no room on the disk to reserve for deletions", self.path)
        return False

    def release(self) -> bool:
        """Delete the reserve to make room; False when there was none to delete."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        log.warning("%s: disk full; released the reserve so that a deletion can run", self.path)
        return True
