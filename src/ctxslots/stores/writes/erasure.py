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

import hashlib
from typing import Any

import attrs

from ...errors import FactNotFoundError, InvalidArgumentError
from ..backend import Erased
from ..core import StoreCore
from ..owners import ANY, Owners
from .writer import check_id

__all__ = ["META_OWNER_ERASURES", "META_OWNER_RESETS", "OWNER_COUNTERS", "ErasureMethods",
           "ErasureReport", "owner_counter"]

#: The ``store_meta`` entry counting the erasures of whole owners (``erase``, ``reset``).
META_OWNER_ERASURES = "owners.erasures"
#: The ``store_meta`` entry counting the erasures of everything (``reset``).
META_OWNER_RESETS = "owners.resets"
#: Each owner's erasure is also counted in one of this many counters per kind of owner,
#: picked by a hash of its name (:func:`owner_counter`): a flush waits for and fails on the
#: erasures of its own owners only (and, by chance, of one owner in this many), not on every
#: other user's, and the store keeps which counter moved, never the name.
OWNER_COUNTERS = 64


def owner_counter(kind: str, owner: str) -> str:
    """The ``store_meta`` entry counting the erasures of ``owner`` (a stored user, agent or
    scope name of that ``kind``), shared with the owners whose names hash alike."""
    digest = hashlib.blake2b(owner.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return f"{META_OWNER_ERASURES}.{kind}.{int.from_bytes(digest, 'big') % OWNER_COUNTERS}"


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


def _count_owner_erasure(core: StoreCore, counter: str) -> None:
    """Count an owner's erasure, in all and in ``counter`` (its owner's, or the resets'),
    inside its write and before it removes anything (no name of the owner is kept). On
    PostgreSQL the counts' locks are then held from the start: a flush of that owner, which
    reads its counters before its progress, waits for the erasure, or commits before the
    erasure reads what to remove, never in between."""
    backend = core.backend
    for name in (META_OWNER_ERASURES, counter):
        backend.set_meta(name, str(int(backend.get_meta(name) or 0) + 1))


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
            _count_owner_erasure(core, owner_counter(kind, owner))
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
            _count_owner_erasure(core, META_OWNER_RESETS)
            erased = core.backend.erase_all()
        self._scrub()
        return ErasureReport.of("everything", erased)

    def owner_erasures(self) -> int:
        """How many erasures of a whole owner (:meth:`erase`, :meth:`reset`) the store has
        recorded, by any process. A flush that began before one and would commit after
        it writes nothing (its conversation's owner may be the one erased)."""
        self._core.check_open()
        return int(self._core.backend.get_meta(META_OWNER_ERASURES) or 0)

    def owner_erasures_of(self, *, user: str | None = None, agent: str | None = None,
                          scope: str | None = None) -> int:
        """How many erasures may have removed memory of these owners, by any process: every
        :meth:`reset`, and each :meth:`erase` of this user, agent or workspace (or of one of
        the few others whose names share its counter). A flush for them that began before
        one and would commit after it writes nothing; erasing anyone else leaves it be.

        :param user: The user (``None``: the store's default user).
        :param agent: The agent (``None``: the store's default agent).
        :param scope: The workspace (``None``: global, which no erasure names).
        :raises InvalidFactError: An owner is malformed.
        """
        core = self._core
        core.check_open()
        limits, writer = core.limits, core.writer
        counters = [META_OWNER_RESETS,
                    owner_counter("user", writer.default_user if user is None
                                  else limits.owner(user, "user")),
                    owner_counter("agent", writer.default_agent if agent is None
                                  else limits.owner(agent, "agent"))]
        if scope is not None:
            counters.append(owner_counter("scope", limits.scope(scope)))
        return sum(int(core.backend.get_meta(name) or 0) for name in counters)

    def _scrub(self) -> None:
        # No recent result may name a removed fact: a reinforcement would link to it.
        self._core.recent.clear()
        # Inside a batch the engine empties the log once the batch commits.
        self._core.backend.scrub()
