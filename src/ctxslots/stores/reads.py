"""Reading facts by id, key, value, time and importance (no search, no access counted).

:class:`ReadMethods` is the part of :class:`~ctxslots.FactStore` that reads.
A read by key, value, time or importance sees what its owners see (a user's
own facts and the shared ones; :data:`~ctxslots.stores.owners.ANY` for every
owner of a kind); a read by id finds a fact whoever owns it, unless owners are
named.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import FactNotFoundError, InvalidArgumentError, InvalidFactError
from ..model import Fact
from .core import StoreCore
from .narrowing import Narrowing
from .owners import Owners
from .search import check_limit
from .writes.writer import check_id

__all__ = ["ReadMethods"]


def _count(name: str, count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 100:
        raise InvalidFactError(f"{name} must be an integer from 0 to 100, not {count!r}",
                               field=name, value=count)
    return count


#: The orders :meth:`ReadMethods.facts` lists in, as the engines name them.
_ORDERS = {"id": "id", "said": "created"}


def _order(order: object) -> str:
    if not isinstance(order, str) or order not in _ORDERS:
        raise InvalidArgumentError(f"order must be 'id' or 'said', not {order!r}",
                                   field="order", value=order)
    return _ORDERS[order]


#: The largest offset the engines take (a 64-bit integer): one past it skips every fact
#: just as well.
_FARTHEST = 2**63 - 1


def _offset(offset: object) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgumentError(f"offset must be a whole number of 0 or more, not "
                                   f"{offset!r}", field="offset", value=offset)
    return min(offset, _FARTHEST)


class ReadMethods:
    """The reading methods of :class:`~ctxslots.FactStore`."""

    _core: StoreCore

    def get(self, fact_id: int, *, include_archive: bool = False, user: str | None = None,
            agent: str | None = None, scope: str | None = None,
            include_expired: bool = False) -> Fact | None:
        """Return the live fact with this id, or ``None`` (expired facts are not live).

        Reading by id is not shown to a model by itself, so it does not count as
        an access.

        :param include_archive: Also look in the archive.
        :param include_expired: Also return the fact when it has expired (an
            inspector shows it; a search never does).
        :param user: With ``agent`` and ``scope``: only a fact these owners see.
        """
        core = self._core
        fact_id = check_id(fact_id)
        visible = core.owner_check(Owners(user, agent, scope))
        row = core.backend.get(fact_id, live_at=None if include_expired else core.clock())
        archived = False
        if row is None and include_archive:
            row, archived = core.backend.get_archived(fact_id), True
        if row is None or (visible is not None and not visible.owns(row)):
            return None
        return Fact.from_row(row, archived=archived)

    def get_by_key(self, slot: str, key: str, *, scope: str | None = None,
                   user: str | None = None, agent: str | None = None) -> Fact | None:
        """Return the live fact with this slot, owners and key, or ``None``.

        :raises InvalidFactError: A field is malformed, or names an owner the slot
            does not have.
        """
        core = self._core
        slot = core.limits.slot(slot)
        user_id, agent_id, stored_scope = self._owners_of(slot, user, agent, scope)
        row = core.backend.get_by_key(slot, stored_scope, core.limits.key(key),
                                      user_id=user_id, agent_id=agent_id, live_at=core.clock())
        return Fact.from_row(row) if row else None

    def find_memory(self, slot: str, value: str, *, scope: str | None = None,
                    user: str | None = None, agent: str | None = None) -> Fact | None:
        """The live free memory of ``slot`` and owners whose value is exactly ``value``
        (as it would be stored), or ``None``: what :meth:`add` returns instead of
        writing a copy.

        :raises InvalidFactError: ``slot``, ``value`` or an owner is malformed.
        """
        core = self._core
        slot = core.limits.slot(slot)
        stored, _ = core.limits.screen(value)
        user_id, agent_id, stored_scope = self._owners_of(slot, user, agent, scope)
        now = core.clock()
        found = core.backend.find_same(slot, stored_scope, None, stored, user_id=user_id,
                                       agent_id=agent_id, live_at=now)
        row = None if found is None else core.backend.get(found, live_at=now)
        return None if row is None else Fact.from_row(row)

    def _owners_of(self, slot: str, user: str | None, agent: str | None, scope: str | None
                   ) -> tuple[str, str, str]:
        writer = self._core.writer
        return self._core.limits.write_owners(slot, user=user, agent=agent, scope=scope,
                                              default_user=writer.default_user,
                                              default_agent=writer.default_agent)

    def history(self, fact_id: int, *, user: str | None = None, agent: str | None = None,
                scope: str | None = None) -> list[Fact]:
        """Earlier values of a keyed fact, oldest first, as facts with the same id.

        Each returned fact's ``updated_at`` (and ``created_at``) is when that value
        (with those tags) was first written (a value said again, or edited in another
        field, keeps that start), its ``observed_at`` when it was last said or
        observed (the fact's ``observed_at`` while it held the value; a value replaced
        before stores kept that reads as written), and its ``expires_at`` when it was
        replaced.

        :param user: With ``agent`` and ``scope``: only the history of a fact these
            owners see (none of another's).
        """
        fact_id = check_id(fact_id)
        core = self._core
        visible = core.owner_check(Owners(user, agent, scope))
        backend = core.backend
        now = backend.get(fact_id) or backend.get_archived(fact_id)
        if visible is not None and (now is None or not visible.owns(now)):
            return []
        owners = {"user_id": "", "agent_id": ""} if now is None else {
            "user_id": now["user_id"], "agent_id": now["agent_id"]}
        return [Fact.from_row({**owners,
            "id": e.fact_id, "slot": e.slot, "scope": e.scope, "key": e.key, "value": e.value,
            "tags": e.tags, "source": e.source, "confidence": e.confidence, "score": 0.0,
            "created_at": e.valid_from, "updated_at": e.valid_from,
            "observed_at": e.valid_from if e.observed_at is None else e.observed_at,
            "last_accessed": None, "access_count": 0, "expires_at": e.valid_to,
            "superseded_by": None,
        }) for e in backend.history(fact_id)]

    def timeline(self, fact_id: int, *, before: int = 5, after: int = 5,
                 scope: str | None = None, user: str | None = None, agent: str | None = None
                 ) -> list[Fact]:
        """A live fact and the live facts observed just before and after it, oldest first.

        Only facts its owners see (``scope`` and global facts, the user's and the
        agent's own and shared ones) are considered, so a timeline never shows
        another scope's or another user's facts.

        :param before: How many earlier facts (0 to 100).
        :param after: How many later facts (0 to 100).
        :raises FactNotFoundError: No live fact with this id is visible to these owners.
        :raises InvalidFactError: ``before`` or ``after`` is out of range.
        """
        core = self._core
        fact_id = check_id(fact_id)
        before, after = _count("before", before), _count("after", after)
        flt = core.filter(None, Owners(user, agent, scope))
        anchor = core.backend.rows_by_ids([fact_id], flt)
        if not anchor:
            raise FactNotFoundError(fact_id)
        earlier, later = core.backend.neighbours(anchor[0], flt, before=before, after=after)
        return [Fact.from_row(r) for r in [*reversed(earlier), anchor[0], *later]]

    def facts(self, *, slots: Sequence[str] | None = None, scope: str | None = None,
              user: str | None = None, agent: str | None = None,
              include_expired: bool = False, tags: Iterable[str] | str = (),
              source: str | None = None, said_after: dt.datetime | float | None = None,
              said_before: dt.datetime | float | None = None, order: str = "id",
              newest_first: bool = False, limit: int | None = None, offset: int = 0
              ) -> list[Fact]:
        """Every live fact of the given slots its owners see, by id, or one page of them.

        A page is read as a page: the store reads ``limit`` facts, not every fact the
        filters select (:meth:`count_facts` says how many they select).

        :param scope: The workspace: its facts and the global ones (``None``: the
            global ones; ``ANY``: every workspace's).
        :param user: The user: their facts and facts of no user (``None``: the
            store's default user; ``ANY``: every user's).
        :param agent: The agent, as ``user``.
        :param tags: Only facts with every one of these tags.
        :param source: Only facts with this source.
        :param said_after: Only memories said at or after this moment.
        :param said_before: Only memories said before this moment.
        :param order: ``"id"`` (the order they were written in) or ``"said"`` (when each
            was said, then id).
        :param newest_first: The highest id (or the latest said) first.
        :param limit: At most this many facts, from 1 to 1000 (``None``: all).
        :param offset: Skip this many facts first (with ``limit``: the page from there).
        :raises InvalidFactError: An argument is malformed.
        :raises InvalidArgumentError: ``order``, ``limit`` or ``offset`` is malformed.
        """
        core = self._core
        by = _order(order)
        cut = None if limit is None else check_limit(limit)
        skip = _offset(offset)
        flt = core.filter(slots, Owners(user, agent, scope), live=not include_expired,
                          narrow=Narrowing(tags, source, said_after, said_before))
        rows = core.backend.select(flt, order=by, newest_first=bool(newest_first), limit=cut,
                                   offset=skip)
        return [Fact.from_row(r) for r in rows]

    def count_facts(self, *, slots: Sequence[str] | None = None, scope: str | None = None,
                    user: str | None = None, agent: str | None = None,
                    include_expired: bool = False, tags: Iterable[str] | str = (),
                    source: str | None = None,
                    said_after: dt.datetime | float | None = None,
                    said_before: dt.datetime | float | None = None) -> int:
        """How many facts :meth:`facts` selects with the same filters, counted by the
        store without reading them.

        :raises InvalidFactError: An argument is malformed.
        """
        core = self._core
        flt = core.filter(slots, Owners(user, agent, scope), live=not include_expired,
                          narrow=Narrowing(tags, source, said_after, said_before))
        return core.backend.count(flt)

    def important(self, slot: str, *, scope: str | None = None, user: str | None = None,
                  agent: str | None = None, limit: int = 5,
                  now: dt.datetime | float | None = None) -> list[Fact]:
        """The most important live facts of ``slot`` its owners see, best first.

        A fact counts when it is keyed or reinforced (score above 0); the order
        is reinforcement score, access count and confidence (highest first),
        keyed facts before free memories, most recently updated, then id. A fact
        hidden by a newer near-duplicate is left out, as searches leave it out. The
        user section's profile shows them. Reading them is not an access.

        :param now: The moment to read at (a datetime or Unix seconds; default: the
            clock): facts expired by then or said (observed) after it are left out.
        :raises InvalidFactError: ``slot``, an owner or ``now`` is malformed, or
            ``limit`` is not from 1 to 1000.
        """
        core = self._core
        moment = None if now is None else core.limits.moment(now, "now")
        flt = core.filter([slot], Owners(user, agent, scope), now=moment,
                          include_superseded=False,
                          narrow=None if moment is None else Narrowing(until=moment))
        rows = core.backend.important(flt, check_limit(limit))
        return [Fact.from_row(r) for r in rows]

    def links(self, fact_id: int) -> dict[int, float]:
        """The facts linked to this one by co-recall, with each link's strength
        (see :mod:`ctxslots.stores.links`)."""
        return self._core.backend.links_of(check_id(fact_id))

    def stats(self) -> dict[str, Any]:
        """Counts per slot and owners, archive and history sizes, engine facts."""
        core = self._core
        backend = core.backend
        groups = backend.group_counts(live_at=core.clock())
        counts = backend.counts()
        info = backend.info()
        return {
            **info,
            "path": core.location if backend.engine == "sqlite" else info["location"],
            "facts": sum(g.facts for g in groups),
            "expired": sum(g.expired for g in groups),
            "archived": counts["archived"],
            "history": counts["history"],
            "by_slot": [{"slot": g.slot, "scope": g.scope or None, "user": g.user_id or None,
                         "agent": g.agent_id or None, "facts": g.facts, "expired": g.expired}
                        for g in groups],
        }
