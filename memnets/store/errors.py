"""Errors of the memory store, so callers can tell bad input from a broken or foreign archive."""

from __future__ import annotations


class ArchiveError(Exception):
    """Base class of every error the archive raises on purpose."""


class ArchiveFormatError(ArchiveError):
    """The archive on disk was written by another (usually newer) format, or for another dim."""


class ArchiveKeyError(ArchiveError):
    """The encryption key is missing, wrong, or given for an archive created without one."""


class ArchiveIntegrityError(ArchiveError):
    """A stored row failed authentication (tampered, swapped between rows, or corrupted)."""


class InvalidMemoryError(ArchiveError, ValueError):
    """A memory or vector handed to the archive is unusable (empty text, NaN vector, bad Unicode...)."""
