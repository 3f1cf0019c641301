"""The three memory slots as contributors: user, project and agent.

Each searches the fact store with the request's user message (the store
sanitizes it) and offers its facts best first, as many as can fill the room
the assembler says is left for its section (:attr:`AssemblyRequest.room
<ctxslots.AssemblyRequest.room>`, else the request's budget): the budget
decides where a prompt stops, not a fixed count. When the sections placed
before it left no room, it does not search, and its empty section says so.
``limit`` is a ceiling a user may set; the contributor then asks for
``overfetch`` more, so the dump shows which facts were found but left out by
it. Facts under ``min_score`` are offered as dropped with reason
``threshold``. When the store has no more matches, the section says so
(:attr:`~ctxslots.model.Section.stop_note`), so the dump always tells why the
section holds no more.

The sticky user section also offers a short *profile*: the user's most
important facts (reinforced, often shown, confident, keyed), first, whether or
not the message matches them, bounded by a count and a share of the budget,
and marked :attr:`~ctxslots.model.Item.profile` so the dump tells them from
retrieved ones. Only facts that reach the prompt count as accessed (through
:meth:`record_shown`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import InvalidRequestError
from ..model import DropReason, Fact, Hit, Item, Section
from .base import RankingStore, SearchableStore

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
#: Most facts a contributor asks the store for in one search.
MAX_FETCH = 500
#: Matches scoring under this share of the best are not offered: they would fill a
#: large budget with what barely matches (with a real model, nearly every memory is
#: somewhat similar). On the conversation dev set 0.1 cost 0.001 to 0.006 of the
#: evidence inside a 2,000-token prompt and, on the labelled set with MiniLM, cut the
#: tokens spent from 1,967 to 1,178 a prompt (see BENCHMARKS.md).
MIN_SHARE = 0.1
#: Tokens one memory's line is guessed to cost at least, to size the first search:
#: low, so that one search nearly always finds enough to fill the room (a search
#: costs the same whatever its limit, a hit a few microseconds more). The bullet
#: lines of the benchmark corpus and of the conversation dev set average 28 and 30.
_GUESS_TOKENS_PER_ITEM = 18
#: The stop note of a section whose room the sections before it took.
NO_ROOM = "not searched: the sections placed before it left no room"


def _low_estimate(text: str) -> int:
    """Tokens of a rendered line, rather under than over (so filling asks for enough).

    On the benchmark corpus and the conversation dev set it came to 0.77 of the
    real count of the bullet lines, and over it for under 1% of them
    (``len // 5 + 2`` was over for 11 to 14%, and a section could stop offering
    before it filled its room).
    """
    return len(text) // 6 + 2


def _high_estimate(text: str) -> int:
    """Tokens of a rendered line, rather over than under (so a bound holds)."""
    return len(text) // 4 + 4


def _filling(hits: Sequence[Hit], room: int) -> int | None:
    """How many of ``hits`` to offer so that they hold more than ``room`` tokens
    (estimated on the low side) with a tenth more (at least two) to spare, or
    ``None`` when all of them hold less. Those past that would be dropped for the
    budget anyway: not offering them saves building, rendering and reporting them."""
    total = 0
    for n, hit in enumerate(hits, start=1):
        total += _low_estimate(hit.fact.value)
        if total >= room:
            spare = n + max(2, n // 10)
            return spare if spare < len(hits) else None
    return None


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


def _check_share(_instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidRequestError(f"{attribute.name} must be a number from 0 to 1, not {value!r}",
                                  field=attribute.name, value=value)


def _check_slot(_instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not _SLOT.fullmatch(value):
        raise InvalidRequestError(f"invalid slot {value!r}", field=attribute.name, value=value)


def _check_min_score(_instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InvalidRequestError("min_score must be a number or None", field=attribute.name,
                                  value=value)


def _importance(fact: Fact) -> tuple[float, ...]:
    """Sort key of a profile: reinforced, then often shown, confident, keyed, recent."""
    updated = fact.updated_at.timestamp() if fact.updated_at is not None else 0.0
    return (-fact.score, -fact.access_count, -fact.confidence, fact.key is None, -updated,
            fact.id)


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
        min_share: Without a ``limit``, facts scoring under this share of the
            best match's final score are not offered (:data:`MIN_SHARE`; 0
            offers every match).
        intro: An optional line under the heading.
        profile_size: Most profile facts offered first (0: no profile).
        profile_share: Most of the request's available tokens the profile may
            take (estimated from its text, on the high side).
    """

    store: SearchableStore = attrs.field(validator=_check_store)
    slot: str = attrs.field(kw_only=True, validator=_check_slot)
    name: str = attrs.field(kw_only=True)
    title: str = attrs.field(kw_only=True)
    priority: int = attrs.field(kw_only=True, validator=_check_range(-10**6, 10**6))
    sticky: bool = attrs.field(default=False, kw_only=True,
                               validator=attrs.validators.instance_of(bool))
    scoped: bool = attrs.field(default=True, kw_only=True)
    limit: int | None = attrs.field(default=None, kw_only=True,
                                    validator=_check_range(1, _MAX_LIMIT, optional=True))
    overfetch: int = attrs.field(default=5, kw_only=True, validator=_check_range(0, _MAX_LIMIT))
    min_score: float | None = attrs.field(default=None, kw_only=True, validator=_check_min_score)
    min_share: float = attrs.field(default=MIN_SHARE, kw_only=True, validator=_check_share)
    intro: str | None = attrs.field(default=None, kw_only=True)
    profile_size: int = attrs.field(default=0, kw_only=True, validator=_check_range(0, 50))
    profile_share: float = attrs.field(default=0.2, kw_only=True, validator=_check_share)

    def contribute(self, request: AssemblyRequest) -> Section | None:
        """Search the slot with ``request.message``; ``None`` when nothing matches
        and there is no profile to show."""
        if request.room_left <= 0:
            return Section(title=self.title, intro=self.intro, items=(), name=self.name,
                           priority=self.priority, sticky=self.sticky, stop_note=NO_ROOM,
                           fills=self.limit is None)
        scope = request.scope if self.scoped else None
        profile = self._profile(request, scope)
        hits, note = self._fill(request, scope, {f.id for f in profile})
        if not hits and not profile:
            return None
        items = [Item(text=f.value, key=f"fact:{f.id}", fact=f, profile=True,
                      detail="profile: one of the most important facts of this slot, "
                             "shown whatever the message") for f in profile]
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
                              trace=hit.trace, dropped=reason, detail=detail))
        return Section(title=self.title, intro=self.intro, items=tuple(items), name=self.name,
                       priority=self.priority, sticky=self.sticky, stop_note=note,
                       fills=self.limit is None)

    def _fill(self, request: AssemblyRequest, scope: str | None, skip: set[int]
              ) -> tuple[list[Hit], str | None]:
        """Enough hits to fill the room left (or the limit), and why no more were offered.

        The first search is sized by a low guess of each line's cost; while the
        hits found are fewer tokens (estimated on the low side) than the room
        and more may match, the search is repeated asking for as many more as
        the lines found so far suggest. The store's first hits do not depend on
        the limit asked, so each longer list extends the last (a
        :class:`~.base.RankingStore` reads its candidates again only when there
        may be more).
        """
        room = request.room_left
        ceiling = MAX_FETCH if self.limit is None else self.limit + self.overfetch
        want = min(ceiling, max(10, -(-room // _GUESS_TOKENS_PER_ITEM)) + len(skip))
        ranked = self._ranked(request, scope)
        while True:
            found = ranked(want)
            hits = [h for h in found if h.fact.id not in skip]
            weak = self._first_weak(hits)
            usable = hits if weak is None else hits[:weak]
            enough = _filling(usable, room) if self.limit is None else None
            if enough is not None:
                return usable[:enough], (f"offered {enough} facts, more than the {room} tokens "
                                         "left hold (estimated); more match")
            if weak is not None:
                return usable, (f"the next match scores under {self.min_share:.0%} of the "
                                "best one's score")
            if len(found) < want:
                if not hits:
                    return hits, "no facts match the message"
                return hits, f"no more facts match the message ({len(hits)} found)"
            if want >= ceiling:
                if self.limit is None:
                    return hits, f"asked the store for at most {MAX_FETCH} facts"
                return hits, None  # the overfetched ones say "beyond the limit"
            estimate = sum(_low_estimate(h.fact.value) for h in hits)
            if estimate >= room:
                return hits, (f"offered {len(hits)} facts, more than the {room} tokens left "
                              "hold (estimated); more match")
            # As many more as the lines found so far say the room needs, and some.
            per_line = max(1.0, estimate / max(1, len(hits)))
            want = min(ceiling, max(want * 5 // 4, want + int((room - estimate) / per_line * 1.25)
                                    + 1))

    def _ranked(self, request: AssemblyRequest, scope: str | None) -> Callable[[int], list[Hit]]:
        """``ranked(limit)``: the best ``limit`` matches of the message in this slot (no
        access counted); a store that can extends one search instead of running more."""
        when: dict[str, Any] = {} if request.now is None else {"now": request.now}
        when.update(_owners(request))
        store = self.store
        if isinstance(store, RankingStore):
            return store.search_ranked(request.message, slots=[self.slot], scope=scope,
                                       **when).hits
        return lambda limit: store.search(request.message, slots=[self.slot], scope=scope,
                                          limit=limit, track_access=False, **when)

    def _first_weak(self, hits: Sequence[Hit]) -> int | None:
        """Index of the first hit scoring under ``min_share`` of the best, if any."""
        best = hits[0].trace.final if hits else 0.0
        if not self.min_share or best <= 0 or self.limit is not None:
            return None
        return next((n for n, h in enumerate(hits) if h.trace.final < self.min_share * best),
                    None)

    def _profile(self, request: AssemblyRequest, scope: str | None) -> list[Fact]:
        """The slot's most important facts, within the profile's count and share."""
        if not self.profile_size:
            return []
        important = getattr(self.store, "important", None)
        read = getattr(self.store, "facts", None)
        owners = _owners(request)
        if callable(important):  # a FactStore reads the first few from an index
            facts = important(self.slot, scope=scope, limit=self.profile_size, **owners)
        elif callable(read):
            facts = [f for f in read(slots=[self.slot], scope=scope, **owners)
                     if f.key is not None or f.score > 0]
        else:
            return []
        room = self.profile_share * request.available
        chosen: list[Fact] = []
        for fact in sorted(facts, key=_importance):
            cost = _high_estimate(fact.value)
            if len(chosen) >= self.profile_size or cost > room:
                break
            room -= cost
            chosen.append(fact)
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
    priority: int = attrs.field(default=88, kw_only=True, validator=_check_range(-10**6, 10**6))
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
    priority: int = attrs.field(default=80, kw_only=True, validator=_check_range(-10**6, 10**6))


@attrs.define
class AgentMemoryContributor(MemoryContributor):
    """Lessons the agent learned: slot ``agent`` in the request's scope; priority 70."""

    slot: str = attrs.field(default="agent", kw_only=True, validator=_check_slot)
    name: str = attrs.field(default="agent_memory", kw_only=True)
    title: str = attrs.field(default="Lessons you learned earlier", kw_only=True)
    priority: int = attrs.field(default=70, kw_only=True, validator=_check_range(-10**6, 10**6))
