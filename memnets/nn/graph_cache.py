"""The serving graphs and digests, built once and kept in the user's cache (no torch).

``<cache>/graphs/`` (:func:`memnets.nn.large_backbone.cache_root`: ``$MEMNETS_CACHE``, else the XDG
cache) holds the ONNX graphs that :mod:`memnets.nn.bert_graph` builds from a model's weights, named by
the SHA-256 of those weights (and :data:`~memnets.nn.bert_graph.GRAPH_VERSION`), so a changed model
or builder never meets an old graph; and small stamps that remember a file's SHA-256 (or a digest
computed from it) while the file's size and modification time stay those recorded, so that a start
does not hash 90 MB of weights again. Every file is written whole or not at all (a temporary file
renamed over the name): processes that start together may both build a graph; the last rename wins
and both are the same bytes. A graph is a folder, ``model.onnx`` and its weights in ``model.onnx.data``
(:func:`cached_graph`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from memnets.nn.large_backbone import cache_root
from memnets.nn.split_zip import sha256_file
from memnets.safefiles import flush_to_disk, write_atomically

logger = logging.getLogger(__name__)

GRAPHS_DIR = "graphs"


def graphs_dir() -> Path:
    folder = cache_root() / GRAPHS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _stat_key(path: Path) -> list:
    found = path.stat()
    return [str(path.resolve()), found.st_size, found.st_mtime_ns]


def remembered(name: str, inputs: list, compute: Callable[[], str]) -> str:
    """``compute()``, kept under ``name`` while ``inputs`` (JSON values) stay the same; computed again otherwise."""
    stamp = graphs_dir() / f"{name}-{hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:24]}.json"
    try:
        return json.loads(stamp.read_text())["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = compute()
    write_atomically(stamp, json.dumps({"inputs": inputs, "value": value}).encode())
    return value


# files whose SHA-256 a caller has just computed, by their _stat_key: see known_sha256
_KNOWN: dict[str, str] = {}


@contextmanager
def known_sha256(digests: Mapping[Path, str]) -> Iterator[None]:
    """Within the block, :func:`file_sha256` of each of these files, while unchanged, is its given SHA-256: not
    hashed again, and no stamp written (a pack's files were hashed as they were verified and copied into a
    temporary folder, whose paths a stamp would never meet again)."""
    keys = {json.dumps(_stat_key(Path(path))): digest for path, digest in digests.items()}
    _KNOWN.update(keys)
    try:
        yield
    finally:
        for key in keys:
            _KNOWN.pop(key, None)


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of ``path``'s bytes, hashed once while its size and modification time stay the same."""
    path = Path(path)
    key = _stat_key(path)
    known = _KNOWN.get(json.dumps(key))
    return known if known is not None else remembered("sha256", key, lambda: sha256_file(path))


GRAPH_FILE, DATA_FILE = "model.onnx", "model.onnx.data"


def cached_graph(name: str, build: Callable[[], object]) -> Path:
    """``<graphs>/name/model.onnx``, written from ``build()`` (an ``onnx.ModelProto``) when it is not there yet.

    The weights go to ``model.onnx.data`` beside the graph, which ONNX Runtime maps into memory instead of
    copying them out of the protobuf: a MiniLM session loads in 0.08 s against 0.2-0.3 s (one thread)."""
    target = graphs_dir() / name
    if not (target / GRAPH_FILE).is_file():
        logger.info("building the serving graph %s (once; kept in %s)", name, target.parent)
        _publish(target, lambda scratch: _save(build(), scratch / GRAPH_FILE))
    return target / GRAPH_FILE


def cached_int8(fp32: Path, backend: str) -> Path:
    """The int8 graph of the float32 graph ``fp32`` (a :func:`cached_graph`) for ``backend`` (``"int8"``,
    ``"int8_vnni"``, ``"int8_vnni_ffn"``: :data:`memnets.nn.onnx_runtime.INT8_SETTINGS`), quantised once."""
    from memnets.nn.onnx_runtime import quantize_int8

    target = fp32.parent.with_name(f"{fp32.parent.name}-{backend}")

    def write(scratch: Path) -> None:
        import onnx

        quantize_int8(fp32, scratch / "whole.onnx", backend)
        _save(onnx.load(str(scratch / "whole.onnx")), scratch / GRAPH_FILE)
        (scratch / "whole.onnx").unlink()

    if not (target / GRAPH_FILE).is_file():
        _publish(target, write)
    return target / GRAPH_FILE


def _save(model, path: Path) -> None:
    import onnx

    onnx.save_model(model, str(path), save_as_external_data=True, location=DATA_FILE, size_threshold=1024)


def _publish(target: Path, write: Callable[[Path], None]) -> None:
    """Run ``write(scratch)`` in a new folder beside ``target`` and rename it to ``target`` (whole or not
    at all); when another process put ``target`` in place first, its copy is kept and this one dropped."""
    scratch = target.with_name(f".{target.name}.{os.urandom(6).hex()}.tmp")
    scratch.mkdir()
    try:
        write(scratch)
        for path in scratch.iterdir():
            flush_to_disk(path)
        try:
            os.replace(scratch, target)
        except OSError:
            if not (target / GRAPH_FILE).is_file():
                raise
        flush_to_disk(target.parent)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


__all__ = ["cached_graph", "cached_int8", "file_sha256", "graphs_dir", "known_sha256", "remembered"]
