"""Adapters that plug one :func:`memnets.open` memory into agent frameworks.

Each adapter is thin: it translates the framework's calls into :class:`memnets.api.AgentMemory`
methods and nothing else, so scoping by user, deletion and scoring behave the same everywhere.

- :mod:`memnets.integrations.langgraph`: ``MemnetsStore``, a LangGraph ``BaseStore``
  (extra ``langgraph``; langmem's tools: extra ``langmem``).
- :mod:`memnets.integrations.langchain`: ``MemnetsRetriever``, ``MemnetsVectorStore``,
  ``MemnetsEmbeddings`` (extra ``langchain``).
- :mod:`memnets.integrations.mcp_server`: the MCP server behind ``memnets serve mcp``
  (extra ``mcp``).

The submodules import their framework at import time (a missing one is an ImportError naming its
extra and the pip command, :func:`memnets.extras.needs_extra`); this package imports none of them.
"""
