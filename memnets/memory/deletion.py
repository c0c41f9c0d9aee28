"""The one deletion path: a memory goes with its older versions and the memories derived from it.

``AgentMemory.delete``, ``delete_all`` and ``sweep_expired`` all end here, so whatever removes a
memory removes the same things:

- its older versions (``{id}~n``, and the memories it replaced with ``add(..., replaces=...)``,
  with their own history: :meth:`DeletionPath.older`);
- the reflections, summaries and plans derived from it (``DERIVED_KINDS`` that link to it,
  directly or through one another): their text may quote it;
- every copy held in process: the tiers and write buffer of each live manager of the user
  (managers in other processes learn it from the store's deletion ledger);
- for an erasure of a whole user, the managers' saved state beside a local store
  (:class:`~memnets.store.protocol.LocalState`), which names the user's memory ids;
- the supersession judge's decisions that read it: a memory it ended is valid again, one it likely
  replaced is no longer linked (a next version of each, :func:`released`; the versions the judge wrote of those
  facts are rewritten without it, :func:`unlinked`, so its id, which a caller may have chosen to spell what it said,
  is not left in their history; the older versions of a fact it no longer ends or links are not read). The
  statement the judge read is gone, and a stale fact left ended by nothing would leave the user no current fact at
  all (``as_of`` now answered nothing).

Each deletion holds its owner's in-process write lock (:class:`~memnets.memory.owners.Writers`, shared with the
write path), so it never comes between a write's near-match check and the write it decides; other users'
writes go on. Its store calls are transactions of their own (the store's reserve makes room between them on a
full disk).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import memnets.timeutil as timeutil
from memnets.memory.owners import Writers
from memnets.memory.state import default_state_path, legacy_state_path
from memnets.memory.supersession import decided_by, released, unlinked
from memnets.records import DERIVED_KINDS, Memory
from memnets.store.filters import MemoryFilter
from memnets.store.protocol import Expiry, LocalState, supports
from memnets.store.rows import VERSION_SEPARATOR


class DeletionPath:
    """Deletes memories of one store with everything that goes with them.

    Args:
        store: the memory's store.
        managers: user -> that user's live managers (each with ``forget(ids, reason=...)``).
        writers: the per-owner serialisation of the store's writes (the write path's).
        write_version: ``(current, next version, None) -> written``, the write path's
            (:meth:`~memnets.memory.writes.WritePath.next_version`; None: the stored vector kept): how a released
            memory's next version is written.
    """

    def __init__(
        self,
        store,
        managers: Callable[[str], list],
        writers: Writers,
        write_version: Callable[[Memory, Memory, None], object],
    ):
        self.store, self.managers, self.writers, self.write_version = store, managers, writers, write_version

    def older(self, memory_id: str, user: str) -> list[Memory]:
        """The older versions of memory ``memory_id``, oldest first; a memory it replaced comes after that one's
        own older versions.

        Walked with a stack and a set of the ids seen, not by recursion: ``superseded_by`` links that form a
        cycle (``c1`` <-> ``c2``, rows written before callers were refused lineage fields) or a long chain of
        replaced memories end the walk instead of a RecursionError.
        """
        older: list[Memory] = []
        seen = {memory_id}
        frames = [(memory_id, iter(self.store.history(memory_id, user)), None)]  # (id, versions left, version it is)
        while frames:
            frame_id, versions, version_of = frames[-1]
            version = next(versions, None)
            if version is None:
                frames.pop()
                if version_of is not None:
                    older.append(version_of)
            elif version.id not in seen:
                seen.add(version.id)
                if version.id.startswith(f"{frame_id}{VERSION_SEPARATOR}"):
                    older.append(version)
                else:  # a replaced memory brings its own history first
                    frames.append((version.id, iter(self.store.history(version.id, user)), version))
        return older

    def delete(
        self,
        ids: Sequence[str],
        user: str,
        *,
        reason: str,
        expired_at: datetime | None = None,
        listing: Sequence[Memory] | None = None,
    ) -> tuple[int, bool]:
        """These memories of ``user``, their older versions and the memories derived from them, out of the
        store and every live manager; returns how many rows the store deleted and whether a manager held any.
        ``expired_at`` (the sweep, one id): only if that memory is still expired then, which the store checks
        in the deletion's own transaction, so a memory put again after the sweep listed it stays. ``listing``:
        the user's current memories read once for many deletions (the sweep), else read here."""
        with self.writers.owning([user], transaction=False):
            return self._delete(ids, user, reason, expired_at, listing)

    def _delete(
        self, ids: Sequence[str], user: str, reason: str, expired_at: datetime | None, listing: Sequence[Memory] | None
    ) -> tuple[int, bool]:
        versions = [version for memory_id in ids for version in self._versions(memory_id, user)]
        for derived in self._derived_from(versions, user):
            versions += self._versions(derived, user)
        linked = self._linked_to(set(versions), user, listing)
        if expired_at is not None:
            deleted = self.store.delete_expired(ids[0], user, expired_at, with_ids=versions)
            held = bool(deleted) and any([m.forget(versions, reason=reason) for m in self.managers(user)])
        else:
            held = any([manager.forget(versions, reason=reason) for manager in self.managers(user)])  # every one
            deleted = self.store.delete(versions, user)
        if deleted and linked:
            when, gone = timeutil.now(), set(versions)
            for memory in self.store.get(linked, user):  # as they are now: a listing read earlier may be older
                self.write_version(memory, released(memory, gone, when), None)
            self._forget_decisions(linked, gone, user)
        return deleted, held

    def _forget_decisions(self, ids: Sequence[str], gone: set[str], user: str) -> None:
        """The older versions of ``ids`` that name a memory of ``gone`` as the one that ended or likely replaced
        them, rewritten in place without it (:func:`unlinked`): a caller's id may spell what the memory said, and
        the deleted memory's id stays nowhere (the deletion ledger keeps keyed hashes only)."""
        named = decided_by([version for memory_id in ids for version in self.older(memory_id, user)], gone)
        if named:
            self.store.upsert([unlinked(m, gone) for m in named], self.store.vectors([m.id for m in named], user))

    def delete_scope(self, user: str | None, agent: str | None, session: str | None) -> int:
        """The current memories of an agent and/or session scope (of ``user``, or of every user), through
        :meth:`delete`; returns how many current memories went."""
        scope = MemoryFilter(agent=agent, session=session)
        count = 0
        for owner in [user] if user is not None else self.store.owners():
            ids = [m.id for m in self.store.list_memories(owner, limit=None, filters=scope)]
            if ids:
                count += len(ids)
                self.delete(ids, owner, reason="deleted_all")
        return count

    def erase(self, user: str) -> int:
        """Everything of ``user``: the store's rows, what live managers hold, their saved state; returns how
        many current memories went."""
        with self.writers.owning([user], transaction=False):
            for manager in self.managers(user):
                manager.forget(list(manager._held()), reason="deleted_all")
            count = self.store.count(user)
            self.store.delete_owner(user)
        if supports(self.store, LocalState):  # the state files name deleted ids (managers closed later write none)
            default_state_path(self.store.directory, user).unlink(missing_ok=True)
            legacy_state_path(self.store.directory, user).unlink(missing_ok=True)
        return count

    def sweep_expired(self) -> int:
        """Every expired memory of every user through :meth:`delete`, one at a time and only if still expired
        when deleted (a memory put again or refreshed after the listing is kept); returns how many rows went."""
        if not supports(self.store, Expiry):
            return 0  # no memory of such a store has a TTL (add refuses one)
        now, listings = timeutil.now(), {}
        deleted = 0
        for owner, memory_id in self.store.expired(now):
            if owner not in listings:  # each owner's memories read once for the links to what expires
                listings[owner] = self.store.list_memories(owner, limit=None)
            deleted += self.delete([memory_id], owner, reason="expired", expired_at=now, listing=listings[owner])[0]
        return deleted

    def _versions(self, memory_id: str, user: str) -> list[str]:
        """``memory_id`` and the ids of its older versions."""
        return [memory_id, *(m.id for m in self.older(memory_id, user))]

    def _linked_to(self, ids: set[str], user: str, listing: Sequence[Memory] | None) -> list[str]:
        """The ids of the user's current memories (``listing``, else read) that one of ``ids`` ended or likely
        replaced: the judge's links name it."""
        memories = self.store.list_memories(user, limit=None) if listing is None else listing
        return [m.id for m in decided_by(memories, ids)]

    def _derived_from(self, ids: Sequence[str], user: str) -> list[str]:
        """Ids of the user's derived memories (DERIVED_KINDS) that link to one of ``ids``, directly or
        through other derived memories."""
        derived = self.store.list_memories(user, limit=None, filters=MemoryFilter(kinds=DERIVED_KINDS))
        gone, found = set(ids), []
        while new := [m.id for m in derived if m.id not in gone and gone.intersection(m.links)]:
            gone.update(new)
            found.extend(new)
        return found


__all__ = ["DeletionPath"]
