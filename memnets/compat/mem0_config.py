"""mem0's configuration dict (``Memory.from_config``) read for memnets: where to store, which LLM, which encoder.

The parts of a mem0 config that mean something here:

- ``vector_store.config.path`` (a folder: the embedded SQLite + FAISS store) or
  ``vector_store.config.connection_string`` (a ``postgresql://`` URL: pgvector); without either,
  the folder ``$MEM0_DIR/memnets`` (``~/.mem0/memnets``, beside mem0's own files). The provider name
  itself is not used: memnets stores in its own stores.
- ``llm``: any OpenAI-compatible server (providers :data:`OPENAI_COMPATIBLE`), ``config.model``,
  the base URL (``openai_base_url``, ``vllm_base_url``, ``ollama_base_url``, ``lmstudio_base_url``,
  ``deepseek_base_url`` or ``base_url``; else ``$OPENAI_BASE_URL`` for "openai"), ``api_key`` (else
  ``$OPENAI_API_KEY`` for "openai"), ``timeout`` (seconds) and ``max_tokens``. Without ``llm``, mem0's
  default: OpenAI's ``gpt-5-mini`` at ``$OPENAI_BASE_URL`` (else api.openai.com) with ``$OPENAI_API_KEY``,
  as mem0's ``Memory()`` reads them; when neither variable is set no model is called, and
  ``add(..., infer=True)`` raises :class:`LLMNotConfiguredError` naming the setting.
- ``memnets`` (memnets' own section): ``pack``, ``encoder``, ``key`` and any other argument of
  :func:`memnets.open`, plus ``decide`` ("llm" or "rules", see :mod:`memnets.memory.extraction`) and
  ``deadline`` (seconds one add may wait for the LLM).

Everything else (``embedder``, ``history_db_path``, ``graph_store``, ``reranker``, ``version``, custom
prompts) is not used, and is logged once as such: the encoder is memnets' (its bundled one, or a pack's).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memnets.llm import OpenAIChatLLM

log = logging.getLogger(__name__)

OPENAI_COMPATIBLE = ("openai", "vllm", "ollama", "lmstudio", "deepseek", "together", "groq")
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com",
    "vllm": "http://localhost:8000",
    "ollama": "http://localhost:11434",
    "lmstudio": "http://localhost:1234",
    "deepseek": "https://api.deepseek.com",
    "together": "https://api.together.xyz",
    "groq": "https://api.groq.com/openai",
}
BASE_URL_KEYS = (
    "base_url",
    "openai_base_url",
    "vllm_base_url",
    "ollama_base_url",
    "lmstudio_base_url",
    "deepseek_base_url",
)
DEFAULT_MODEL = "gpt-5-mini"  # mem0's default LLM (mem0/llms/openai.py)
OPENAI_ENVIRONMENT = ("OPENAI_API_KEY", "OPENAI_BASE_URL")  # what mem0's default OpenAI LLM reads
USED = ("vector_store", "llm", "memnets")
EXTRACTION_OPTIONS = ("decide", "deadline")


class LLMNotConfiguredError(ValueError):
    """``infer=True`` without an LLM in the config (the ``llm`` setting)."""


@dataclass
class Mem0Settings:
    """What a mem0 config asks of memnets: the store's location, ``memnets.open``'s options, the LLM."""

    location: str
    open_options: dict = field(default_factory=dict)
    llm: OpenAIChatLLM | None = None
    extraction: dict = field(default_factory=dict)


def default_location() -> str:
    """``$MEM0_DIR/memnets``, or ``~/.mem0/memnets``: beside mem0's own files."""
    return str(Path(os.environ.get("MEM0_DIR") or Path.home() / ".mem0") / "memnets")


def read_config(config: Mapping | None) -> Mem0Settings:
    """The settings of a mem0 config dict (see the module docstring); ``None`` is mem0's ``MemoryConfig()``."""
    if hasattr(config, "model_dump"):  # a pydantic config object, as mem0's MemoryConfig
        config = config.model_dump()
    config = dict(config or {})
    ignored = sorted(k for k, v in config.items() if k not in USED and v)
    if ignored:
        log.info("mem0 config: %s not used by memnets (its own encoder and stores)", ", ".join(ignored))
    store = _section(config, "vector_store").get("config") or {}
    location = store.get("path") or store.get("connection_string") or default_location()
    own = dict(_section(config, "memnets"))
    location = own.pop("location", location)
    extraction = {name: own.pop(name) for name in EXTRACTION_OPTIONS if name in own}
    llm_section = _section(config, "llm")
    if (llm_section.get("config") or {}).get("max_tokens"):
        extraction["max_new_tokens"] = llm_section["config"]["max_tokens"]
    return Mem0Settings(str(location), own, _llm(llm_section), extraction)


def _section(config: Mapping, name: str) -> Mapping:
    section = config.get(name) or {}
    if not isinstance(section, Mapping):
        raise TypeError(f"mem0 config: {name!r} must be a dict, got {type(section).__name__}")
    return section


def _llm(section: Mapping) -> OpenAIChatLLM | None:
    """The OpenAI-compatible client of the ``llm`` section; without one, mem0's default (OpenAI, from the
    environment) where ``$OPENAI_API_KEY`` or ``$OPENAI_BASE_URL`` is set, else None."""
    if not section:
        if not any(os.environ.get(name) for name in OPENAI_ENVIRONMENT):
            return None
        section = {"provider": "openai"}
    provider = section.get("provider", "openai")
    if provider not in OPENAI_COMPATIBLE:
        raise ValueError(
            f"mem0 config: llm provider {provider!r} is not one memnets speaks; it calls OpenAI-compatible servers "
            f"({', '.join(OPENAI_COMPATIBLE)}): point 'openai_base_url' at one that serves your model"
        )
    options = section.get("config") or {}
    default = (os.environ.get("OPENAI_BASE_URL") if provider == "openai" else None) or DEFAULT_BASE_URLS[provider]
    base_url = next((options[k] for k in BASE_URL_KEYS if options.get(k)), default)
    api_env = "OPENAI_API_KEY" if provider == "openai" else None
    return OpenAIChatLLM(
        base_url,
        options.get("model") or DEFAULT_MODEL,
        api_key=options.get("api_key"),
        api_key_env=api_env,
        timeout=options.get("timeout", 60.0),
        temperature=options.get("temperature", 0.0),
    )


__all__ = ["LLMNotConfiguredError", "Mem0Settings", "default_location", "read_config"]
