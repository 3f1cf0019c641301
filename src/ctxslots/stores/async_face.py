"""The async face of :class:`~ctxslots.FactStore`: each call in a worker thread.

The event loop keeps serving while the engine and the embedder work. The
methods take the same arguments as their blocking twins, spelled out so a type
checker sees them. Inside a :meth:`~ctxslots.FactStore.batch` the calling
thread has open, a call runs on that thread instead, as part of the batch: in a
worker thread it waited for the batch to end, which waited for it (for ever on
SQLite; on PostgreSQL a write waited for a lock the batch held, or landed outside
the batch). Only the code that opened the batch is in it: another task of the same
event loop, run while that one awaits inside its batch, still works in a worker
thread (its writes are no part of the batch, nor rolled back with it).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._sync import off_loop
from ..model import Fact, Hit
from .rerank import Boost

if TYPE_CHECKING:
    from .core import StoreCore

__all__ = ["AsyncMethods"]

T = TypeVar("T")


class AsyncMethods:
    """``asearch``, ``aadd``, ``aupsert``, ``aupdate`` and ``aforget`` over the blocking methods."""

    # The blocking methods this mixin runs (defined by the store).
    search: Any
    add: Any
    upsert: Any
    update: Any
    forget: Any
    _core: StoreCore

    async def _off_loop(self, call: Callable[[], T]) -> T:
        """``call()`` in a worker thread, or here when this thread has a batch open."""
        return await off_loop(call, here=self._core.writer.opened_here)

    async def asearch(self, query: str, *, slots: Sequence[str] | None = None,
                      scope: str | None = None, user: str | None = None,
                      agent: str | None = None, limit: int = 10, include_archive: bool = False,
                      track_access: bool = True, boost: Boost | None = None,
                      include_superseded: bool = False, now: dt.datetime | float | None = None,
                      tags: Iterable[str] | str = (), source: str | None = None,
                      said_after: dt.datetime | float | None = None,
                      said_before: dt.datetime | float | None = None,
                      relaxed: bool = False) -> list[Hit]:
        """:meth:`search` for async agent loops: runs in a worker thread, so the
        event loop keeps serving while the engine and the embedder work (inside a
        :meth:`batch` this thread has open, here, as part of it)."""
        return list(await self._off_loop(functools.partial(
            self.search, query, slots=slots, scope=scope, user=user, agent=agent, limit=limit,
            include_archive=include_archive, track_access=track_access, boost=boost,
            include_superseded=include_superseded, now=now, tags=tags, source=source,
            said_after=said_after, said_before=said_before, relaxed=relaxed)))

    async def aadd(self, slot: str, value: str, *, scope: str | None = None,
                   user: str | None = None, agent: str | None = None, tags: Iterable[str] = (),
                   confidence: float = 1.0, source: str | None = None,
                   expires_at: dt.datetime | float | None = None,
                   observed_at: dt.datetime | float | None = None,
                   context: str | None = None) -> Fact:
        """:meth:`add` in a worker thread."""
        fact: Fact = await self._off_loop(functools.partial(
            self.add, slot, value, scope=scope, user=user, agent=agent, tags=tags,
            confidence=confidence, source=source, expires_at=expires_at,
            observed_at=observed_at, context=context))
        return fact

    async def aupsert(self, slot: str, key: str, value: str, *, scope: str | None = None,
                      user: str | None = None, agent: str | None = None,
                      tags: Iterable[str] | None = (), confidence: float = 1.0,
                      source: str | None = None, expires_at: dt.datetime | float | None = None,
                      observed_at: dt.datetime | float | None = None,
                      context: str | None = None) -> Fact:
        """:meth:`upsert` in a worker thread."""
        fact: Fact = await self._off_loop(functools.partial(
            self.upsert, slot, key, value, scope=scope, user=user, agent=agent, tags=tags,
            confidence=confidence, source=source, expires_at=expires_at,
            observed_at=observed_at, context=context))
        return fact

    async def aupdate(self, fact_id: int, *, value: str | None = None,
                      tags: Iterable[str] | None = None, confidence: float | None = None,
                      source: str | None = None, context: str | None = None,
                      user: str | None = None, agent: str | None = None,
                      scope: str | None = None) -> Fact:
        """:meth:`update` in a worker thread."""
        fact: Fact = await self._off_loop(functools.partial(
            self.update, fact_id, value=value, tags=tags, confidence=confidence, source=source,
            context=context, user=user, agent=agent, scope=scope))
        return fact

    async def aforget(self, fact_id: int, *, reason: str | None = None,
                      user: str | None = None, agent: str | None = None,
                      scope: str | None = None) -> Fact:
        """:meth:`forget` in a worker thread (its owners too: only a fact they see)."""
        fact: Fact = await self._off_loop(functools.partial(
            self.forget, fact_id, reason=reason, user=user, agent=agent, scope=scope))
        return fact
