"""Reading files from a folder that someone else may be able to write: no links, each file read once;
and writing files whole: a crash never leaves one half-written (:func:`write_atomically`).

A pack folder or an archive's ``index/`` folder is checked (checksums, an HMAC) before it is
used. Two things would let a writer of the folder slip bytes past such a check: a symbolic link
(the check and the load may follow it to different places, or out of the folder), and reading a
file twice (once to check, once to load: it can be swapped in between). So files are opened here
relative to their folder, each folder on the way with ``O_NOFOLLOW``, and read once; the bytes
are hashed and, when asked, copied into a private folder that the loader then reads instead.
POSIX only (``dir_fd`` and ``O_NOFOLLOW``), like the rest of memnets' storage.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

_CHUNK = 1 << 20


class UnsafeFileError(OSError):
    """A symbolic link where a file or folder was expected, or an entry that is not a regular file."""


def open_regular(root: Path, name: str) -> int:
    """A read-only descriptor of the regular file ``root/name`` (``name``: a POSIX path relative to ``root``).

    No link is followed at any level below ``root``: each folder on the way is opened relative to
    the one before with ``O_NOFOLLOW``. ``O_NONBLOCK`` keeps a FIFO from blocking the open; it is
    then refused as not a regular file. Raises FileNotFoundError, :class:`UnsafeFileError`, or
    another OSError.
    """
    path = root / name
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    parts = name.split("/")
    folders = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for part in parts[:-1]:
            folders.append(os.open(part, flags | os.O_DIRECTORY, dir_fd=folders[-1]))
        fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=folders[-1])
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise UnsafeFileError(error.errno, "a symbolic link (or under one)", str(path)) from None
        raise
    finally:
        for folder in folders:
            os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFileError(errno.EINVAL, "not a regular file", str(path))
    return fd


def read_regular(root: Path, name: str) -> bytes:
    """The whole content of the regular file ``root/name``, read once (see :func:`open_regular`)."""
    with os.fdopen(open_regular(root, name), "rb") as handle:
        return handle.read()


def copy_verified(root: Path, name: str, target: Path | None) -> str:
    """Read ``root/name`` once; return the sha256 (hex) of those bytes and, with ``target``, write them to ``target/name``.

    The copy is made while hashing, so it holds exactly the bytes the digest describes, whatever
    happens to ``root`` afterwards. The target file must not exist yet.
    """
    digest = hashlib.sha256()
    with os.fdopen(open_regular(root, name), "rb") as source:
        if target is None:
            for chunk in iter(lambda: source.read(_CHUNK), b""):
                digest.update(chunk)
            return digest.hexdigest()
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        with open(target / name, "xb") as copy:
            for chunk in iter(lambda: source.read(_CHUNK), b""):
                digest.update(chunk)
                copy.write(chunk)
    return digest.hexdigest()


def flush_to_disk(path: Path) -> None:
    """``fsync`` a file (its bytes reach the disk) or a folder (its entries: files created or renamed in it).

    Without it a rename can reach the disk before the bytes of the file renamed, and a machine that
    loses power in between is left with the new name over an empty or partial file."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash at any moment, of the process or of the machine,
    leaves the old file or the new one whole, never a part of one.

    The bytes go to a temporary file beside it (``.<name>.<random>.tmp``), are flushed to disk and
    renamed over ``path``; then the folder is flushed, so that the rename itself is on disk."""
    temporary = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    try:
        with open(temporary, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    flush_to_disk(path.parent)
