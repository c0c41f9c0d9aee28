"""Memory stores behind one contract: SQLite + FAISS embedded, PostgreSQL + pgvector for many machines."""

from __future__ import annotations

import inspect
import os

from memnets.store.errors import (
    ArchiveError,
    ArchiveFormatError,
    ArchiveIntegrityError,
    ArchiveKeyError,
    InvalidMemoryError,
    StoreCorruptError,
    StoreError,
    StoreFormatError,
    StoreIntegrityError,
    StoreKeyError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from memnets.store.filters import MemoryFilter
from memnets.store.protocol import (
    CAPABILITIES,
    AtomicWrites,
    Chunks,
    Compaction,
    DeletionLedger,
    EncoderBinding,
    Expiry,
    IndexRebuild,
    LexicalSearch,
    LocalState,
    MemoryStore,
    Reembedding,
    SearchVectors,
    supports,
)

__all__ = [
    "CAPABILITIES",
    "ArchiveError",
    "ArchiveFormatError",
    "ArchiveIntegrityError",
    "ArchiveKeyError",
    "AtomicWrites",
    "Chunks",
    "Compaction",
    "DeletionLedger",
    "EncoderBinding",
    "Expiry",
    "IndexRebuild",
    "InvalidMemoryError",
    "LexicalSearch",
    "LocalState",
    "MemoryFilter",
    "MemoryStore",
    "Reembedding",
    "SearchVectors",
    "StoreCorruptError",
    "StoreError",
    "StoreFormatError",
    "StoreIntegrityError",
    "StoreKeyError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "open_store",
    "store_class",
    "store_options",
    "supports",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def store_class(location: str | os.PathLike) -> type:
    """The store class that :func:`open_store` opens ``location`` with (imported on demand: psycopg is optional)."""
    if isinstance(location, str) and location.startswith(_POSTGRES_SCHEMES):
        from memnets.store.postgres import (
            PgVectorStore,  # psycopg is an optional dependency
        )

        return PgVectorStore
    if not isinstance(location, (str, os.PathLike)) or not str(location):
        raise TypeError(f"open_store: location must be a folder path or a postgresql:// URL, got {location!r}")
    from memnets.store.archive import (
        Archive,  # imported here: the archive imports memnets.store.filters
    )

    return Archive


def store_options(location: str | os.PathLike) -> set[str]:
    """The keyword options the store at ``location`` takes (``key`` and ``dim`` are :func:`open_store`'s own)."""
    parameters = inspect.signature(store_class(location).__init__).parameters
    return {name for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY} - {"key"}


def open_store(
    location: str | os.PathLike, dim: int | None, *, key: bytes | str | None = None, **options
) -> MemoryStore:
    """Open (or create) the store at ``location``.

    A ``postgresql://`` or ``postgres://`` URL opens a :class:`~memnets.store.postgres.PgVectorStore`
    (needs the ``pgvector`` extra); anything else is a folder holding an embedded
    :class:`~memnets.store.archive.Archive`. ``dim`` may be None to open an existing store with the
    dim it was created with; ``key`` turns on row encryption; ``options`` go to the store's constructor.
    """
    return store_class(location)(location, dim, key=key, **options)
