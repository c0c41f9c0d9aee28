"""The memory record: the one unit every tier, store and scorer speaks about."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.timeutil import MAX_TTL_SECONDS, as_utc

MEMORY_KINDS = ("observation", "reflection", "plan", "summary", "message")
DERIVED_KINDS = ("reflection", "plan", "summary")  # written by the manager from other memories (``links``)
Outcome = Literal["added", "updated", "unchanged"]  # what a write did (mem0's ADD / UPDATE / NONE)
OUTCOMES: tuple[Outcome, ...] = ("added", "updated", "unchanged")


@dataclass
class Memory:
    """One memory of an agent (Generative Agents' m = (t, content, importance)).

    Attributes:
        id: unique id within the archive (for LoCoMo turns, "<sample_id>/<dia_id>").
        owner: the agent or user the memory belongs to; every read path is scoped to it.
        t: when the memory was created: the time of its first version (for LoCoMo, its session's
            date); a new version keeps it, so listings stay in creation order. Stored as aware UTC,
            a naive datetime is read as UTC (see :mod:`memnets.timeutil`), likewise
            ``last_access`` and ``updated_at``. :attr:`created_at` is the same time.
        updated_at: when the current version was written (defaults to ``t``: never updated).
        content: the text that is embedded and shown to the LLM.
        importance: long-term value in [0, 1] (heuristic, or the trained scorer's probability).
        kind: one of MEMORY_KINDS.
        last_access: when it was last retrieved; recency decays from here (defaults to t).
        links: ids of the memories this one was derived from (a reflection's evidence).
        agent, action, objects, location: the seed's structured view of an observation, optional.
        metadata: free JSON-serialisable fields (searchable with filters).
        superseded_by: set on an older version of a memory that a newer one replaced (the newer
            one's id); stores keep such rows for ``history`` but never return them from search or
            listings.
        session: the session (run, thread) the memory came from; with ``agent`` (the agent or
            speaker it is from) a scope beside the owner, filterable (``filters={"session": ...}``).
        expires_at: when the memory expires (None: never); from then on no read returns it and a
            sweep deletes it for good (see docs/memory.md, "Expiry").
        ttl: the time to live in seconds that set ``expires_at``, kept so that a read can refresh
            the expiry to ``now + ttl`` (None: no TTL).
        valid_from: when the fact it states began to hold (defaults to ``updated_at``: a new memory's
            ``t``, a new version's write time); the validity axis, apart from when it was written.
        valid_to: when the fact stopped holding (None: it still holds). An update that replaces the
            fact closes the older version's ``valid_to`` at the new version's ``valid_from``; a
            supersession (see :mod:`memnets.memory.supersession`) closes it at the newer memory's.
            A deletion is no validity change. ``valid_to == valid_from``: it never held (a correction).
        invalidated_by: the id of another memory whose fact ended this one's validity (a
            supersession; None otherwise). Not ``superseded_by``, which marks an older *version*
            row that reads never return; an invalidated memory stays current, ranked below the
            memory that invalidated it.
        invalidation_score: the supersession judge's score of that decision, logged with it.
        likely_replaced_by: the id of a newer memory of the same speaker that the supersession judge
            found more likely than not to replace this one, but not sure enough to end its validity
            (a score between the judge's ``order_threshold`` and ``threshold``): this one stays
            valid and current, and a search ranks it below that one as it would below one that
            invalidated it. None otherwise.
        likely_replaced_score: the judge's score of that pair, logged with it.
        outcome: what the write that returned this record did: "added" (a new memory), "updated"
            (a new version of an existing one, the old one in its history) or "unchanged" (the
            same statement was stored already; only its last access moved). Set on what
            ``AgentMemory.add``/``add_many``/``update`` and ``MemoryManager.observe`` return,
            None on records read from a store; never stored, not part of equality.

    Construction validates every field (types, ranges, kind), so a bad record is refused before
    anything is written, whichever door built it; a wrong type is a TypeError, a wrong value a
    ValueError, each naming the field.
    """

    id: str
    owner: str
    t: datetime
    content: str
    importance: float = 0.0
    kind: str = "observation"
    last_access: datetime | None = None
    links: tuple[str, ...] = ()
    agent: str | None = None
    action: str | None = None
    objects: tuple[str, ...] = ()
    location: str | None = None
    metadata: dict = field(default_factory=dict)
    superseded_by: str | None = None
    session: str | None = None
    expires_at: datetime | None = None
    ttl: float | None = None
    updated_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    invalidated_by: str | None = None
    invalidation_score: float | None = None
    likely_replaced_by: str | None = None
    likely_replaced_score: float | None = None
    outcome: Outcome | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Memory.id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.owner, str) or not self.owner:
            raise ArgumentValueError(
                f"Memory {self.id!r}: owner must be a non-empty string, got {self.owner!r}", field="owner"
            )
        self.t = as_utc(self.t, f"Memory {self.id!r}: t")
        if self.kind not in MEMORY_KINDS:
            raise ArgumentValueError(
                f"Memory {self.id!r}: kind must be one of {MEMORY_KINDS}, got {self.kind!r}", field="kind"
            )
        if isinstance(self.importance, bool) or not isinstance(self.importance, (int, float)):
            raise ArgumentTypeError(
                f"Memory {self.id!r}: importance must be a number, got {type(self.importance).__name__}",
                field="importance",
            )
        if not 0.0 <= float(self.importance) <= 1.0:
            raise ArgumentValueError(
                f"Memory {self.id!r}: importance must lie in [0, 1], got {self.importance!r}", field="importance"
            )
        if not isinstance(self.metadata, dict):
            raise ArgumentTypeError(
                f"Memory {self.id!r}: metadata must be a dict, got {type(self.metadata).__name__}", field="metadata"
            )
        check_json_value(self.metadata, f"Memory {self.id!r}: metadata", field="metadata")
        for name in ("agent", "action", "location", "session"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ArgumentTypeError(
                    f"Memory {self.id!r}: {name} must be a str or None, got {type(value).__name__}", field=name
                )
        for name in ("links", "objects"):
            values = getattr(self, name)
            if isinstance(values, str) or not all(isinstance(value, str) for value in values):
                raise ArgumentTypeError(
                    f"Memory {self.id!r}: {name} must be a list of strings, got {values!r:.60}", field=name
                )
            setattr(self, name, tuple(values))
        self.last_access = (
            self.t if self.last_access is None else as_utc(self.last_access, f"Memory {self.id!r}: last_access")
        )
        self.updated_at = (
            self.t if self.updated_at is None else as_utc(self.updated_at, f"Memory {self.id!r}: updated_at")
        )
        self._check_validity()
        if self.superseded_by is not None and (not isinstance(self.superseded_by, str) or not self.superseded_by):
            raise ValueError(
                f"Memory {self.id!r}: superseded_by must be None or a memory id, got {self.superseded_by!r}"
            )
        if self.expires_at is not None:
            self.expires_at = as_utc(self.expires_at, f"Memory {self.id!r}: expires_at")
        if self.ttl is not None:
            if (
                isinstance(self.ttl, bool)
                or not isinstance(self.ttl, (int, float))
                or not 0 < self.ttl <= MAX_TTL_SECONDS
            ):
                raise ArgumentValueError(
                    f"Memory {self.id!r}: ttl must be a positive number of seconds, at most {MAX_TTL_SECONDS:.0f} "
                    f"(100 years), got {self.ttl!r}",
                    field="ttl",
                )
            if self.expires_at is None:
                raise ValueError(f"Memory {self.id!r}: a ttl needs its expires_at")
            self.ttl = float(self.ttl)

    def _check_validity(self) -> None:
        """``valid_from`` (default ``updated_at``) and ``valid_to`` as aware UTC, in order; the supersession fields."""
        self.valid_from = (
            self.updated_at if self.valid_from is None else as_utc(self.valid_from, f"Memory {self.id!r}: valid_from")
        )
        if self.valid_to is not None:
            self.valid_to = as_utc(self.valid_to, f"Memory {self.id!r}: valid_to")
            if self.valid_to < self.valid_from:
                raise ArgumentValueError(
                    f"Memory {self.id!r}: valid_to {self.valid_to.isoformat()} is before valid_from "
                    f"{self.valid_from.isoformat()}",
                    field="valid_to",
                )
        for link, score_name in (
            ("invalidated_by", "invalidation_score"),
            ("likely_replaced_by", "likely_replaced_score"),
        ):
            other, score = getattr(self, link), getattr(self, score_name)
            if other is not None and (not isinstance(other, str) or not other):
                raise ValueError(f"Memory {self.id!r}: {link} must be None or a memory id, got {other!r}")
            if score is not None and (
                isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1
            ):
                raise ValueError(f"Memory {self.id!r}: {score_name} must be a number in [0, 1], got {score!r}")

    def expired(self, now: datetime) -> bool:
        """Whether the memory has expired at ``now`` (an aware or naive-UTC datetime)."""
        return self.expires_at is not None and self.expires_at <= as_utc(now)

    @property
    def created_at(self) -> datetime:
        """When the memory was created (its first version): ``t``."""
        return self.t

    def replace(self, **changes) -> Memory:
        """A copy with some fields changed (records are passed between tiers by value)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def restored(cls, **values) -> Memory:
        """A Memory read back from a store's row: ``values`` as the store checked them when the row was
        written (aware UTC times, tuples, a dict of finite JSON), so they are not checked again. A
        search decodes every hit this way: the checks of construction cost more than the rest of the
        decoding. The times that default to another (``last_access``, ``updated_at`` to ``t``,
        ``valid_from`` to ``updated_at``) may be None, as in construction; ``metadata`` must be given."""
        memory = cls.__new__(cls)
        memory.__dict__.update(_RESTORE_DEFAULTS, **values)
        if memory.last_access is None:
            memory.last_access = memory.t
        if memory.updated_at is None:
            memory.updated_at = memory.t
        if memory.valid_from is None:
            memory.valid_from = memory.updated_at
        return memory


MAX_JSON_DEPTH = 64  # lists and dicts nested in a metadata value or a filter's operand (see check_json_value)
# the fields' plain defaults (metadata's factory excepted), the base a restored Memory is filled over
_RESTORE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Memory) if f.default is not dataclasses.MISSING}


def check_json_value(value, where: str, field: str | None = None) -> None:
    """ValueError naming the place (``where['key'][2]``) of the first float in ``value`` that is NaN or
    infinite, or of a value nested deeper than :data:`MAX_JSON_DEPTH` lists and dicts (``field``: the argument
    the errors name, :mod:`memnets.argerrors`).

    Python's json reads ``NaN``, ``-Infinity`` and ``1e400`` (as inf) and writes them back, but they
    are not JSON: a response or export that holds one cannot be encoded, so one such metadata value
    made every later listing and search of its user fail. A metadata value nested ~300 deep did the
    same to the server's answers (each level a recursive call of their encoding): one write through a
    narrowed token broke every read of its user. Memories hold finite, bounded JSON only. A dict's keys must be
    strings (TypeError naming the place): JSON writes ``1`` and ``None`` as ``"1"`` and ``"null"``, so such a key came
    back changed, or overwrote a string key of the same spelling.
    """
    if (
        isinstance(value, dict)
        and all(isinstance(k, str) for k in value)
        and all(isinstance(v, (str, int)) for v in value.values())
    ):
        return  # the common case (flat text and integer fields, bool included) holds no float
    stack: list[tuple[object, tuple]] = [(value, ())]
    while stack:
        item, keys = stack.pop()
        if isinstance(item, (dict, list, tuple)) and len(keys) >= MAX_JSON_DEPTH:
            place = where + "".join(f"[{key!r}]" for key in keys[:3])
            raise ArgumentValueError(
                f"{place}...: nested over {MAX_JSON_DEPTH} levels deep (lists and dicts)", field=field
            )
        if isinstance(item, float):
            if not math.isfinite(item):
                place = where + "".join(f"[{key!r}]" for key in keys)
                raise ArgumentValueError(
                    f"{place} is {item!r}: JSON numbers must be finite (no NaN or Infinity)", field=field
                )
        elif isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    place = where + "".join(f"[{k!r}]" for k in keys)
                    raise ArgumentTypeError(
                        f"{place} has the key {key!r}: JSON object keys must be strings", field=field
                    )
            stack.extend((child, (*keys, key)) for key, child in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((child, (*keys, n)) for n, child in enumerate(item))
