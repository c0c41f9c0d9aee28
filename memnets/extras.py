"""Optional dependencies and the extra that brings each, so that a missing one is a clear error.

`pip install memnets` is the core: `memnets.open`, the stores, the manager, the pack loader and
retrieval. Training, evaluation, benchmarks, baselines, PostgreSQL and the framework adapters
need extras; :func:`missing_extra_message` turns the ModuleNotFoundError of one of their modules
into a line that names the extra to install, and :func:`needs_extra` raises that line from a
Python import (``memnets.Client``, the adapters), the way the CLI prints it.

memnets is installed from a checkout or from a wheel, not from PyPI, so ``pip install
'memnets[X]'`` fails: :func:`install_command` reads how this memnets was installed (pip's
``direct_url.json``) and names the command that installs the extra from the same place.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from urllib.parse import unquote, urlparse

# top-level module -> the extra of pyproject.toml that installs it
EXTRA_OF_MODULE: dict[str, str] = {
    "torch": "train",
    "transformers": "train",
    "lightning": "train",
    "jsonargparse": "train",
    "datasets": "train",
    "sklearn": "train",
    "bm25s": "train",
    "matplotlib": "bench",
    "sentence_transformers": "baselines",
    "psycopg": "pgvector",
    "psycopg_pool": "pgvector",
    "pgvector": "pgvector",
    "langgraph": "langgraph",
    "langchain_core": "langchain",
    "langmem": "langmem",
    "mcp": "mcp",
    "onnxscript": "onnx",
    "fastapi": "server",
    "uvicorn": "server",
    "httpx": "server",
    "prometheus_client": "server",
    "uvloop": "server",
}


def install_command(extra: str) -> str:
    """The pip command that adds ``extra`` to this memnets, from the checkout or wheel it came from.

    An editable install names its checkout (``pip install -e '/path/to/memnets[X]'``), a wheel
    install its wheel file; when pip left no record of the source, both forms are given.
    """
    source = _install_source()
    if source is None:
        return (
            f"pip install -e '.[{extra}]' in a memnets checkout, "
            f"or pip install 'dist/memnets-<version>-py3-none-any.whl[{extra}]' for a wheel"
        )
    path, editable = source
    return f"pip install -e '{path}[{extra}]'" if editable else f"pip install '{path}[{extra}]'"


def _install_source() -> tuple[str, bool] | None:
    """The local folder or wheel this memnets was installed from, and whether it is editable."""
    # the installed distribution's record: a checkout may also hold a build's memnets.egg-info, found
    # first when the checkout is on sys.path, which pip wrote no direct_url.json into
    records = (d.read_text("direct_url.json") for d in metadata.distributions(name="memnets"))
    record = next((text for text in records if text), None)
    try:
        url = json.loads(record or "")
    except json.JSONDecodeError:
        return None
    parsed = urlparse(url.get("url", "")) if isinstance(url, dict) else None
    if parsed is None or parsed.scheme != "file":
        return None
    editable = bool((url.get("dir_info") or {}).get("editable"))
    return unquote(parsed.path), editable


def missing_extra_message(error: ModuleNotFoundError, what: str = "this") -> str | None:
    """``"<what> needs <module> of the extra [X]: <install command>"``, or None for a module of no extra."""
    module = (error.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return _message(what, module, extra)


def _message(what: str, module: str, extra: str) -> str:
    return f"{what} needs the optional dependency {module!r} of the extra [{extra}]: {install_command(extra)}"


@contextmanager
def needs_extra(what: str, extra: str) -> Iterator[None]:
    """Turn a module missing in the block into an ImportError that names ``extra`` and how to install it.

    For the imports of a module that only runs with its extra (``memnets.Client``, an adapter):
    every module they need, the framework's own dependencies included, comes with that extra. The
    error stays a ModuleNotFoundError with the missing module's ``name``, so the CLI and callers
    that catch ModuleNotFoundError keep working::

        with needs_extra("memnets.Client", "server"):
            import httpx
    """
    try:
        yield
    except ModuleNotFoundError as error:
        module = (error.name or "").split(".")[0]
        raise ModuleNotFoundError(_message(what, module, extra), name=error.name) from error
