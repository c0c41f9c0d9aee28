"""Drop-in facades with other memory libraries' calls over :class:`memnets.AgentMemory`.

- :mod:`memnets.compat.mem0`: ``from memnets.compat.mem0 import Memory`` in place of
  ``from mem0 import Memory`` (docs/integrations.md, "Switching from mem0").
"""
