"""A write's record from the API's arguments: a text with its fields, or a record given as it is.

``AgentMemory.add``/``add_many`` build each record here, after checking the user and the id, so
both take texts and :class:`~memnets.records.Memory` records by one rule: a record must be the
user's, may not use an id of the older-version form (:mod:`memnets.memory.ids`) nor set a lineage
field (``superseded_by``: versions are the write path's); a text gets a new id unless given one,
its time ``t`` (default now), and the expiry of its ``ttl`` (:mod:`memnets.memory.expiry`). The
record validates its own fields when it is built, before anything is written.
"""

from __future__ import annotations

import uuid

from memnets.argerrors import ArgumentTypeError
from memnets.memory import expiry
from memnets.memory.fields import MEMORY_SCOPE, MemoryFields
from memnets.memory.ids import check_new_id
from memnets.records import Memory
from memnets.timeutil import as_utc_or_now


def check_item(item, where: str) -> None:
    """TypeError naming ``where`` unless ``item`` is what add and add_many take: a text or a Memory record
    (memnets.Client checks it too, so that it raises before a request, as the embedded API raises)."""
    if not isinstance(item, (str, Memory)):
        raise ArgumentTypeError(
            f"{where}: text must be a str or a Memory record, got {type(item).__name__}", field="text"
        )


def new_record(
    item,
    user: str,
    where: str,
    store,
    *,
    id: str | None,
    fields: MemoryFields,
) -> Memory:
    """``item`` (a text, or a Memory of ``user`` kept as it is) as a record of ``user``; errors name ``where``.

    ``fields``: the text's record's fields, their scope already resolved (:meth:`MemoryFields.scoped`). ``store`` decides whether a ``ttl`` can be kept (:func:`~memnets.memory.expiry.check_ttl`).
    """
    if isinstance(item, Memory):
        if item.owner != user:
            raise ValueError(f"{where}: the record's owner {item.owner!r} is not user {user!r}")
        check_new_id(item.id, f"{where}: id")
        if item.superseded_by is not None:  # lineage is the write path's: versions, replaces=
            raise ValueError(
                f"{where}: the record {item.id!r} sets superseded_by={item.superseded_by!r}; lineage fields are "
                "set by the write path (update, add with an existing id, replaces=), not by a caller"
            )
        return item
    check_item(item, where)
    if id is not None:
        check_new_id(id, f"{where}: id")
    metadata = fields.metadata
    return Memory(
        id=id if id is not None else uuid.uuid4().hex,
        owner=user,
        t=as_utc_or_now(fields.t, "t"),
        content=item,
        importance=0.0 if fields.importance is None else fields.importance,
        kind=fields.kind,
        agent=fields.agent,
        action=fields.action,
        objects=() if fields.objects is None else fields.objects,
        location=fields.location,
        metadata={} if metadata is None else (dict(metadata) if isinstance(metadata, dict) else metadata),
        session=fields.session,
        **expiry.expiry_fields(expiry.check_ttl(store, fields.ttl)),
    )


__all__ = ["MEMORY_SCOPE", "check_item", "new_record"]
