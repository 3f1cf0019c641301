"""Pruning: keep each slot under its cap by moving the least useful facts to the archive.

Nothing is deleted: a pruned fact moves to the archive, where
``search(include_archive=True)`` still finds it, with the reason it was moved.

Which facts go is decided by their *retention*, highest kept::

    retention = exp(-idle_days / idle_tau_days)   # idle: since last written or shown
              * (1 + ln(1 + access_count))        # used often
              * exp(0.2 * score)                  # reinforced (same factor as search)
              * confidence

a fact superseded by a newer near-duplicate has retention 0, and some
other facts are never pruned at all (see :class:`PrunePolicy`): those
written or shown to a model within ``protect_days``, those shown at least
``protect_accesses`` times, and those reinforced to ``protect_score`` or more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from ...errors import FactNotFoundError, InvalidArgumentError
from ...model import Fact
from ..backend import FactFilter, Row
from ..core import StoreCore

__all__ = ["CapStatus", "Group", "PrunePolicy", "PruneReport", "PrunedFact", "group_of",
           "plan_prune", "prune"]

_DAY = 86400.0

#: Default caps on live facts per slot, counted in each scope separately.
DEFAULT_SLOT_CAPS: Mapping[str, int] = {"user": 1000, "project": 5000, "agent": 5000}


def _check_caps(_instance: Any, _attribute: Any, caps: Mapping[str, int]) -> None:
    if not isinstance(caps, Mapping):
        raise InvalidArgumentError(f"slot_caps must map slot names to counts >= 0, not {caps!r}",
                               field="slot_caps", value=caps)
    for slot, cap in caps.items():
        if not isinstance(slot, str) or isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise InvalidArgumentError(
                f"slot_caps must map slot names to counts >= 0, not {slot!r}: {cap!r}",
                field="slot_caps", value=caps,
            )


def _positive_or_none(_instance: Any, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidArgumentError(f"{attribute.name} must be a positive number or None, not {value!r}",
                               field=attribute.name, value=value)


def _non_negative(_instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgumentError(f"{attribute.name} must be a number >= 0, not {value!r}",
                               field=attribute.name, value=value)


def _finite(_instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgumentError(f"{attribute.name} must be a finite number, not {value!r}",
                               field=attribute.name, value=value)


def _headroom(_instance: Any, attribute: Any, value: Any) -> None:
    # A headroom of 1 or more would free the whole cap: one fact over it would empty the
    # slot (a percentage given as 5 for 5% did that).
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise InvalidArgumentError(
            f"{attribute.name} must be a share of the cap from 0 to under 1 (0.05: down to 95% "
            f"of the cap), not {value!r}", field=attribute.name, value=value)


def _share(_instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise InvalidArgumentError(f"{attribute.name} must be in (0, 1], not {value!r}",
                               field=attribute.name, value=value)


@attrs.frozen
class PrunePolicy:
    """When the store is over a cap, and which facts leave first.

    Attributes:
        slot_caps: Most live facts per slot, counted in each scope separately,
            so one busy workspace never pushes out another's facts. Slots not
            listed use ``default_cap``.
        default_cap: Cap for slots not in ``slot_caps`` (``None``: no cap).
        headroom: Share of the cap freed beyond it when pruning, so pruning does
            not run again after every write (0.05: down to 95% of the cap), from 0 to
            under 1.
        max_bytes: Cap on the database's used pages (``None``: no cap). When
            over it, the lowest ``size_share`` of unprotected facts move to the
            archive. Archived facts keep their text but lose their vectors and
            their place in the live index, so this frees the larger part of
            what they used; the file itself is not shrunk (SQLite reuses the
            freed pages for later writes).
        size_share: Share of the unprotected live facts moved when over ``max_bytes``.
        idle_tau_days: How fast idleness lowers retention (e-folding time).
        protect_days: Facts written or shown to a model within this many days
            are never pruned.
        protect_accesses: Facts shown to a model this many times are never pruned.
        protect_score: Facts with a reinforcement score this high are never pruned.
    """

    # Compared, not hashed (a dict has no hash): equal policies still hash alike.
    slot_caps: Mapping[str, int] = attrs.field(factory=lambda: dict(DEFAULT_SLOT_CAPS),
                                               validator=_check_caps, hash=False)
    default_cap: int | None = attrs.field(default=None, validator=_positive_or_none)
    headroom: float = attrs.field(default=0.05, validator=_headroom)
    max_bytes: int | None = attrs.field(default=None, validator=_positive_or_none)
    size_share: float = attrs.field(default=0.10, validator=_share)
    idle_tau_days: float = attrs.field(default=30.0, validator=_positive_or_none)
    protect_days: float = attrs.field(default=7.0, validator=_non_negative)
    protect_accesses: int = attrs.field(default=5, validator=_non_negative)
    protect_score: float = attrs.field(default=3.0, validator=_finite)

    def cap(self, slot: str) -> int | None:
        """The cap for one slot (``None``: uncapped)."""
        return self.slot_caps.get(slot, self.default_cap)


@attrs.frozen
class PrunedFact:
    """A fact that pruning moved (or, in a dry run, would move) to the archive."""

    fact: Fact
    retention: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"fact": self.fact.to_dict(), "retention": self.retention, "reason": self.reason}


@attrs.frozen
class CapStatus:
    """One slot of one set of owners over its cap, before pruning.

    Attributes:
        protected: How many of its facts pruning may not move.
        remaining: Live facts left after pruning (still over ``cap`` when too
            many are protected).
        user: The user whose facts these are, if any.
        agent: The agent whose facts these are, if any.
    """

    slot: str
    scope: str | None
    count: int
    cap: int
    protected: int
    remaining: int
    user: str | None = None
    agent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return attrs.asdict(self)


@attrs.frozen
class PruneReport:
    """What a prune moved, or would move in a dry run.

    Attributes:
        moved: The facts moved to the archive, lowest retention first.
        over_cap: Every slot and scope that was over its cap.
        used_bytes: The database's used bytes before pruning.
        over_size: Whether ``used_bytes`` was over ``max_bytes``.
        dry_run: Whether nothing was written.
    """

    moved: tuple[PrunedFact, ...]
    over_cap: tuple[CapStatus, ...]
    used_bytes: int
    over_size: bool
    dry_run: bool

    @property
    def needed(self) -> bool:
        """Whether any cap was exceeded."""
        return bool(self.over_cap) or self.over_size

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "dry_run": self.dry_run,
            "moved": [m.to_dict() for m in self.moved],
            "over_cap": [c.to_dict() for c in self.over_cap],
            "used_bytes": self.used_bytes,
            "over_size": self.over_size,
        }


def retention(row: Mapping[str, Any], now: float, policy: PrunePolicy) -> float:
    """How much a fact is worth keeping (see the module docstring).

    A fact superseded by a newer near-duplicate is worth nothing: it goes first.
    """
    if row.get("superseded_by") is not None:
        return 0.0
    last_use = max(row["updated_at"], row["last_accessed"] or 0.0)
    idle_days = max(0.0, now - last_use) / _DAY
    tau = policy.idle_tau_days or math.inf
    return float(math.exp(-idle_days / tau) * (1.0 + math.log1p(row["access_count"]))
                 * math.exp(0.2 * row["score"]) * row["confidence"])


def _protected(row: Mapping[str, Any], now: float, policy: PrunePolicy) -> bool:
    if row.get("superseded_by") is not None:
        return False
    last_use = max(row["updated_at"], row["last_accessed"] or 0.0)
    return bool(now - last_use < policy.protect_days * _DAY
                or row["access_count"] >= policy.protect_accesses
                or row["score"] >= policy.protect_score)


def used_bytes(core: StoreCore) -> int:
    """The bytes of the store that hold data."""
    return core.backend.used_bytes()


def _candidates(
    core: StoreCore, now: float, policy: PrunePolicy, flt: FactFilter
) -> tuple[list[tuple[float, Row]], int]:
    """Unprotected live facts passing ``flt``, lowest retention first, and the protected count."""
    rows = list(core.backend.select(flt))
    free = [(retention(r, now, policy), r) for r in rows if not _protected(r, now, policy)]
    free.sort(key=lambda item: (item[0], item[1]["updated_at"], item[1]["id"]))
    return free, len(rows) - len(free)


#: A slot and its owners, as stored: ``(slot, scope, user_id, agent_id)``.
Group = tuple[str, str, str, str]


def group_of(row: Row) -> Group:
    """The slot and owners ``row`` belongs to."""
    return (row["slot"], row["scope"], row["user_id"], row["agent_id"])


def plan_prune(core: StoreCore, policy: PrunePolicy, now: float | None = None, *,
               groups: frozenset[Group] | None = None) -> PruneReport:
    """Decide what :func:`prune` would move, without writing anything; with ``groups``,
    only among the facts of those slots and owners."""
    now = core.clock() if now is None else now
    moved: dict[int, PrunedFact] = {}
    over: list[CapStatus] = []
    for group in core.backend.group_counts(live_at=now):
        if groups is not None and group[:4] not in groups:
            continue
        n = group.facts - group.expired
        cap = policy.cap(group.slot)
        if cap is None or n <= cap:
            continue
        target = math.floor(cap * (1.0 - policy.headroom))
        free, protected = _candidates(core, now, policy, FactFilter(
            scopes=(group.scope,), slots=(group.slot,), users=(group.user_id,),
            agents=(group.agent_id,), live_at=now))
        scope, user, agent = group.scope or None, group.user_id or None, group.agent_id or None
        # the store's own default user and agent go unnamed: a one-user store reads as before
        named = (("of user", user if user != core.writer.default_user else None),
                 ("of agent", agent if agent != core.writer.default_agent else None),
                 ("in scope", scope))
        reason = f"pruned: over the {group.slot} cap of {cap}" + "".join(
            f" {kind} {name!r}" for kind, name in named if name)
        chosen = free[: max(0, n - target)]
        for value, fact_row in chosen:
            moved[fact_row["id"]] = PrunedFact(Fact.from_row(fact_row), value, reason)
        over.append(CapStatus(group.slot, scope, n, cap, protected, n - len(chosen), user,
                              agent))
    size = used_bytes(core)
    over_size = policy.max_bytes is not None and size > policy.max_bytes
    if over_size:
        free, _ = _candidates(core, now, policy, FactFilter(live_at=now))
        free = [item for item in free if item[1]["id"] not in moved
                and (groups is None or group_of(item[1]) in groups)]
        reason = f"pruned: store over its size cap of {policy.max_bytes} bytes"
        for value, fact_row in free[: math.ceil(len(free) * policy.size_share)]:
            moved[fact_row["id"]] = PrunedFact(Fact.from_row(fact_row), value, reason)
    ordered = sorted(moved.values(), key=lambda m: (m.retention, m.fact.id))
    return PruneReport(tuple(ordered), tuple(over), size, over_size, dry_run=True)


def prune(core: StoreCore, policy: PrunePolicy, *, dry_run: bool = False,
          groups: frozenset[Group] | None = None) -> PruneReport:
    """Move facts over the policy's caps to the archive (with ``groups``, only facts of
    those slots and owners); return what moved.

    The plan is made and its first ``core.limits.max_batch`` moves are done in
    one write transaction, so another process cannot change those facts in
    between; larger prunes continue in further transactions of that size
    (skipping facts that left meanwhile or became protected). Each fact is either
    still live or fully archived, never lost.
    """
    if dry_run:
        return plan_prune(core, policy, groups=groups)
    step = max(1, core.limits.max_batch)
    done: list[PrunedFact] = []
    with core.writer.writing():
        plan = plan_prune(core, policy, groups=groups)
        done.extend(_move(core, plan.moved[:step]))
    for start in range(step, len(plan.moved), step):
        with core.writer.writing():
            done.extend(_move(core, plan.moved[start:start + step], policy))
    return attrs.evolve(plan, moved=tuple(done), dry_run=False)


def _move(core: StoreCore, chunk: tuple[PrunedFact, ...],
          policy: PrunePolicy | None = None) -> list[PrunedFact]:
    """Archive the facts of ``chunk``; with ``policy`` (a later transaction than the
    plan's), those that became protected since (reinforced, read often) stay."""
    moved = []
    now = core.clock()
    current = None if policy is None else {int(r["id"]): r for r in core.backend.rows_by_ids(
        [item.fact.id for item in chunk], FactFilter())}
    for item in chunk:
        if current is not None and policy is not None:
            row = current.get(item.fact.id)
            if row is None or _protected(row, now, policy):
                continue
        try:
            core.writer.forget(item.fact.id, reason=item.reason)
        except FactNotFoundError:
            continue
        moved.append(item)
    return moved
