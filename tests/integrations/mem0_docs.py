"""mem0's own documentation snippets (Python, open source), copied verbatim, for tests/integrations/test_compat_mem0_docs.py.

From github.com/mem0ai/mem0 at commit 8d5b7865bd0521e75fe9ab1b260eeccc83f8a378 (2026-08-22):
docs/open-source/python-quickstart.mdx and docs/core-concepts/memory-operations/{add,update,delete,search}.mdx,
the "Mem0 Open Source" / "OSS" Python blocks. The test runs each with only ``from mem0 import Memory``
changed, in one namespace, in this order (the quickstart's steps are one script).
"""

QUICKSTART = [
    """
from mem0 import Memory

m = Memory()
""",
    """
messages = [
    {"role": "user", "content": "Hi, I'm Alex. I love basketball and gaming."},
    {"role": "assistant", "content": "Hey Alex! I'll remember your interests."}
]
m.add(messages, user_id="alex")
""",
    """
results = m.search("What do you know about me?", filters={"user_id": "alex"})
print(results)
""",
]

ADD = """
import os
from mem0 import Memory

os.environ["OPENAI_API_KEY"] = "your-api-key"

m = Memory()

messages = [
    {"role": "user", "content": "I'm planning to watch a movie tonight. Any recommendations?"},
    {"role": "assistant", "content": "How about thriller movies? They can be quite engaging."},
    {"role": "user", "content": "I'm not a big fan of thriller movies but I love sci-fi movies."},
    {"role": "assistant", "content": "Got it! I'll avoid thriller recommendations and suggest sci-fi movies in the future."}
]

# Store inferred memories (default behavior)
result = m.add(messages, user_id="alice", metadata={"category": "movie_recommendations"})

# Optionally store raw messages without inference
result = m.add(messages, user_id="alice", metadata={"category": "movie_recommendations"}, infer=False)

# Optionally set an expiration date (YYYY-MM-DD)
result = m.add(messages, user_id="alice", expiration_date="2030-01-31")
"""

UPDATE = """
from mem0 import Memory

memory = Memory()

# Replace the content
memory.update(
    memory_id="mem_123",
    text="Alex now prefers decaf coffee",
)

# Update content plus metadata and an expiration date (None clears it)
memory.update(
    memory_id="mem_123",
    text="Alex now prefers decaf coffee",
    metadata={"category": "preferences"},
    expiration_date="2030-01-31",
)
"""

SEARCH = """
from mem0 import Memory

m = Memory()

# Simple search: entity IDs go in `filters`
related_memories = m.search("Should I drink coffee or tea?", filters={"user_id": "alice"})
"""

SEARCH_CONTAINS = """
# Search with additional metadata filters (combine entity + metadata in the same dict)
memories = m.search(
    "food preferences",
    filters={"user_id": "alice", "categories": {"contains": "diet"}},
)
"""

EXPLAIN = """
results = m.search(
    "food preferences",
    filters={"user_id": "alice"},
    explain=True,
)

print(results["results"][0]["score_details"])
"""

DELETE = """
from mem0 import Memory

memory = Memory()

memory.delete(memory_id="mem_123")
memory.delete_all(user_id="alice")
"""
