"""The writing methods of :class:`~ctxslots.FactStore`: upsert, add, update, forget, scores.

Each write names its fact's owners (``user``, ``agent``, ``scope``) as far as its
slot has them: a user fact belongs to a user (the store's default user when
none is named), a project fact to a workspace, an agent fact to an agent and
optionally a workspace. An owner the slot does not have is refused. A fact
reached by id is found whoever owns it, unless owners are named: then a fact
they do not see is not found (the agent tools and the MCP server always name them).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator

from ...model import Fact
from ..core import StoreCore
from ..owners import Owners
from .writer import Written, check_id, check_ids

__all__ = ["WriteMethods"]


class WriteMethods:
    """The writing methods of :class:`~ctxslots.FactStore`."""

    _core: StoreCore

    def upsert(self, slot: str, key: str, value: str, *, scope: str | None = None,
               user: str | None = None, agent: str | None = None,
               tags: Iterable[str] | None = (), confidence: float = 1.0,
               source: str | None = None, expires_at: dt.datetime | float | None = None,
               observed_at: dt.datetime | float | None = None,
               context: str | None = None) -> Fact:
        """Write a keyed fact; a fact with the same slot, owners and key is replaced.

        The replaced value is kept in history (see :meth:`history`). Writing the
        same value again refreshes its metadata and ``updated_at`` without a
        history entry. Reinforcement score and access counts carry over.

        :param scope: The workspace (slots ``project``, ``agent``; ``None``: global).
        :param user: The user (slot ``user``; ``None``: the store's default user).
        :param agent: The agent (slot ``agent``; ``None``: the store's default agent).
        :param tags: The fact's tags, replacing the stored ones; ``None`` keeps those
            of a fact already stored under the key (a new fact gets none).
        :param observed_at: When the fact was said or observed (a datetime or
            Unix seconds; default: now). Decay and ages count from it.
        :param context: Words that make the fact findable without being part of
            it (see :meth:`add`). Without one, a fact written again with the same
            value keeps its context; a new value drops it.
        :raises InvalidFactError: A field is malformed or over its limit, or an
            owner is named that the slot does not have; nothing is written.
        """
        return self._core.writer.upsert(slot, key, value, owners=Owners(user, agent, scope),
                                        tags=tags, confidence=confidence, source=source,
                                        expires_at=expires_at, observed_at=observed_at,
                                        context=context).fact

    def add(self, slot: str, value: str, *, scope: str | None = None, user: str | None = None,
            agent: str | None = None, tags: Iterable[str] = (), confidence: float = 1.0,
            source: str | None = None, expires_at: dt.datetime | float | None = None,
            observed_at: dt.datetime | float | None = None,
            context: str | None = None) -> Fact:
        """Write a free-form memory (a fact without a key).

        An identical live memory of the same slot and owners is returned instead
        of writing a copy (:meth:`find_memory` tells beforehand). When it was hidden
        behind a near-duplicate that is no longer live (forgotten or expired, see
        :meth:`consolidate`), it is shown again: it was just said again.

        :param scope: The workspace (slots ``project``, ``agent``; ``None``: global).
        :param user: The user (slot ``user``; ``None``: the store's default user).
        :param agent: The agent (slot ``agent``; ``None``: the store's default agent).
        :param observed_at: When the memory was said or observed (a datetime or
            Unix seconds; default: now).
        :param context: Words that make the memory findable without being part
            of it: the message it answers, the turns before it ("It was Ilse
            Varga" is found by "Who did the user meet?" when its context is
            that question). Searched by words at half the weight of the memory's
            own (:data:`~ctxslots.stores.backend.CONTEXT_WEIGHT`), never
            embedded and never shown in a prompt; exported and imported with the
            memory. At most ``limits.max_context_bytes``; blank is none.
        :raises InvalidFactError: A field is malformed or over its limit, or an
            owner is named that the slot does not have; nothing is written.
        """
        return self._core.writer.add(slot, value, owners=Owners(user, agent, scope), tags=tags,
                                     confidence=confidence, source=source,
                                     expires_at=expires_at, observed_at=observed_at,
                                     context=context).fact

    def write(self, slot: str, value: str, *, key: str | None = None,
              scope: str | None = None, user: str | None = None, agent: str | None = None,
              tags: Iterable[str] | None = None, confidence: float = 1.0,
              source: str | None = None, expires_at: dt.datetime | float | None = None,
              observed_at: dt.datetime | float | None = None,
              context: str | None = None) -> Written:
        """Write a fact as :meth:`upsert` (with ``key``) or :meth:`add` (without) does, and
        tell what the write did, decided inside its own transaction: another writer
        storing the same key or memory at once is never missed.

        ``written.change`` is ``"inserted"`` (a new fact), ``"replaced"`` (a keyed fact
        got a new value), ``"updated"`` (the same value, other tags, context, source,
        confidence or expiry; for a free memory, the identical one already stored,
        hidden behind a near-duplicate since forgotten or expired, shown again) or
        ``"kept"`` (nothing it holds changed, though its time of observation may have;
        for a free memory, the identical one already stored, returned as it is).
        ``tags=None`` keeps a keyed fact's stored tags (a new fact gets none). The other
        arguments are :meth:`upsert`'s.

        :raises InvalidFactError: A field is malformed or over its limit, or an owner is
            named that the slot does not have; nothing is written.
        """
        owners = Owners(user, agent, scope)
        writer = self._core.writer
        if key is not None:
            return writer.upsert(slot, key, value, owners=owners, tags=tags,
                                 confidence=confidence, source=source, expires_at=expires_at,
                                 observed_at=observed_at, context=context)
        return writer.add(slot, value, owners=owners, tags=() if tags is None else tags,
                          confidence=confidence, source=source, expires_at=expires_at,
                          observed_at=observed_at, context=context)

    def update(self, fact_id: int, *, value: str | None = None,
               tags: Iterable[str] | None = None, confidence: float | None = None,
               source: str | None = None, context: str | None = None,
               user: str | None = None, agent: str | None = None, scope: str | None = None
               ) -> Fact:
        """Change some fields of a live fact by id; ``None`` keeps a field as it is
        (``context=""`` removes the context). Its slot and owners stay.

        Works for keyed facts and free memories alike. A changed value or tag
        list keeps the old one in :meth:`history`, as :meth:`upsert` does.

        :param user: With ``agent`` and ``scope``: only a fact these owners see.
        :raises FactNotFoundError: No live fact has this id (that they see).
        :raises InvalidFactError: A field is malformed or over its limit; nothing
            is written.
        """
        return self._core.writer.update(fact_id, value=value, tags=tags, confidence=confidence,
                                        source=source, context=context,
                                        visible=self._core.owner_check(Owners(user, agent, scope)))

    def forget(self, fact_id: int, *, reason: str | None = None, user: str | None = None,
               agent: str | None = None, scope: str | None = None) -> Fact:
        """Move a fact to the archive, where ``search(include_archive=True)`` finds it.

        :param reason: Why, kept with the archived fact (at most 1,000 characters).
        :param user: With ``agent`` and ``scope``: only a fact these owners see.
        :raises FactNotFoundError: No live fact has this id (that they see).
        :raises InvalidFactError: ``reason`` is not text of at most 1,000 characters.
        """
        return self._core.writer.forget(
            fact_id, reason=reason, visible=self._core.owner_check(Owners(user, agent, scope)))

    def reinforce(self, fact_id: int, amount: float = 3.0, *, user: str | None = None,
                  agent: str | None = None, scope: str | None = None) -> Fact:
        """Add ``amount`` (default 3) to a fact's reinforcement score.

        The facts this store's recent searches for the same user and agent
        returned together with it get a stronger co-recall link to it (see
        :mod:`ctxslots.stores.links`).

        :param user: With ``agent`` and ``scope``: only a fact these owners see.
        :raises FactNotFoundError: No live fact has this id (that they see).
        :raises InvalidFactError: ``amount`` is not a number from 0 to 1,000.
        """
        core = self._core
        step = core.limits.score_step(amount)
        users, agents, _ = core.sees(Owners(user, agent, scope))
        partners = core.recent.partners((users, agents), check_id(fact_id))
        return core.writer.adjust_score(fact_id, step, partners,
                                        core.owner_check(Owners(user, agent, scope)))

    def demote(self, fact_id: int, amount: float = 1.0, *, user: str | None = None,
               agent: str | None = None, scope: str | None = None) -> Fact:
        """Take ``amount`` (default 1) from a fact's reinforcement score.

        :param user: With ``agent`` and ``scope``: only a fact these owners see.
        :raises FactNotFoundError: No live fact has this id (that they see).
        :raises InvalidFactError: ``amount`` is not a number from 0 to 1,000.
        """
        step = self._core.limits.score_step(amount)
        return self._core.writer.adjust_score(
            fact_id, -step, (), self._core.owner_check(Owners(user, agent, scope)))

    def touch(self, fact_ids: Iterable[int]) -> int:
        """Count these facts as shown to a model: ``access_count + 1``, ``last_accessed = now``.

        For callers that search with ``track_access=False`` and show only some
        hits (the prompt assembler counts the facts that made it into the
        prompt). Ids of missing or archived facts are ignored; returns how many
        facts were counted, or, when counts are written in the background
        (``access_writes``), how many distinct ids were queued.

        :raises InvalidFactError: ``fact_ids`` is no collection of ids, or an id is not
            an integer.
        """
        ids = check_ids(fact_ids)
        return self._core.writer.touch(ids, self._core.clock()) if ids else 0

    @contextlib.contextmanager
    def counts_together(self) -> Iterator[None]:
        """Count what :meth:`touch` is given inside as one write, at the end.

        ::

            with store.counts_together():
                store.touch(shown_by_one_section)
                store.touch(shown_by_another)    # one transaction for both

        Each ``touch`` inside (on this thread; searches' own counts too) returns how
        many distinct ids it gathered; the counts are written when the block ends,
        in one transaction (or one entry for the background writer of
        ``access_writes``), even when the block raises. Nested blocks join the
        outermost. The prompt assembler counts its sections' facts this way.

        :raises StoreError: The write at the end failed (the block itself went well).
        """
        self._core.check_open()
        with self._core.writer.counts_together():
            yield
