"""The three memory slots as contributors: user, project and agent.

Each searches the fact store with the request's user message (the store
sanitizes it) and offers its facts best first, as many as can fill the room
the assembler says is left for its section (:attr:`AssemblyRequest.room
<ctxslots.AssemblyRequest.room>`, else the request's budget): the budget
decides where a prompt stops, not a fixed count. Matches scoring under
``min_share`` of the best come after the others, and when the matches run out
with room left, a relaxed search (the words the store leaves out for being
common too) fills the rest; each such hit says so in its trace
(:attr:`HitTrace.fill <ctxslots.model.HitTrace.fill>`; see
:mod:`ctxslots.contributors._fill`). When the sections placed before it left
no room, it does not search, and its empty section says so. ``limit`` is a
ceiling a user may set; the contributor then asks for ``overfetch`` more, so
the dump shows which facts were found but left out by it. Facts under
``min_score`` are offered as dropped with reason ``threshold``. When the store
has no more matches, the section says so (:attr:`~ctxslots.model.Section.stop_note`),
so the dump always tells why the section holds no more.

Each memory says when it was said, unless that is today (``dates``: a
calendar date by default, or an age in words; :attr:`Item.when
<ctxslots.model.Item.when>`), and the budget counts it. By default the
memories said on one day are shown under one heading of that day
(``group_dates``; :attr:`Section.group_template
<ctxslots.model.Section.group_template>`), so a date costs its tokens once a
section rather than once a line.

The sticky user section also offers a short *profile*: the user's most
important facts (reinforced, often shown, confident, keyed), first, whether or
not the message matches them, bounded by a count and a share of the budget,
and marked :attr:`~ctxslots.model.Item.profile` so the dump tells them from
retrieved ones. Only facts that reach the prompt count as accessed (through
:meth:`record_shown`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs

from ..errors import InvalidRequestError
from ..model import DropReason, Fact, Hit, Item, Section
from ..prompts.ages import DATE_STYLES, when_said
from ..prompts.escape import shown_length_text
from ._fill import MAX_FETCH, Gathered, Wanted, gather, high_estimate, relaxed_search_of
from .base import MAX_PRIORITY, RankingStore, SearchableStore

if TYPE_CHECKING:
    from ..request import AssemblyRequest

__all__ = [
    "GROUP_TEMPLATE",
    "MAX_FETCH",
    "AgentMemoryContributor",
    "MemoryContributor",
    "ProjectMemoryContributor",
    "UserMemoryContributor",
]

_SLOT = re.compile(r"[a-z][a-z0-9_\-]{0,63}")
_MAX_LIMIT = 500
#: Matches scoring under this share of the best come after the others, as fill:
#: with a real model nearly every memory is somewhat similar to any message, so
#: the clear matches go first (BENCHMARKS.md, "Extracted facts, the budget filled,
#: dates in the prompt").
MIN_SHARE = 0.1
#: The template of the heading over the memories said at one time, when grouped.
GROUP_TEMPLATE = "group_header.md.j2"
#: The stop note of a section whose room the sections before it took.
NO_ROOM = "not searched: the sections placed before it left no room"


def _owners(request: AssemblyRequest) -> dict[str, str]:
    """The request's user and agent, as arguments to the store (only those named)."""
    return {name: value for name, value in (("user", request.user), ("agent", request.agent))
            if value is not None}


def _check_store(_instance: Any, _attribute: Any, store: Any) -> None:
    if not callable(getattr(store, "search", None)):
        raise InvalidRequestError("store must be a FactStore (an object with search())",
                                  field="store", value=store)


def _check_range(low: int, high: int, *, optional: bool = False) -> Any:
    def check(_instance: Any, attribute: Any, value: Any) -> None:
        if optional and value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidRequestError(
                f"{attribute.name} must be an integer from {low} to {high}"
                f"{' or None' if optional else ''}, not {value!r}",
                field=attribute.name, value=value,
            )
    return check


_check_priority = _check_range(-MAX_PRIORITY, MAX_PRIORITY)


def _check_share(_instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidRequestError(f"{attribute.name} must be a number from 0 to 1, not {value!r}",
                                  field=attribute.name, value=value)


def _check_slot(_instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not _SLOT.fullmatch(value):
        raise InvalidRequestError(f"invalid slot {value!r}", field=attribute.name, value=value)


def _check_flag(_instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, bool):
        raise InvalidRequestError(f"{attribute.name} must be True or False, not {value!r}",
                                  field=attribute.name, value=value)


def _check_dates(_instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and value not in DATE_STYLES:
        raise InvalidRequestError(
            f"dates must be {' or '.join(repr(d) for d in DATE_STYLES)} or None, not {value!r}",
            field=attribute.name, value=value)


def _check_min_score(_instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InvalidRequestError("min_score must be a number or None", field=attribute.name,
                                  value=value)


def _importance(fact: Fact) -> tuple[float, ...]:
    """Sort key of a profile: reinforced, then often shown, confident, keyed, recent."""
    updated = fact.updated_at.timestamp() if fact.updated_at is not None else 0.0
    return (-fact.score, -fact.access_count, -fact.confidence, fact.key is None, -updated,
            fact.id)


def _later(fact: Fact, now: float | None) -> bool:
    """Whether ``fact`` was said after ``now`` (not known yet in a replay at ``now``)."""
    said = fact.said_at
    return now is not None and said is not None and said.timestamp() > now


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
        limit: Most facts offered for the prompt; ``None`` (the default): as
            many as the request's budget can hold (at most :data:`MAX_FETCH`).
        overfetch: With a ``limit``, extra facts asked for and shown as dropped
            (``slot_limit``).
        min_score: Facts whose final score is lower are dropped (``threshold``).
        min_share: Without a ``limit``, matches scoring under this share of
            the best match's final score come after the others, as fill
            (:data:`MIN_SHARE`; 0: every match is a match).
        fill: Fill the room once the matches run out: with the matches under
            ``min_share``, then with what a relaxed search finds (marked in
            their traces, ``HitTrace.fill``). ``False``: matches under
            ``min_share`` are not offered and no relaxed search is made.
        dates: How a memory says when it was said, unless that is today:
            ``"date"`` (a calendar date, "8 May 2023"), ``"age"`` ("3 months
            ago") or ``None`` (not at all).
        group_dates: Show the memories said at one time under one heading of
            it (:data:`GROUP_TEMPLATE`), the groups in the order of their best
            memory; ``False``: each memory's line says its own date.
        intro: An optional line under the heading.
        profile_size: Most profile facts offered first (0: no profile).
        profile_share: Most of the request's available tokens the profile may
            take (estimated on the high side from its lines as shown: the text and
            the date at its end, or its group's heading once; high for tiktoken's
            encodings and the built-in templates, which are all the contributor
            knows: the assembler's ``counter`` may count more).
    """

    store: SearchableStore = attrs.field(validator=_check_store)
    slot: str = attrs.field(kw_only=True, validator=_check_slot)
    name: str = attrs.field(kw_only=True)
    title: str = attrs.field(kw_only=True)
    priority: int = attrs.field(kw_only=True, validator=_check_priority)
    sticky: bool = attrs.field(default=False, kw_only=True,
                               validator=attrs.validators.instance_of(bool))
    scoped: bool = attrs.field(default=True, kw_only=True)
    limit: int | None = attrs.field(default=None, kw_only=True,
                                    validator=_check_range(1, _MAX_LIMIT, optional=True))
    overfetch: int = attrs.field(default=5, kw_only=True, validator=_check_range(0, _MAX_LIMIT))
    min_score: float | None = attrs.field(default=None, kw_only=True, validator=_check_min_score)
    min_share: float = attrs.field(default=MIN_SHARE, kw_only=True, validator=_check_share)
    fill: bool = attrs.field(default=True, kw_only=True, validator=_check_flag)
    dates: str | None = attrs.field(default="date", kw_only=True, validator=_check_dates)
    group_dates: bool = attrs.field(default=True, kw_only=True, validator=_check_flag)
    intro: str | None = attrs.field(default=None, kw_only=True)
    profile_size: int = attrs.field(default=0, kw_only=True, validator=_check_range(0, 50))
    profile_share: float = attrs.field(default=0.2, kw_only=True, validator=_check_share)

    def contribute(self, request: AssemblyRequest) -> Section | None:
        """Search the slot with ``request.message``; ``None`` when nothing matches
        and there is no profile to show."""
        scope = request.scope if self.scoped else None
        if request.room_left <= 0:
            # A sticky section left without room makes the prompt overflow, so it first
            # makes sure it had something to show (one hit, or its profile).
            if self.sticky and not self._has_any(request, scope):
                return None
            return Section(title=self.title, intro=self.intro, items=(), name=self.name,
                           priority=self.priority, sticky=self.sticky, stop_note=NO_ROOM,
                           fills=self.limit is None)
        profile = self._profile(request, scope)
        now = self._now(request)
        whens: dict[int, str | None] = {}
        gathered = self._gather(request, scope, frozenset(f.id for f in profile), now, whens)
        hits = gathered.hits
        if not hits and not profile:
            return None
        items = [Item(text=f.value, key=f"fact:{f.id}", fact=f, profile=True,
                      detail="profile: one of the most important facts of this slot, "
                             "shown whatever the message", when=self._when(f, now))
                 for f in profile]
        offered = 0
        for hit in hits:
            reason: DropReason | None = None
            detail: str | None = None
            if self.min_score is not None and hit.trace.final < self.min_score:
                reason, detail = DropReason.THRESHOLD, f"score under min_score {self.min_score:g}"
            elif self.limit is not None and offered >= self.limit:
                reason, detail = DropReason.SLOT_LIMIT, f"beyond the limit of {self.limit} per slot"
            else:
                offered += 1
            items.append(Item(text=hit.fact.value, key=f"fact:{hit.fact.id}", fact=hit.fact,
                              trace=hit.trace, dropped=reason, detail=detail,
                              when=whens[hit.fact.id] if hit.fact.id in whens
                              else self._when(hit.fact, now)))
        return Section(title=self.title, intro=self.intro, items=tuple(items), name=self.name,
                       priority=self.priority, sticky=self.sticky, stop_note=gathered.note,
                       fills=self.limit is None, group_template=self._group_template())

    def _has_any(self, request: AssemblyRequest, scope: str | None) -> bool:
        """Whether the section would offer anything: a profile fact or one match."""
        return bool(self._profile(request, scope)) or bool(
            self._ranked(request, scope, relaxed=False)(1))

    def _group_template(self) -> str | None:
        return GROUP_TEMPLATE if self.dates is not None and self.group_dates else None

    def _gather(self, request: AssemblyRequest, scope: str | None, skip: frozenset[int],
                now: float | None, whens: dict[int, str | None]) -> Gathered:
        """Enough hits to fill the room left (or the limit), and why no more were
        offered (see :mod:`ctxslots.contributors._fill`); ``whens`` gets the date
        each line estimated shows."""
        strict = self._ranked(request, scope, relaxed=False)
        relaxed: list[Callable[[int], list[Hit]]] = []

        def search(limit: int, relax: bool) -> list[Hit]:
            if not relax:
                return strict(limit)
            if not relaxed:
                relaxed.append(self._ranked(request, scope, relaxed=True))
            return relaxed[0](limit)

        lines: dict[int, str] = {}

        def line(hit: Hit) -> str:
            # Filling estimates the lines found at each step: each is made once.
            made = lines.get(hit.fact.id)
            if made is None:
                said = whens[hit.fact.id] = self._when(hit.fact, now)
                value = shown_length_text(hit.fact.value)
                # Grouped, the date shows in its group's heading instead; estimated
                # with the line, it stands for that heading's share (still on the
                # low side), so a section asks no more of the store than ungrouped.
                made = lines[hit.fact.id] = value if said is None else f"{value} ({said})"
            return made

        wanted = Wanted(room=request.room_left, limit=self.limit, overfetch=self.overfetch,
                        min_share=self.min_share, fill=self.fill, skip=skip, line=line)
        return gather(search, wanted,
                      can_relax=lambda: relaxed_search_of(self.store, request.message))

    def _ranked(self, request: AssemblyRequest, scope: str | None, *, relaxed: bool
                ) -> Callable[[int], list[Hit]]:
        """``ranked(limit)``: the best ``limit`` matches of the message in this slot (no
        access counted; with every word when ``relaxed``); a store that can extends
        one search instead of running more."""
        when: dict[str, Any] = {} if request.now is None else {"now": request.now}
        when.update(_owners(request))
        if relaxed:
            when["relaxed"] = True
        store = self.store
        # The method is looked for, not the protocol: a protocol's isinstance reads every
        # member, each search of every section.
        if callable(getattr(store, "search_ranked", None)):
            ranking = cast(RankingStore, store)
            return ranking.search_ranked(request.message, slots=[self.slot], scope=scope,
                                         **when).hits
        return lambda limit: store.search(request.message, slots=[self.slot], scope=scope,
                                          limit=limit, track_access=False, **when)

    def _now(self, request: AssemblyRequest) -> float | None:
        """The moment a memory's date is seen from: the request's, else the store's clock."""
        if self.dates is None:
            return None
        if request.now is not None:
            return request.now
        clock = getattr(self.store, "clock", None)
        now = clock() if callable(clock) else None
        return float(now) if isinstance(now, (int, float)) else time.time()

    def _when(self, fact: Fact, now: float | None) -> str | None:
        """When ``fact`` was said, as its line shows it (``None``: not shown)."""
        said = fact.said_at
        if self.dates is None or now is None or said is None:
            return None
        return when_said(said.timestamp(), now, self.dates)

    def _profile(self, request: AssemblyRequest, scope: str | None) -> list[Fact]:
        """The slot's most important facts, within the profile's count and share."""
        if not self.profile_size:
            return []
        important = getattr(self.store, "important", None)
        read = getattr(self.store, "facts", None)
        owners = _owners(request)
        if callable(important):  # a FactStore reads the first few from an index
            at: dict[str, Any] = {} if request.now is None else {"now": request.now}
            facts = important(self.slot, scope=scope, limit=self.profile_size, **owners, **at)
        elif callable(read):
            facts = [f for f in read(slots=[self.slot], scope=scope, **owners)
                     if (f.key is not None or f.score > 0) and not _later(f, request.now)]
        else:
            return []
        room = self.profile_share * request.available
        now = self._now(request)
        grouped = self._group_template() is not None
        headings: set[str] = set()
        chosen: list[Fact] = []
        for fact in sorted(facts, key=_importance):
            # Estimated as the prompt shows it: with its date, at the end of its line or
            # in its group's heading (counted once).
            said = self._when(fact, now)
            if said is None:
                cost = high_estimate(fact.value)
            elif not grouped:
                cost = high_estimate(f"{fact.value} ({said})")
            else:
                cost = high_estimate(fact.value)
                if said not in headings:
                    cost += high_estimate(f"{said}:")
            if len(chosen) >= self.profile_size or cost > room:
                break
            room -= cost
            chosen.append(fact)
            if said is not None:
                headings.add(said)
        return chosen

    def record_shown(self, items: Sequence[Item]) -> None:
        """Count the facts that reached the prompt as accessed."""
        ids = [item.fact.id for item in items if item.fact is not None]
        if ids:
            self.store.touch(ids)


@attrs.define
class UserMemoryContributor(MemoryContributor):
    """Who the user is: global facts of slot ``user``; sticky, priority 88, with a
    profile of up to five facts."""

    slot: str = attrs.field(default="user", kw_only=True, validator=_check_slot)
    name: str = attrs.field(default="user_memory", kw_only=True)
    title: str = attrs.field(default="What you know about the user", kw_only=True)
    priority: int = attrs.field(default=88, kw_only=True, validator=_check_priority)
    sticky: bool = attrs.field(default=True, kw_only=True,
                               validator=attrs.validators.instance_of(bool))
    # A user fact has no scope, except one an older release stored with one: it shows
    # in that scope, as search and facts() show it.
    scoped: bool = attrs.field(default=True, kw_only=True)
    profile_size: int = attrs.field(default=5, kw_only=True, validator=_check_range(0, 50))


@attrs.define
class ProjectMemoryContributor(MemoryContributor):
    """Facts about the workspace: slot ``project`` in the request's scope; priority 80."""

    slot: str = attrs.field(default="project", kw_only=True, validator=_check_slot)
    name: str = attrs.field(default="project_memory", kw_only=True)
    title: str = attrs.field(default="What you know about this project", kw_only=True)
    priority: int = attrs.field(default=80, kw_only=True, validator=_check_priority)


@attrs.define
class AgentMemoryContributor(MemoryContributor):
    """Lessons the agent learned: slot ``agent`` in the request's scope; priority 70."""

    slot: str = attrs.field(default="agent", kw_only=True, validator=_check_slot)
    name: str = attrs.field(default="agent_memory", kw_only=True)
    title: str = attrs.field(default="Lessons you learned earlier", kw_only=True)
    priority: int = attrs.field(default=70, kw_only=True, validator=_check_priority)
