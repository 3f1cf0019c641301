"""The async face of :class:`~ctxslots.FactStore`: each call in a worker thread.

The event loop keeps serving while the engine and the embedder work. The
methods take the same arguments as their blocking twins.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from ..model import Fact, Hit

__all__ = ["AsyncMethods"]


class AsyncMethods:
    """``asearch``, ``aadd``, ``aupsert``, ``aupdate`` and ``aforget`` over the blocking methods."""

    # The blocking methods this mixin runs (defined by the store).
    search: Any
    add: Any
    upsert: Any
    update: Any
    forget: Any

    async def asearch(self, query: str, **options: Any) -> list[Hit]:
        """:meth:`search` for async agent loops: runs in a worker thread, so the
        event loop keeps serving while the engine and the embedder work."""
        return list(await asyncio.to_thread(functools.partial(self.search, query, **options)))

    async def aadd(self, slot: str, value: str, **options: Any) -> Fact:
        """:meth:`add` in a worker thread."""
        fact: Fact = await asyncio.to_thread(functools.partial(self.add, slot, value, **options))
        return fact

    async def aupsert(self, slot: str, key: str, value: str, **options: Any) -> Fact:
        """:meth:`upsert` in a worker thread."""
        fact: Fact = await asyncio.to_thread(
            functools.partial(self.upsert, slot, key, value, **options))
        return fact

    async def aupdate(self, fact_id: int, **options: Any) -> Fact:
        """:meth:`update` in a worker thread."""
        fact: Fact = await asyncio.to_thread(functools.partial(self.update, fact_id, **options))
        return fact

    async def aforget(self, fact_id: int, *, reason: str | None = None,
                      user: str | None = None, agent: str | None = None,
                      scope: str | None = None) -> Fact:
        """:meth:`forget` in a worker thread (its owners too: only a fact they see)."""
        fact: Fact = await asyncio.to_thread(functools.partial(
            self.forget, fact_id, reason=reason, user=user, agent=agent, scope=scope))
        return fact
