"""The manager's settings: one :class:`ManagerConfig` (the pluggable decisions are passed beside it)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from memnets.memory.tiers import policy

# near-match cosine for the bundled all-MiniLM-L6-v2: the smallest multiple of 0.01 at which at most 0.1% of
# LoCoMo's training turns (conv-26/30/41/42/43/47) merge into or update an earlier one (bench/experiments/duplicates.py,
# docs/memory.md: 3 of 3,443 at 0.96; 8 of bench/experiments/fact_changes.py's 10 one-detail changes are near matches)
DUPLICATE_THRESHOLD = 0.96
SEARCH_MODES = ("auto", "hybrid", "dense")  # ManagerConfig.search: how AgentMemory.search ranks (memnets.memory.hybrid)


@dataclass(frozen=True)
class ManagerConfig:
    """The manager's settings (the pluggable decisions are passed beside it, not in it).

    Attributes:
        context_budget: tokens the context's messages may take.
        working_capacity: memories working memory may hold.
        k: memories recalled per archive search, and memories added to the context per query.
        keep_threshold: observations with importance below it are not kept (0 keeps all).
        write_through_threshold: observations at or above it are written to the archive at once.
        batch_size: the other kept observations are written when this many are waiting.
        reflection_threshold: accumulated importance that triggers a reflection (None: never reflect).
        mmr_lambda: relevance against diversity when picking memories (1 = plain top-k).
        fetch_factor: an archive search fetches ``fetch_factor * k`` candidates for re-scoring and MMR.
        context_policy, working_policy: overflow policies (see :mod:`memnets.memory.tiers`).
        duplicate_threshold: the cosine of a near match: an observation (or ``AgentMemory.add``)
            without an explicit id that reaches it with a memory of the same kind and speaker is
            that memory again ("unchanged") when its facts are the same, else its new version
            ("updated"); see :mod:`memnets.memory.writes` (None: every text is a new memory).
            Chosen on LoCoMo's training conversations, see docs/memory.md.
        resolve_dates: the relative dates a text names ("yesterday", "last Friday", "in May") are
            resolved from its own time ``t`` when it is written and kept in its metadata under
            ``"resolved_dates"`` (:mod:`memnets.temporal.dates`); off by default, so that a memory's
            metadata stays what its writer gave.
        search: how ``AgentMemory.search`` ranks (:mod:`memnets.memory.hybrid`): "auto" (hybrid, the dense
            ranking fused with the store's lexical one, where the store keeps a lexical index, else dense:
            an encrypted store keeps none), "hybrid" (an error on a store without the index) or "dense".
            The managers' RECALL ranks densely whatever it says.
    """

    context_budget: int = 512
    working_capacity: int = 50
    k: int = 5
    keep_threshold: float = 0.0
    write_through_threshold: float = 0.5
    batch_size: int = 32
    reflection_threshold: float | None = None
    mmr_lambda: float = 1.0  # plain top-k; chosen on conv-49 over 0.7 and 0.5 (docs/memory.md)
    fetch_factor: int = 3
    context_policy: str = "least_recent"
    working_policy: str = "least_important"
    duplicate_threshold: float | None = DUPLICATE_THRESHOLD
    resolve_dates: bool = False
    search: str = "auto"  # hybrid where it can: R@10 63.7% against 39.4% dense on conv-49 (memnets.memory.hybrid)

    def __post_init__(self) -> None:
        for name in ("context_budget", "working_capacity", "k", "batch_size", "fetch_factor"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ManagerConfig.{name} must be an int >= 1, got {value!r}")
        for name in ("keep_threshold", "write_through_threshold", "mmr_lambda"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"ManagerConfig.{name} must be a number in [0, 1], got {value!r}")
        if self.reflection_threshold is not None and not (
            isinstance(self.reflection_threshold, (int, float)) and self.reflection_threshold > 0
        ):
            raise ValueError(
                f"ManagerConfig.reflection_threshold must be None or a positive number, got {self.reflection_threshold!r}"
            )
        if self.duplicate_threshold is not None and not (
            isinstance(self.duplicate_threshold, (int, float)) and -1.0 <= self.duplicate_threshold <= 1.0
        ):
            raise ValueError(
                f"ManagerConfig.duplicate_threshold is a cosine: None or a number in [-1, 1], got {self.duplicate_threshold!r}"
            )
        if not isinstance(self.resolve_dates, bool):
            raise ValueError(f"ManagerConfig.resolve_dates must be True or False, got {self.resolve_dates!r}")
        if self.search not in SEARCH_MODES:
            raise ValueError(f"ManagerConfig.search must be one of {SEARCH_MODES}, got {self.search!r}")
        policy(self.working_policy)  # an unknown name raises ValueError naming the choices
        if self.context_policy != "least_recent":
            raise ValueError(
                f"the context spills in arrival order; context_policy must be 'least_recent', got {self.context_policy!r}"
            )

    @classmethod
    def build(cls, config: ManagerConfig | None = None, **settings) -> ManagerConfig:
        """``config`` (default: the defaults) with some settings changed; an unknown name is a TypeError naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"unknown manager setting(s) {unknown}; ManagerConfig has {sorted(known)}")
        return replace(config or cls(), **settings)


__all__ = ["DUPLICATE_THRESHOLD", "SEARCH_MODES", "ManagerConfig"]
