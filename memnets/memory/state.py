"""A manager's saved state: where it lies beside a local store, and how it is read and written.

A :class:`~memnets.memory.manager.MemoryManager` saves its tiers by id (their contents live in the
store) when it closes and restores them when it opens again. Beside a store with a folder
(:class:`~memnets.store.protocol.LocalState`) the file is ``manager-<sha256 of owner>.json``; erasing
a user (``AgentMemory.delete_all(user=...)``) removes it, because it names the user's memory ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

STATE_VERSION = 1


def default_state_path(directory: str | Path, owner: str) -> Path:
    """Where a manager of ``owner`` saves its tiers in a store folder: ``manager-<sha256 of owner>.json``.

    A hash, not the name: distinct owners never share a file ("a b" and "a_b" did when names were
    sanitised), and no file name in the folder spells a user's name.
    """
    return Path(directory) / f"manager-{hashlib.sha256(owner.encode('utf-8')).hexdigest()}.json"


def legacy_state_path(directory: str | Path, owner: str) -> Path:
    """Where memnets before the hashed names saved ``owner``'s state (read once, then replaced)."""
    return Path(directory) / f"manager-{re.sub(r'[^A-Za-z0-9_.-]', '_', owner)}.json"


def read_state(path: Path, owner: str) -> dict:
    """The state saved at ``path`` for ``owner``; ValueError when it is of another version or owner."""
    state = json.loads(path.read_text())
    if state.get("version") != STATE_VERSION or state.get("owner") != owner:
        raise ValueError(
            f"manager state {path} has version {state.get('version')} and owner "
            f"{state.get('owner')!r}; expected version {STATE_VERSION} and owner {owner!r}"
        )
    return state


def write_state(path: Path, state: dict) -> None:
    """Save ``state`` at ``path``, or remove the file when the state holds nothing (after an erasure no
    file names the user or their memories)."""
    if state["context"] or state["working"] or (state["reflection"] or {}).get("pending"):
        path.write_text(json.dumps(state, indent=2) + "\n")
    else:
        path.unlink(missing_ok=True)


__all__ = ["STATE_VERSION", "default_state_path", "legacy_state_path", "read_state", "write_state"]
