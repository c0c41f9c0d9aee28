"""Optional dependencies and the extra that brings each, so that a missing one is a clear error.

`pip install memnets` is the core: `memnets.open`, the stores, the manager, the pack loader and
retrieval. Training, evaluation, benchmarks, baselines, PostgreSQL and the framework adapters
need extras; :func:`missing_extra_message` turns the ModuleNotFoundError of one of their modules
into a line that names the extra to install.
"""

from __future__ import annotations

# top-level module -> the extra of pyproject.toml that installs it
EXTRA_OF_MODULE: dict[str, str] = {
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
    "mcp": "mcp",
    "onnxruntime": "onnx",
    "onnx": "onnx",
    "onnxscript": "onnx",
    "fastapi": "server",
    "uvicorn": "server",
    "httpx": "server",
    "prometheus_client": "server",
}


def missing_extra_message(error: ModuleNotFoundError, what: str = "this") -> str | None:
    """``"<what> needs <module> from the extra [X]: pip install 'memnets[X]'"``, or None for a module of no extra."""
    module = (error.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return (
        f"{what} needs the optional dependency {module!r} of the extra [{extra}]: "
        f"pip install 'memnets[{extra}]' (from a checkout: pip install -e '.[{extra}]')"
    )
