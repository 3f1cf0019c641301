"""Erasure: removing a fact, an owner's memory or everything, for good.

Forgetting moves a fact to the archive and replacing keeps the old value in
history; erasure keeps nothing. A fact goes with its archived copy, its
earlier values, its vector and its co-recall links; an owner's erasure also
drops the flush progress of its conversations. On SQLite no byte of the erased
text stays in the file: rows are overwritten with zeros as they are deleted
(SQLite's ``secure_delete`` and FTS5's ``secure-delete``), and the write-ahead
log, which still holds the pages they were written in, is copied back and
emptied (inside :meth:`~ctxslots.FactStore.batch`, once the batch commits). On
PostgreSQL the rows are gone from every table.
"""

from __future__ import annotations

from typing import Any

import attrs

from ...errors import FactNotFoundError, InvalidArgumentError
from ..backend import Erased
from ..core import StoreCore
from ..owners import ANY, Owners
from .writer import check_id

__all__ = ["META_OWNER_ERASURES", "ErasureMethods", "ErasureReport"]

#: The ``store_meta`` entry counting the erasures of whole owners (``erase``, ``reset``).
META_OWNER_ERASURES = "owners.erasures"


@attrs.frozen
class ErasureReport:
    """What an erasure removed.

    Attributes:
        erased: What was erased: ``"fact 12"``, ``"user alice"``, ``"everything"``.
        facts: Live facts removed.
        archived: Archived facts removed.
        history: Earlier values removed.
        vectors: Vectors removed.
        links: Co-recall links removed.
        progress: Flush progress records removed.
        unhidden: Facts a removed fact hid as near-duplicates, shown again: with
            their survivor gone, nothing else stands for them.
    """

    erased: str
    facts: int = 0
    archived: int = 0
    history: int = 0
    vectors: int = 0
    links: int = 0
    progress: int = 0
    unhidden: int = 0

    @classmethod
    def of(cls, erased: str, counts: Erased) -> ErasureReport:
        """A report of ``counts`` removed for ``erased``."""
        return cls(erased, **attrs.asdict(counts))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return attrs.asdict(self)

    def summary(self) -> str:
        """One line: ``erased user alice: 12 facts, 3 archived, 5 history entries...``."""
        parts = [(self.facts, "fact", "facts"), (self.archived, "archived fact",
                                                  "archived facts"),
                 (self.history, "history entry", "history entries"),
                 (self.vectors, "vector", "vectors"), (self.links, "link", "links"),
                 (self.progress, "flush record", "flush records")]
        shown = f"; {self.unhidden} hidden near-duplicate{'s' if self.unhidden != 1 else ''} " \
            "shown again" if self.unhidden else ""
        return f"erased {self.erased}: " + ", ".join(
            f"{n} {one if n == 1 else many}" for n, one, many in parts) + shown


def _count_owner_erasure(core: StoreCore) -> None:
    """Count an owner's erasure, inside its write and before it removes anything (no
    name of the owner is kept). On PostgreSQL the count's lock is then held from the
    start: a flush, which reads the count before its progress, waits for the erasure, or
    commits before the erasure reads what to remove, never in between."""
    backend = core.backend
    backend.set_meta(META_OWNER_ERASURES, str(int(backend.get_meta(META_OWNER_ERASURES) or 0) + 1))


class ErasureMethods:
    """The erasing methods of :class:`~ctxslots.FactStore`."""

    _core: StoreCore

    def delete(self, fact_id: int, *, user: str | None = None, agent: str | None = None,
               scope: str | None = None) -> ErasureReport:
        """Erase one fact, live or archived, with its history, vector, links and context.
        The near-duplicates it hid (:meth:`~ctxslots.FactStore.consolidate`) are shown
        again.

        :param user: With ``agent`` and ``scope``: only a fact these owners see.
        :raises FactNotFoundError: No live or archived fact has this id (that they see).
        """
        fact_id = check_id(fact_id)
        core = self._core
        visible = core.owner_check(Owners(user, agent, scope))
        with core.writer.writing():
            row = core.backend.get(fact_id) or core.backend.get_archived(fact_id)
            if row is None or (visible is not None and not visible.owns(row)):
                raise FactNotFoundError(fact_id)
            erased = core.backend.erase_facts([fact_id])
        self._scrub()
        return ErasureReport.of(f"fact {fact_id}", erased)

    def erase(self, *, user: str | None = None, agent: str | None = None,
              scope: str | None = None) -> ErasureReport:
        """Erase everything one owner holds: every live and archived fact of that user,
        agent or workspace with its history, vectors and links, and (for a user or an
        agent) the flush progress of its conversations. Name exactly one owner.

        Shared facts are not a user's: erasing a user leaves the workspaces' facts,
        erasing a workspace leaves the users' own (a fact of a slot owned by a user
        within a workspace is the user's, and goes with the user).

        :raises InvalidArgumentError: No owner, or more than one, is named.
        :raises InvalidFactError: The owner is malformed.
        """
        named = [(kind, value) for kind, value in (("user", user), ("agent", agent),
                                                   ("scope", scope)) if value is not None]
        if len(named) != 1 or named[0][1] is ANY:
            raise InvalidArgumentError("name exactly one owner to erase: user=, agent= or "
                                       "scope=", field="owner", value=named)
        kind, value = named[0]
        core = self._core
        owner = core.limits.scope(value) if kind == "scope" else core.limits.owner(value, kind)
        with core.writer.writing():
            _count_owner_erasure(core)
            erased = core.backend.erase_facts(core.backend.owned_ids(kind, owner))
            if kind != "scope":
                erased = attrs.evolve(erased, progress=core.backend.erase_progress(kind, owner))
        self._scrub()
        return ErasureReport.of(f"{kind} {owner}", erased)

    def reset(self) -> ErasureReport:
        """Erase every fact of every owner, with history, vectors, links and flush progress;
        the store stays, bound to its embedder."""
        core = self._core
        with core.writer.writing():
            _count_owner_erasure(core)
            erased = core.backend.erase_all()
        self._scrub()
        return ErasureReport.of("everything", erased)

    def owner_erasures(self) -> int:
        """How many erasures of a whole owner (:meth:`erase`, :meth:`reset`) the store has
        recorded, by any process. A flush that began before one and would commit after
        it writes nothing (its conversation's owner may be the one erased)."""
        self._core.check_open()
        return int(self._core.backend.get_meta(META_OWNER_ERASURES) or 0)

    def _scrub(self) -> None:
        # No recent result may name a removed fact: a reinforcement would link to it.
        self._core.recent.clear()
        # Inside a batch the engine empties the log once the batch commits.
        self._core.backend.scrub()
