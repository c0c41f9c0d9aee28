"""The memory API's validity arguments: ``update``'s ``valid_from`` / ``valid_to`` and the reads' ``as_of`` / ``known_at``.

A memory's validity (``valid_from`` / ``valid_to``, see :class:`~memnets.records.Memory`) is when
its fact held, apart from when it was written. ``update`` with a new text replaces the fact: the
new version holds from ``valid_from`` (default: the update's ``t``), open unless ``valid_to`` is
given, and the store closes the old version at that point. An update of the metadata alone
corrects the record: the validity stays unless given. ``valid_to=None`` reopens a memory a
supersession closed (its ``invalidated_by`` and score go). The reads' ``as_of`` / ``known_at``
become the filter keys of the same names (:mod:`memnets.store.as_of`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from memnets.argerrors import ArgumentValueError
from memnets.memory.arguments import Keep
from memnets.records import Memory
from memnets.store.filters import MemoryFilter
from memnets.timeutil import as_utc

KEEP = Keep("KEEP")  # update(valid_to=...) left out


def revised_validity(current: Memory, new_text: bool, when: datetime, valid_from: datetime | None, valid_to) -> dict:
    """The validity fields of ``update``'s next version of ``current`` (see the module docstring)."""
    fields: dict = {}
    if valid_from is not None:
        fields["valid_from"] = as_utc(valid_from, "valid_from")
    elif new_text:
        fields["valid_from"] = when
    if valid_to is not KEEP:
        fields["valid_to"] = None if valid_to is None else as_utc(valid_to, "valid_to")
    elif new_text:
        fields["valid_to"] = None
    if new_text or fields.get("valid_to", KEEP) is None:
        fields.update(invalidated_by=None, invalidation_score=None)
    start, end = fields.get("valid_from", current.valid_from), fields.get("valid_to", current.valid_to)
    if end is not None and end < start:
        raise ArgumentValueError(
            f"update: valid_to {end.isoformat()} is before valid_from {start.isoformat()}", field="valid_to"
        )
    return fields


def backdated(current: Memory, history: Sequence[Memory], said: Memory, id: str) -> tuple[Memory, list[Memory]]:
    """``said``, a new statement of the fact ``current`` states that held from before ``current`` did (an old
    transcript imported after a newer one), as an older version of it: ``id``, superseded by ``current``,
    valid from its own ``valid_from`` until the next version of the fact began. With it, the versions of
    ``history`` that still held at its start, closed there. Written as the newest version instead, the
    stale fact had become current and the newer one an interval of no length."""
    start = said.valid_from
    end = min(version.valid_from for version in (*history, current) if version.valid_from > start)
    older = said.replace(id=id, superseded_by=current.id, valid_to=end)
    cut = [
        version.replace(valid_to=start)
        for version in history
        if version.valid_from < start and (version.valid_to is None or version.valid_to > start)
    ]
    return older, cut


def as_of_filter(
    filters: MemoryFilter | Mapping | None, as_of: datetime | None, known_at: datetime | None
) -> MemoryFilter | Mapping | None:
    """``filters`` with the reads' ``as_of`` / ``known_at`` joined as its filter keys; ``filters`` as given
    (parsed once, where it is used) when neither is set, as in most reads."""
    if as_of is None and known_at is None:
        return filters
    return MemoryFilter.combine(filters, {"as_of": as_of, "known_at": known_at})


__all__ = ["KEEP", "as_of_filter", "backdated", "revised_validity"]
