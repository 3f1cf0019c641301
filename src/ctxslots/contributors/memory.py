"""The three memory slots as contributors: user, project and agent.

Each searches the fact store with the request's user message (the store
sanitizes it) and offers the best ``limit`` facts of its slot, best first. It
asks for ``overfetch`` more so the dump can show which facts were found but
left out by the per-slot limit. Facts under ``min_score`` are offered as
dropped with reason ``threshold``. Only facts that reach the prompt count as
accessed (through :meth:`record_shown`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import InvalidRequestError
from ..model import DropReason, Item, Section
from .base import SearchableStore

if TYPE_CHECKING:
    from ..request import AssemblyRequest

__all__ = [
    "AgentMemoryContributor",
    "MemoryContributor",
    "ProjectMemoryContributor",
    "UserMemoryContributor",
]

_SLOT = re.compile(r"[a-z][a-z0-9_\-]{0,63}")
_MAX_LIMIT = 500


def _check_store(_instance: Any, _attribute: Any, store: Any) -> None:
    if not callable(getattr(store, "search", None)):
        raise InvalidRequestError("store must be a FactStore (an object with search())",
                                  field="store", value=store)


def _check_range(low: int, high: int) -> Any:
    def check(_instance: Any, attribute: Any, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidRequestError(
                f"{attribute.name} must be an integer from {low} to {high}, not {value!r}",
                field=attribute.name, value=value,
            )
    return check


def _check_slot(_instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not _SLOT.fullmatch(value):
        raise InvalidRequestError(f"invalid slot {value!r}", field=attribute.name, value=value)


def _check_min_score(_instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InvalidRequestError("min_score must be a number or None", field=attribute.name,
                                  value=value)


@attrs.define
class MemoryContributor:
    """Offers the facts of one memory slot that match the user's message.

    Attributes:
        store: The fact store to search.
        slot: The slot searched.
        name: Unique contributor name.
        title: The section heading.
        priority: Higher is kept longer.
        sticky: Placed before every non-sticky section.
        scoped: Search the request's scope (and global facts); ``False``
            searches global facts only.
        limit: Most facts offered as candidates for the prompt.
        overfetch: Extra facts asked for, shown as dropped (``slot_limit``).
        min_score: Facts whose final score is lower are dropped (``threshold``).
        intro: An optional line under the heading.
    """

    store: SearchableStore = attrs.field(validator=_check_store)
    slot: str = attrs.field(kw_only=True, validator=_check_slot)
    name: str = attrs.field(kw_only=True)
    title: str = attrs.field(kw_only=True)
    priority: int = attrs.field(kw_only=True, validator=_check_range(-10**6, 10**6))
    sticky: bool = attrs.field(default=False, kw_only=True,
                               validator=attrs.validators.instance_of(bool))
    scoped: bool = attrs.field(default=True, kw_only=True)
    limit: int = attrs.field(default=10, kw_only=True, validator=_check_range(1, _MAX_LIMIT))
    overfetch: int = attrs.field(default=5, kw_only=True, validator=_check_range(0, _MAX_LIMIT))
    min_score: float | None = attrs.field(default=None, kw_only=True, validator=_check_min_score)
    intro: str | None = attrs.field(default=None, kw_only=True)

    def contribute(self, request: AssemblyRequest) -> Section | None:
        """Search the slot with ``request.message``; ``None`` when nothing matches."""
        hits = self.store.search(
            request.message,
            slots=[self.slot],
            scope=request.scope if self.scoped else None,
            limit=self.limit + self.overfetch,
            track_access=False,
        )
        if not hits:
            return None
        items = []
        offered = 0
        for hit in hits:
            reason: DropReason | None = None
            detail: str | None = None
            if self.min_score is not None and hit.trace.final < self.min_score:
                reason, detail = DropReason.THRESHOLD, f"score under min_score {self.min_score:g}"
            elif offered >= self.limit:
                reason, detail = DropReason.SLOT_LIMIT, f"beyond the limit of {self.limit} per slot"
            else:
                offered += 1
            items.append(Item(text=hit.fact.value, key=f"fact:{hit.fact.id}", fact=hit.fact,
                              trace=hit.trace, dropped=reason, detail=detail))
        return Section(title=self.title, intro=self.intro, items=tuple(items), name=self.name,
                       priority=self.priority, sticky=self.sticky)

    def record_shown(self, items: Sequence[Item]) -> None:
        """Count the facts that reached the prompt as accessed."""
        ids = [item.fact.id for item in items if item.fact is not None]
        if ids:
            self.store.touch(ids)


@attrs.define
class UserMemoryContributor(MemoryContributor):
    """Who the user is: global facts of slot ``user``; sticky, priority 88."""

    slot: str = attrs.field(default="user", kw_only=True, validator=_check_slot)
    name: str = attrs.field(default="user_memory", kw_only=True)
    title: str = attrs.field(default="What you know about the user", kw_only=True)
    priority: int = attrs.field(default=88, kw_only=True, validator=_check_range(-10**6, 10**6))
    sticky: bool = attrs.field(default=True, kw_only=True,
                               validator=attrs.validators.instance_of(bool))
    scoped: bool = attrs.field(default=False, kw_only=True)


@attrs.define
class ProjectMemoryContributor(MemoryContributor):
    """Facts about the workspace: slot ``project`` in the request's scope; priority 80."""

    slot: str = attrs.field(default="project", kw_only=True, validator=_check_slot)
    name: str = attrs.field(default="project_memory", kw_only=True)
    title: str = attrs.field(default="What you know about this project", kw_only=True)
    priority: int = attrs.field(default=80, kw_only=True, validator=_check_range(-10**6, 10**6))


@attrs.define
class AgentMemoryContributor(MemoryContributor):
    """Lessons the agent learned: slot ``agent`` in the request's scope; priority 70."""

    slot: str = attrs.field(default="agent", kw_only=True, validator=_check_slot)
    name: str = attrs.field(default="agent_memory", kw_only=True)
    title: str = attrs.field(default="Lessons you learned earlier", kw_only=True)
    priority: int = attrs.field(default=70, kw_only=True, validator=_check_range(-10**6, 10**6))
