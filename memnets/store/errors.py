"""Errors of the memory stores, so callers can tell bad input from a broken, foreign or unreachable store.

The names are store-neutral (the embedded Archive and the PostgreSQL store raise the same ones).
The ``Archive*`` names of earlier releases are aliases of the same classes, so ``except
ArchiveError`` keeps catching every store's errors.
"""

from __future__ import annotations

from memnets.argerrors import NamedArgument


class StoreError(Exception):
    """Base class of every error a store raises on purpose."""


class StoreFormatError(StoreError):
    """The store was written by another (usually newer) format, or for another dim, or is not a memnets store."""


class StoreKeyError(StoreError):
    """The encryption key is missing, wrong, or given for a store created without one."""


class StoreIntegrityError(StoreError):
    """A stored row failed authentication (tampered, swapped between rows, or corrupted)."""


class StoreCorruptError(StoreError):
    """The store's files are damaged (a failed SQLite integrity check, a malformed page); restore a backup."""


class StoreReadOnlyError(StoreError):
    """The store cannot be written (a read-only folder, file or mount); nothing was changed."""


class StoreUnavailableError(StoreError):
    """The database server cannot be reached or went away mid-call (stopped, restarted, network down)."""


class StoreNotFoundError(StoreError, ValueError):
    """No store at the location, which was opened to read an existing one (``dim=None``); nothing was created."""


class InvalidMemoryError(NamedArgument, StoreError, ValueError):
    """A memory or vector handed to the store is unusable (empty text, NaN vector, bad Unicode...);
    ``field`` names the argument when one is to blame."""


# the names of earlier releases, kept so that old code keeps working (same classes, not subclasses)
ArchiveError = StoreError
ArchiveFormatError = StoreFormatError
ArchiveKeyError = StoreKeyError
ArchiveIntegrityError = StoreIntegrityError

__all__ = [
    "ArchiveError",
    "ArchiveFormatError",
    "ArchiveIntegrityError",
    "ArchiveKeyError",
    "InvalidMemoryError",
    "StoreCorruptError",
    "StoreError",
    "StoreFormatError",
    "StoreIntegrityError",
    "StoreKeyError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
]
