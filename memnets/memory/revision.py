"""``update``'s write plan: what changes in a memory, applied to whichever version is current at the write.

``AgentMemory.update`` checks its arguments and hands a :class:`Revision` to the write path
(:meth:`~memnets.memory.writes.WritePath.update`), which encodes a new text once, outside any lock,
then, holding the owner's write lock, reads the current version and writes :meth:`Revision.next_of` it.
A vector depends on the text alone, so another writer's version in between needs no second encoding
and no retry: the plan is applied on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memnets.argerrors import ArgumentValueError, UnknownIdError
from memnets.memory.validity import revised_validity
from memnets.records import Memory


@dataclass(frozen=True)
class Revision:
    """A change of memory ``id`` of ``user`` at ``t``: ``text`` and ``metadata`` (None: kept; the metadata merged
    into the memory's with ``merge_metadata``), ``expires`` (the expiry fields, {} to keep them) and the validity
    arguments of ``update`` (:func:`~memnets.memory.validity.revised_validity`)."""

    id: str
    user: str
    t: datetime
    text: str | None
    metadata: dict | None
    merge_metadata: bool
    expires: dict
    valid_from: datetime | None
    valid_to: object

    def next_of(self, current: Memory) -> Memory:
        """The next version of ``current`` this revision makes (``t`` and id kept, written at this ``t``)."""
        content = self.text if self.text is not None else current.content
        validity = revised_validity(current, content != current.content, self.t, self.valid_from, self.valid_to)
        given = current.replace(
            content=content,
            t=self.t,
            metadata=dict(self.metadata) if self.metadata is not None else {},
            **self.expires,
            **validity,
        )
        return successor(current, given, merge_metadata=self.metadata is None or self.merge_metadata)


def successor(current: Memory, new: Memory, *, merge_metadata: bool = True) -> Memory:
    """``new`` as the next version of ``current``: its id and creation time ``t``, written at ``new.t``.

    ``merge_metadata``: the metadata is ``current``'s updated by ``new``'s; else ``new``'s alone.
    """
    metadata = {**current.metadata, **new.metadata} if merge_metadata else dict(new.metadata)
    return new.replace(
        id=current.id,
        t=current.t,
        updated_at=max(new.t, current.t),
        last_access=max(new.t, current.last_access),
        metadata=metadata,
        superseded_by=None,
    )


def current_version(store, id: str, user: str, name: str) -> Memory:
    """The current memory ``id`` of ``user``: UnknownIdError (a KeyError) when there is none, ValueError for an
    older version's id; both name the argument ``name``."""
    found = store.get([id], user)
    if not found:
        raise UnknownIdError(f"{name}={id!r}: user {user!r} has no memory with this id", field=name)
    if (newer := found[0].superseded_by) is not None:
        raise ArgumentValueError(f"{name}={id!r} is an older version, superseded by {newer!r}", field=name)
    return found[0]


__all__ = ["Revision", "current_version", "successor"]
