"""What every contributor follows, and a contributor of fixed lines.

A contributor is any object with:

- ``name``: unique among the registered contributors;
- ``priority``: an ``int`` from -1,000,000 to 1,000,000 (:data:`MAX_PRIORITY`),
  higher is kept longer when the budget is short;
- ``sticky``: ``True`` to be placed before every non-sticky section;
- ``contribute(request) -> Section | None``: a plain or ``async`` method that
  returns this turn's section, or ``None`` to offer nothing. One whose section
  fills (``Section(fills=True)``) may be asked again in the same assembly, with a
  larger ``request.room``, when its lines repeated an earlier section's.

It may also have ``record_shown(items)``, called after assembly with the items
of its section that made it into the prompt (memory contributors count those
as accessed). A contributor that raises never breaks assembly: its section is
left out and the dump shows the error.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

import attrs

from ..errors import InvalidRequestError
from ..model import Hit, Item, Section

if TYPE_CHECKING:
    from ..request import AssemblyRequest

__all__ = ["MAX_PRIORITY", "Contributor", "RankedHits", "RankingStore", "SearchableStore",
           "StaticContributor", "check_contributor"]

#: The largest priority a contributor may have (and the negated smallest).
MAX_PRIORITY = 10**6


@runtime_checkable
class Contributor(Protocol):
    """The shape of a contributor (see the module docstring).

    Its attributes are read-only here, so class attributes, plain attributes and
    the fields of a frozen class all fit.
    """

    @property
    def name(self) -> str:
        """Unique among the registered contributors."""
        ...

    @property
    def priority(self) -> int:
        """Higher is kept longer when the budget is short."""
        ...

    @property
    def sticky(self) -> bool:
        """Placed before every non-sticky section."""
        ...

    def contribute(
        self, request: AssemblyRequest
    ) -> Section | None | Awaitable[Section | None]:  # pragma: no cover - protocol
        """Return this turn's section, or ``None`` to offer nothing."""
        ...


@runtime_checkable
class SearchableStore(Protocol):
    """What the assembler and the memory contributors need of a store.

    :class:`~ctxslots.FactStore` is one; a test double or another store with
    these two methods works too.
    """

    def search(
        self,
        query: str,
        *,
        slots: Sequence[str] | None = None,
        scope: str | None = None,
        limit: int = 10,
        track_access: bool = True,
        now: Any = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> list[Hit]:  # pragma: no cover - protocol
        """The facts that best match ``query``, best first, each with its trace
        (ranked from ``now`` when given: an assembly passes its request's ``now``, and
        its ``user`` and ``agent`` when it names them)."""
        ...

    def touch(self, fact_ids: Iterable[int]) -> int:  # pragma: no cover - protocol
        """Count these facts as shown to a model; how many were counted."""
        ...


class RankedHits(Protocol):
    """One search's ranked list, read as far as asked."""

    def hits(self, limit: int) -> list[Hit]:  # pragma: no cover - protocol
        """The best ``limit`` hits, as a search with that limit returns them."""
        ...


@runtime_checkable
class RankingStore(SearchableStore, Protocol):
    """A store whose search can be extended instead of run again
    (:meth:`~ctxslots.FactStore.search_ranked`)."""

    def search_ranked(
        self, query: str, *, slots: Sequence[str] | None = None, scope: str | None = None,
        now: Any = None, user: str | None = None, agent: str | None = None,
    ) -> RankedHits:  # pragma: no cover - protocol
        """A search of ``query`` whose ``hits(limit)`` reads as far as asked (no access
        counted)."""
        ...


def check_contributor(obj: Any, *, field: str = "contributors") -> Contributor:
    """Return ``obj`` if it has the shape of a contributor.

    :raises InvalidRequestError: ``name``, ``priority``, ``sticky`` or
        ``contribute`` is missing or of the wrong type, ``priority`` is out of
        :data:`MAX_PRIORITY`'s range, or ``record_shown`` is a
        coroutine function (it would never be awaited).
    """
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequestError(f"contributor {obj!r} needs a non-empty string name",
                                  field=field, value=obj)
    priority = getattr(obj, "priority", None)
    if (isinstance(priority, bool) or not isinstance(priority, int)
            or not -MAX_PRIORITY <= priority <= MAX_PRIORITY):
        raise InvalidRequestError(f"contributor {name!r} needs an integer priority from "
                                  f"{-MAX_PRIORITY} to {MAX_PRIORITY}, not {priority!r}",
                                  field=field, value=obj)
    if not isinstance(getattr(obj, "sticky", None), bool):
        raise InvalidRequestError(f"contributor {name!r} needs sticky = True or False",
                                  field=field, value=obj)
    if not callable(getattr(obj, "contribute", None)):
        raise InvalidRequestError(f"contributor {name!r} has no contribute(request) method",
                                  field=field, value=obj)
    if inspect.iscoroutinefunction(getattr(obj, "record_shown", None)):
        # It is called once the prompt is built, in the assembling thread: never awaited.
        raise InvalidRequestError(f"contributor {name!r} has an async record_shown; make it "
                                  "a plain function", field=field, value=obj)
    return cast(Contributor, obj)


def _lines(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidRequestError("lines must be a sequence of strings", field="lines", value=value)
    lines = tuple(value)  # read once: a generator is used up by reading it
    if not all(isinstance(line, str) for line in lines):
        raise InvalidRequestError("lines must be a sequence of strings", field="lines", value=lines)
    # A blank line (a file's lines read with their gaps) would be an empty bullet.
    return tuple(line for line in lines if line.strip())


@attrs.frozen
class StaticContributor:
    """Offers the same lines every turn (house rules, a persona, a glossary).

    Attributes:
        name: Unique contributor name.
        title: The section heading.
        lines: One item per line, best first; blank lines are left out.
        priority: Higher is kept longer.
        sticky: Placed before every non-sticky section.
        intro: An optional line under the heading.
    """

    name: str
    title: str
    lines: tuple[str, ...] = attrs.field(converter=_lines)
    priority: int = 50
    sticky: bool = False
    intro: str | None = None

    def __attrs_post_init__(self) -> None:
        check_contributor(self, field="StaticContributor")
        if not isinstance(self.title, str) or not self.title.strip():
            raise InvalidRequestError("title must be a non-empty string", field="title",
                                      value=self.title)

    def contribute(self, request: AssemblyRequest) -> Section | None:
        """The fixed lines as a section (``None`` when there are none)."""
        if not self.lines:
            return None
        return Section(
            title=self.title, intro=self.intro, priority=self.priority, sticky=self.sticky,
            name=self.name, items=tuple(Item(text=line) for line in self.lines),
        )
