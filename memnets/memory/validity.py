"""The memory API's validity arguments: ``update``'s ``valid_from`` / ``valid_to`` and the reads' ``as_of`` / ``known_at``.

A memory's validity (``valid_from`` / ``valid_to``, see :class:`~memnets.records.Memory`) is when
its fact held, apart from when it was written. ``update`` with a new text replaces the fact: the
new version holds from ``valid_from`` (default: the update's ``t``), open unless ``valid_to`` is
given, and the store closes the old version at that point. An update of the metadata alone
corrects the record: the validity stays unless given. ``valid_to=None`` reopens a memory a
supersession closed (its ``invalidated_by`` and score go). The reads' ``as_of`` / ``known_at``
become the filter keys of the same names (:mod:`memnets.store.as_of`).

:func:`in_words` and :func:`changes` say a memory's validity and how each of its versions came to be,
as ``memnets memories search|history`` show them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import memnets.timeutil as timeutil
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
    if new_text:  # a new fact: no older judgement of the old text ranks it
        fields.update(likely_replaced_by=None, likely_replaced_score=None)
    start, end = fields.get("valid_from", current.valid_from), fields.get("valid_to", current.valid_to)
    if end is not None and end < start:
        raise ArgumentValueError(
            f"update: valid_to {end.isoformat()} is before valid_from {start.isoformat()}", field="valid_to"
        )
    return fields


def backdated(current: Memory, history: Sequence[Memory], said: Memory) -> tuple[Memory, list[Memory]]:
    """``said``, a new statement of the fact ``current`` states that held from before ``current`` did (an old
    transcript imported after a newer one), as an older version of it: under ``current``'s id (the store
    stores it as its next ``{id}~{n}``, ``new_version(..., older=True)``), valid from its own ``valid_from``
    until the next version of the fact began. With it, the versions of ``history`` that still held at its
    start, closed there. Written as the newest version instead, the stale fact had become current and the
    newer one an interval of no length."""
    start = said.valid_from
    end = min(version.valid_from for version in (*history, current) if version.valid_from > start)
    older = said.replace(id=current.id, valid_to=end)
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


def in_words(memory: Memory) -> str:
    """``memory``'s validity in words: "current" while its fact holds (", likely replaced by <id>" where the
    supersession judge found a newer memory more likely than not to replace it, below its threshold), else
    "ended <date>" (or "ends <date>", yet to come) and, where a newer memory ended it (the supersession judge),
    ", by <that memory's id>"."""
    if memory.valid_to is None:
        return (
            "current"
            if memory.likely_replaced_by is None
            else f"current, likely replaced by {memory.likely_replaced_by}"
        )
    ended = f"{'ends' if memory.valid_to > timeutil.now() else 'ended'} {memory.valid_to:%Y-%m-%d}"
    return ended if memory.invalidated_by is None else f"{ended}, by {memory.invalidated_by}"


def changes(versions: Sequence[Memory]) -> list[str]:
    """How each of a memory's ``versions`` (oldest first, as ``history`` gives them) came to be, against the one
    before it, so that an ending tells apart from a new text and from the same statement again:

    - "first said": the first version;
    - "ended by the judge (<score>)": the version a supersession judge wrote (``invalidated_by`` set anew, with
      ``valid_to``);
    - "likely replaced (<score>)": the version a supersession judge wrote where it found a newer memory more
      likely than not to replace it, too unsure to end it (``likely_replaced_by`` set anew, still valid);
    - "changed": another text, a new version of the fact;
    - "reopened": the same text, a judge's ending undone (``update(id, valid_to=None)``);
    - "restated": the same text again (its metadata, time or validity changed, or a judge's decision that a
      deleted memory made, rewritten without it).
    """
    out = []
    for previous, version in zip([None, *versions], versions):
        if previous is None:
            out.append("first said")
        elif version.invalidated_by is not None and version.invalidated_by != previous.invalidated_by:
            score = version.invalidation_score
            out.append("ended by the judge" + ("" if score is None else f" ({score:.2f})"))
        elif version.likely_replaced_by is not None and version.likely_replaced_by != previous.likely_replaced_by:
            score = version.likely_replaced_score
            out.append("likely replaced" + ("" if score is None else f" ({score:.2f})"))
        elif version.content != previous.content:
            out.append("changed")
        else:
            out.append(
                "reopened" if previous.invalidated_by is not None and version.invalidated_by is None else "restated"
            )
    return out


__all__ = ["KEEP", "as_of_filter", "backdated", "changes", "in_words", "revised_validity"]
