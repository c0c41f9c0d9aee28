"""The embedded archive's saved FAISS index (``index/``): sealed when saved, checked before FAISS parses it.

The index is a cache of the SQLite table (:mod:`memnets.store.archive`), saved on close so that
the next open skips a rebuild. Whoever can write the archive folder could plant index files, and
FAISS parses files without defending against hostile bytes, so:

- :meth:`IndexFolder.save` writes the index into a staging folder together with a marker (the
  change-log generation, count, dim and kind it reflects) and ``index_auth.json``: each file's
  sha256 under an HMAC-SHA256 keyed from the archive key (HKDF), or, without a key, under a plain
  checksum that catches corruption but not a writer of the folder; then it swaps the folders.
  Every file and both folders are flushed to disk first, so that a machine that loses power right
  after a save finds the new folder whole (not an empty file under a new name) or the old one.
- :meth:`IndexFolder.load` reads the marker first (JSON only: a stale index is rebuilt without
  hashing it), then copies every listed file into a private temporary folder while checking its
  digest, and FAISS reads that copy, so what is parsed is what was checked. A file that fails, an
  unlisted file, or a file name that is not a plain name inside the folder raise
  :class:`UntrustedIndex` (the archive rebuilds and says so).
- :meth:`IndexFolder.drop` deletes the saved files (they may hold vectors of deleted memories).

Whether the saved index is *current* (its generation against the database's) is the archive's
question; this module only stores and authenticates the bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from contextlib import suppress
from pathlib import Path

from memnets.retrieval.faiss_files import MANIFEST as RETRIEVER_MANIFEST
from memnets.retrieval.faiss_retriever import FaissRetriever
from memnets.safefiles import UnsafeFileError, copy_verified, flush_to_disk, read_regular, write_atomically
from memnets.store.crypto import RowCipher

INDEX_DIR = "index"
INDEX_MARKER = "archive_generation.json"
INDEX_AUTH = "index_auth.json"  # sha256 of every other index file, under an HMAC (key) or a checksum (no key)
_INDEX_MAC_PURPOSE = b"memnets/index-mac/v1"
_INDEX_FILE_FIELDS = ("file", "master", "search")  # fields of retriever.json's owner entries that name index files
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")  # a file directly inside the index folder
_LEFTOVER_AGE_S = 3600  # staging copies of the index older than this belong to no live save


class UntrustedIndex(Exception):
    """The saved index files failed their check (see :meth:`IndexFolder.load`); the archive rebuilds."""


class IndexFolder:
    """The saved index of the archive in ``directory`` (archive id ``archive_id``, sealed under ``cipher``).

    ``cipher`` is ``None`` for an archive without a key; the archive replaces it after a key rotation.
    """

    def __init__(self, directory: Path, archive_id: str, cipher: RowCipher | None) -> None:
        self.directory = directory
        self.archive_id = archive_id
        self.cipher = cipher

    @property
    def folder(self) -> Path:
        return self.directory / INDEX_DIR

    def load(self, expected: dict) -> FaissRetriever | None:
        """The saved index when its marker equals ``expected`` and its files verify; None when missing or stale.

        Raises :class:`UntrustedIndex` when the files are there but fail their check. Staging
        copies left by a save killed long ago are removed on the way.
        """
        for leftover in self.directory.glob(f".{INDEX_DIR}.*"):
            with suppress(OSError):
                if time.time() - leftover.stat().st_mtime > _LEFTOVER_AGE_S:
                    shutil.rmtree(leftover, ignore_errors=True)
        folder = self.folder
        try:
            if json.loads(read_regular(folder, INDEX_MARKER)) != expected:
                return None
            with tempfile.TemporaryDirectory(prefix="memnets-index-") as private:
                self._copy_verified(folder, Path(private))
                if json.loads((Path(private) / INDEX_MARKER).read_bytes()) != expected:
                    return None
                return FaissRetriever.load(private)
        except UnsafeFileError as error:  # a link or a FIFO as the marker
            raise UntrustedIndex(f"{error.filename}: {error.strerror}") from None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return None  # missing, stale, partial or foreign index files: the table is the truth

    def save(self, retriever: FaissRetriever, marker: dict) -> bool:
        """Write ``retriever`` with its ``marker`` and their seal, atomically replacing the saved folder.

        Returns False when another process saved or deleted the folder at the same moment (the
        next open decides which index is current).
        """
        folder = self.folder
        staging = self.directory / f".{INDEX_DIR}.{uuid.uuid4().hex}"
        old = self.directory / f".{INDEX_DIR}.{uuid.uuid4().hex}"
        try:
            retriever.save(staging)  # its files flushed to disk
            write_atomically(staging / INDEX_MARKER, json.dumps(marker).encode())
            self._write_auth(staging)
            if folder.exists():
                folder.rename(old)
            staging.rename(folder)
            flush_to_disk(self.directory)
            return True
        except (OSError, RuntimeError):  # FAISS reports a vanished folder as RuntimeError
            return False
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)

    def drop(self) -> None:
        """Delete the saved index files, and copies left by a save that was killed; the next open rebuilds."""
        for folder in [self.folder, *self.directory.glob(f".{INDEX_DIR}.*")]:
            shutil.rmtree(folder, ignore_errors=True)

    def _seal(self, files: dict[str, str]) -> dict[str, str]:
        """The authentication of index files (name -> sha256) of this archive: an HMAC-SHA256 under a key
        derived from the archive key, or without a key a plain checksum (catches corruption, not a forger)."""
        body = json.dumps({"archive_id": self.archive_id, "files": files}, sort_keys=True).encode()
        if self.cipher is None:
            return {"checksum_sha256": hashlib.sha256(body).hexdigest()}
        return {"hmac_sha256": hmac.new(self.cipher.subkey(_INDEX_MAC_PURPOSE), body, "sha256").hexdigest()}

    def _write_auth(self, folder: Path) -> None:
        """Write ``INDEX_AUTH`` into a freshly saved index folder: every file's sha256 and their seal."""
        files = {name: copy_verified(folder, name, None) for name in sorted(os.listdir(folder))}
        write_atomically(folder / INDEX_AUTH, json.dumps({"files": files, **self._seal(files)}, indent=1).encode())

    def _copy_verified(self, folder: Path, private: Path) -> None:
        """Copy the saved index files into ``private`` once they pass their check, before FAISS parses any.

        FileNotFoundError when there is no authentication record (no saved index, or one written by
        an older memnets): the caller rebuilds. :class:`UntrustedIndex` when a file is a link, is not
        listed, is not a plain name, differs from its digest, or the record's seal does not verify.
        """
        try:
            record = json.loads(read_regular(folder, INDEX_AUTH))
            files = record["files"] if isinstance(record, dict) else None
            if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
                raise UntrustedIndex(f"{INDEX_AUTH} is not a record of file digests")
            odd = sorted(name for name in files if not _PLAIN_NAME.fullmatch(name) or name == INDEX_AUTH)
            if odd:
                raise UntrustedIndex(f"{INDEX_AUTH} lists {odd[0]!r}, not a plain file name inside the folder")
            present = set(os.listdir(folder)) - {INDEX_AUTH}
            if present != set(files):
                extra, missing = sorted(present - set(files)), sorted(set(files) - present)
                raise UntrustedIndex(f"files not listed: {extra[:3]}, listed but missing: {missing[:3]}")
            seal = self._seal(files)
            name, value = next(iter(seal.items()))
            if not isinstance(record.get(name), str) or not hmac.compare_digest(record[name], value):
                raise UntrustedIndex(
                    f"the {name} of {INDEX_AUTH} does not verify"
                    + (" under this archive's key" if self.cipher is not None else "")
                )
            for name, digest in sorted(files.items()):
                if copy_verified(folder, name, private) != digest:
                    raise UntrustedIndex(f"{name}: sha256 differs from {INDEX_AUTH}")
        except UnsafeFileError as error:
            raise UntrustedIndex(f"{error.filename}: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise UntrustedIndex(f"{INDEX_AUTH} is not valid JSON ({error})") from None
        manifest = json.loads((private / RETRIEVER_MANIFEST).read_bytes())
        for entry in manifest.get("owners", []):
            for field, value in entry.items():
                if field == "owner" or not isinstance(value, str):
                    continue  # the owner name is data, and may hold any character
                looks_like_path = "/" in value or "\\" in value or value.startswith(".")
                if (field in _INDEX_FILE_FIELDS and value not in files) or looks_like_path:
                    raise UntrustedIndex(
                        f"{RETRIEVER_MANIFEST} names {value!r} ({field}), not a verified file of the folder"
                    )
