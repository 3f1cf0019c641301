"""Reading facts by id, key, value, time and importance (no search, no access counted).

:class:`ReadMethods` is the part of :class:`~ctxslots.FactStore` that reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import FactNotFoundError, InvalidFactError
from ..model import Fact
from .core import StoreCore
from .search import check_limit
from .writes.writer import check_id

__all__ = ["ReadMethods"]


def _get(core: StoreCore, fact_id: int, *, include_archive: bool) -> Fact | None:
    """The live fact with this id (or the archived one, when asked), else ``None``."""
    fact_id = check_id(fact_id)
    row = core.backend.get(fact_id, live_at=core.clock())
    if row is not None:
        return Fact.from_row(row)
    if include_archive:
        row = core.backend.get_archived(fact_id)
        if row is not None:
            return Fact.from_row(row, archived=True)
    return None


def _get_by_key(core: StoreCore, slot: str, key: str, scope: str | None) -> Fact | None:
    """The live fact with this slot, scope and key, or ``None``."""
    row = core.backend.get_by_key(core.limits.slot(slot), core.limits.scope(scope),
                                  core.limits.key(key), live_at=core.clock())
    return Fact.from_row(row) if row else None


def _find_memory(core: StoreCore, slot: str, value: str, scope: str | None) -> Fact | None:
    """The live free memory of ``slot`` and ``scope`` whose value is exactly ``value``
    (as it would be stored), or ``None``."""
    stored, _ = core.limits.screen(value)
    now = core.clock()
    found = core.backend.find_same(core.limits.slot(slot), core.limits.scope(scope), None,
                                   stored, live_at=now)
    row = None if found is None else core.backend.get(found, live_at=now)
    return None if row is None else Fact.from_row(row)


def _history(core: StoreCore, fact_id: int) -> list[Fact]:
    """Earlier values of a fact, oldest first, as facts with the same id."""
    return [Fact.from_row({
        "id": e.fact_id, "slot": e.slot, "scope": e.scope, "key": e.key, "value": e.value,
        "tags": e.tags, "source": e.source, "confidence": e.confidence, "score": 0.0,
        "created_at": e.valid_from, "updated_at": e.valid_from, "observed_at": e.valid_from,
        "last_accessed": None, "access_count": 0, "expires_at": e.valid_to,
        "superseded_by": None,
    }) for e in core.backend.history(check_id(fact_id))]


def _count(name: str, count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 100:
        raise InvalidFactError(f"{name} must be an integer from 0 to 100, not {count!r}",
                               field=name, value=count)
    return count


def _timeline(core: StoreCore, fact_id: int, *, before: int, after: int, scope: str | None
             ) -> list[Fact]:
    """A live fact and the live facts observed just before and after it, oldest first."""
    fact_id = check_id(fact_id)
    before, after = _count("before", before), _count("after", after)
    flt = core.filter(None, scope)
    anchor = core.backend.rows_by_ids([fact_id], flt)
    if not anchor:
        raise FactNotFoundError(fact_id)
    earlier, later = core.backend.neighbours(anchor[0], flt, before=before, after=after)
    return [Fact.from_row(r) for r in [*reversed(earlier), anchor[0], *later]]


def _facts(core: StoreCore, slots: Sequence[str] | None, scope: str | None, *,
          include_expired: bool) -> list[Fact]:
    """Every live fact of the given slots in ``scope`` (and global ones), by id."""
    flt = core.filter(slots, scope, live=not include_expired)
    return [Fact.from_row(r) for r in core.backend.select(flt)]


def _important(core: StoreCore, slot: str, scope: str | None, limit: int) -> list[Fact]:
    """The most important live facts of ``slot`` visible from ``scope``, best first."""
    rows = core.backend.important(core.filter([slot], scope), check_limit(limit))
    return [Fact.from_row(r) for r in rows]


def _stats(core: StoreCore) -> dict[str, Any]:
    """Counts per slot and scope, archive and history sizes, engine facts."""
    backend = core.backend
    groups = backend.group_counts(live_at=core.clock())
    counts = backend.counts()
    info = backend.info()
    return {
        **info,
        "path": core.location if backend.engine == "sqlite" else info["location"],
        "facts": sum(g[2] for g in groups),
        "expired": sum(g[3] for g in groups),
        "archived": counts["archived"],
        "history": counts["history"],
        "by_slot": [{"slot": slot, "scope": scope or None, "facts": n, "expired": expired}
                    for slot, scope, n, expired in groups],
    }


class ReadMethods:
    """The reading methods of :class:`~ctxslots.FactStore`."""

    _core: StoreCore

    def get(self, fact_id: int, *, include_archive: bool = False) -> Fact | None:
        """Return the live fact with this id, or ``None`` (expired facts are not live).

        Reading by id is not shown to a model by itself, so it does not count as
        an access.
        """
        return _get(self._core, fact_id, include_archive=include_archive)


    def get_by_key(self, slot: str, key: str, *, scope: str | None = None) -> Fact | None:
        """Return the live fact with this slot, scope and key, or ``None``."""
        return _get_by_key(self._core, slot, key, scope)


    def find_memory(self, slot: str, value: str, *, scope: str | None = None) -> Fact | None:
        """The live free memory of ``slot`` and ``scope`` whose value is exactly ``value``
        (as it would be stored), or ``None``: what :meth:`add` returns instead of
        writing a copy.

        :raises InvalidFactError: ``slot``, ``value`` or ``scope`` is malformed.
        """
        return _find_memory(self._core, slot, value, scope)


    def history(self, fact_id: int) -> list[Fact]:
        """Earlier values of a keyed fact, oldest first, as facts with the same id.

        Each returned fact's ``updated_at`` is when that value was written.
        """
        return _history(self._core, fact_id)


    def timeline(self, fact_id: int, *, before: int = 5, after: int = 5,
                 scope: str | None = None) -> list[Fact]:
        """A live fact and the live facts observed just before and after it, oldest first.

        Only facts visible from ``scope`` (that scope and global facts) are
        considered, so a timeline never shows another scope's facts.

        :param before: How many earlier facts (0 to 100).
        :param after: How many later facts (0 to 100).
        :raises FactNotFoundError: No live fact with this id is visible from ``scope``.
        :raises InvalidFactError: ``before`` or ``after`` is out of range.
        """
        return _timeline(self._core, fact_id, before=before, after=after, scope=scope)


    def facts(self, *, slots: Sequence[str] | None = None, scope: str | None = None,
              include_expired: bool = False) -> list[Fact]:
        """Every live fact of the given slots in ``scope`` (and global ones), by id."""
        return _facts(self._core, slots, scope, include_expired=include_expired)


    def important(self, slot: str, *, scope: str | None = None, limit: int = 5) -> list[Fact]:
        """The most important live facts of ``slot`` visible from ``scope``, best first.

        A fact counts when it is keyed or reinforced (score above 0); the order
        is reinforcement score, access count and confidence (highest first),
        keyed facts before free memories, most recently updated, then id. The
        user section's profile shows them. Reading them is not an access.

        :raises InvalidFactError: ``slot`` or ``scope`` is malformed, or
            ``limit`` is not from 1 to 1000.
        """
        return _important(self._core, slot, scope, limit)


    def links(self, fact_id: int) -> dict[int, float]:
        """The facts linked to this one by co-recall, with each link's strength
        (see :mod:`ctxslots.stores.links`)."""
        return self._core.backend.links_of(check_id(fact_id))


    def stats(self) -> dict[str, Any]:
        """Counts per slot and scope, archive and history sizes, engine facts."""
        return _stats(self._core)

