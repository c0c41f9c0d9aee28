"""Adapters that plug one :func:`memnets.open` memory into agent frameworks.

Each adapter is thin: it translates the framework's calls into :class:`memnets.api.AgentMemory`
methods and nothing else, so scoping by user, deletion and scoring behave the same everywhere.

- :mod:`memnets.integrations.langgraph`: ``MemnetsStore``, a LangGraph ``BaseStore``
  (extra ``memnets[langgraph]``).
- :mod:`memnets.integrations.langchain`: ``MemnetsRetriever``, ``MemnetsVectorStore``,
  ``MemnetsEmbeddings`` (extra ``memnets[langchain]``).
- :mod:`memnets.integrations.mcp_server`: the MCP server behind ``memnets serve mcp``
  (extra ``memnets[mcp]``).

The submodules import their framework at import time; this package imports none of them.
"""
