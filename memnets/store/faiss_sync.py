"""The embedded archive's FAISS index: kept in step with the SQLite table through a change log, and saved beside it.

SQLite is the source of truth; the index (:class:`~memnets.retrieval.faiss_retriever.FaissRetriever`)
is a cache of the current rows' vectors that can always be rebuilt from the table:

- Every write that changes which vectors exist appends the touched row numbers to a ``changes``
  table in the same transaction (:meth:`FaissIndex.changing`). Its highest sequence number is the
  archive's *generation*. Before each search the in-memory index replays the changes it has not
  seen, so writes from other threads and other processes are visible and nothing half-written is
  ever indexed. The log keeps about ``CHANGELOG_KEEP`` rows; a process further behind rebuilds.
- The index is saved on ``close`` together with the generation it reflects. On open it is loaded
  only when that generation equals the database's and its size matches the table; otherwise (a
  crash after the last save, a deletion, a foreign or corrupt file) it is rebuilt from SQLite.
- Row numbers (``AUTOINCREMENT``) are never reused, so a stale index can never map an old vector
  to a different memory; every read also re-checks the owner in SQL.
- The archive owns its retriever: ``close`` closes it (:meth:`FaissIndex.close`), stopping its
  background upkeep, and a rebuild tells the retriever it replaces to stop its own.
- The saved files are authenticated before FAISS parses any of them (:mod:`memnets.store.index_files`);
  a file that fails makes the open rebuild the index and say so (``index_source == "rebuilt:untrusted"``).

:class:`FaissIndex` is an object the archive holds (``Archive._index``), made for it: it runs on the
archive's ``_reading()``, ``_lock``, statements, ``dim``, ``index_kind`` and ``_index_files``; the archive's
engine (:class:`~memnets.store.archive_search.ArchiveEngine`) searches its ``retriever`` after a ``sync()``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from memnets.progress import track
from memnets.retrieval.faiss_retriever import FaissRetriever
from memnets.store.index_files import UntrustedIndex
from memnets.store.sqlite_dialect import unpack_vector

if TYPE_CHECKING:
    from memnets.store.archive import Archive

CHANGELOG_KEEP = 100_000  # change-log rows kept for other processes to catch up; older ones force a rebuild
_REBUILD_PROGRESS_FROM = 50_000  # show a progress bar when rebuilding at least this many vectors
log = logging.getLogger(__name__)


class FaissIndex:
    """The FAISS index of ``archive`` and its change-log sync (see the module docstring)."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive  # its transactions, lock, statements, dim, index kind and index files
        self.retriever: FaissRetriever | None = None  # set by open()
        self.generation = 0  # the change-log position the in-memory index reflects
        self.saved_generation = -1  # the generation of the index files on disk (-1: none/unknown)

    def db_generation(self, conn: sqlite3.Connection) -> int:
        row = conn.execute(*self.archive._q.generation()).fetchone()
        return int(row[0]) if row else 0

    def open(self) -> str:
        """Load the saved index when it reflects the current generation, else rebuild it from SQLite;
        returns how the index came to be ("loaded", "rebuilt" or "rebuilt:untrusted")."""
        with self.archive._reading() as conn:
            generation = self.db_generation(conn)
            count = conn.execute(*self.archive._q.current_count()).fetchone()[0]
        expected = {"generation": generation, "count": count, "dim": self.archive.dim, "index": self.archive.index_kind}
        try:
            retriever = self.archive._index_files.load(expected)
        except UntrustedIndex as error:
            log.warning(
                "%s: the saved index files failed their check (%s); rebuilding the index from SQLite",
                self.archive._index_files.folder,
                error,
            )
            self.rebuild()
            return "rebuilt:untrusted"
        if retriever is not None and len(retriever) == count and retriever.dim == self.archive.dim:
            self.retriever, self.generation = retriever, generation
            self.saved_generation = generation
            self.sync()
            return "loaded"
        self.rebuild()
        return "rebuilt"

    def rebuild(self) -> None:
        """A fresh index of every vector in the table, at one consistent snapshot."""
        retriever = FaissRetriever(self.archive.dim, index=self.archive.index_kind)
        with self.archive._reading() as conn:
            generation = self.db_generation(conn)
            total = conn.execute(*self.archive._q.current_count()).fetchone()[0]
            rows = conn.execute(*self.archive._q.current_vectors())
            with track(
                total=total, desc="rebuilding memory index", unit="mem", disable=total < _REBUILD_PROGRESS_FROM
            ) as progress:
                for owner, ids, vectors in _group_by_owner(rows, self.archive.dim):
                    retriever.add(ids, vectors, owner)
                    progress.update(len(ids))
        replaced = self.retriever
        self.retriever, self.generation = retriever, generation
        if replaced is not None:
            # stop its upkeep without waiting for it (the archive's lock is held); the exit waits for it
            replaced.close(timeout=0)

    def sync(self, check_encoder: bool = True) -> None:
        """Replay the changes this process's index has not seen (its own writes and other processes'),
        first checking (``check_encoder``) that no re-embedding elsewhere moved the archive to another encoder."""
        with self.archive._lock:
            with self.archive._reading() as conn:
                generation = self.db_generation(conn)
                if generation == self.generation:
                    return
                if check_encoder:
                    self.archive._check_encoder(conn)
                meta = dict(conn.execute(*self.archive._q.index_meta()))
                if int(meta["dim"]) != self.archive.dim:
                    return  # re-embedded elsewhere to another dim: this index stays in the old space (to be reopened)
                if "pruned_through" in meta and self.generation < int(meta["pruned_through"]):
                    changed = None  # the log no longer reaches back to our position
                else:  # every changed row, with its owner and vector where it is current (else NULLs)
                    changed = conn.execute(*self.archive._q.changed(self.generation, generation)).fetchall()
            if changed is None:
                self.rebuild()
                return
            self.retriever.remove([str(row) for row, _, _ in changed], missing_ok=True)
            present = [change for change in changed if change[1] is not None]
            for owner, ids, vectors in _group_by_owner(present, self.archive.dim):
                self.retriever.add(ids, vectors, owner)
            self.generation = generation

    def changing(self, conn: sqlite3.Connection, where: str, params: Sequence) -> None:
        """Record, inside the caller's transaction, the rows matching ``where`` (about to change)."""
        conn.execute(*self.archive._q.log_changes(where, params))
        generation = self.db_generation(conn)
        oldest = conn.execute(*self.archive._q.oldest_change()).fetchone()[0]
        if oldest is not None and generation - oldest > CHANGELOG_KEEP * 3 // 2:
            cutoff = generation - CHANGELOG_KEEP
            conn.execute(*self.archive._q.prune_changes(cutoff))
            conn.execute(*self.archive._q.pruned_through(cutoff))

    def rebuild_and_save(self) -> int:
        """Rebuild the FAISS index from the SQLite table and save it; returns how many vectors it holds."""
        with self.archive._lock:
            self.rebuild()
            self.saved_generation = -1
            self.save()
            return len(self.retriever)

    def save(self) -> None:
        """Write the index and the generation it reflects, atomically replacing the previous files."""
        with self.archive._lock:
            self.sync(check_encoder=False)  # saving what this process holds is no search
            if self.saved_generation == self.generation:
                return
            with self.archive._reading() as conn:
                count = conn.execute(*self.archive._q.current_count()).fetchone()[0]
                if self.db_generation(conn) != self.generation or count != len(self.retriever):
                    return  # another process wrote meanwhile; the next open rebuilds or a later save wins
            marker = {
                "generation": self.generation,
                "count": count,
                "dim": self.archive.dim,
                "index": self.archive.index_kind,
            }
            if not self.archive._index_files.save(self.retriever, marker):
                return  # another process saved or deleted at the same moment; the next open decides
            with self.archive._reading() as conn:
                if self.db_generation(conn) != self.generation:
                    # another process wrote (maybe deleted) while we saved: these files are already
                    # stale and might hold a deleted vector, so do not leave them on disk
                    self.drop_saved()
                    return
            self.saved_generation = self.generation

    def drop_saved(self) -> None:
        """Delete the index files on disk (they hold vectors of deleted memories); the next open rebuilds."""
        self.archive._index_files.drop()
        self.saved_generation = -1

    def close(self) -> None:
        """Close the retriever (if one was made): stop its background upkeep, wait for it, free the index."""
        retriever = self.retriever
        if retriever is not None:
            retriever.close()

    def size(self) -> int:
        """How many vectors the in-memory FAISS index holds after catching up (equals the table's row count)."""
        with self.archive._lock:
            self.sync()
            return len(self.retriever)


def _group_by_owner(rows: Iterable[tuple], dim: int) -> Iterator[tuple[str, list[str], np.ndarray]]:
    """(owner, [row ids as str], vectors) for rows (row, owner, vector) sorted by owner."""
    owner, ids, vectors = None, [], []
    for row, row_owner, blob in rows:
        if row_owner != owner and ids:
            yield owner, ids, np.stack(vectors)
            ids, vectors = [], []
        owner = row_owner
        ids.append(str(row))
        vectors.append(unpack_vector(blob, dim, row))
    if ids:
        yield owner, ids, np.stack(vectors)
