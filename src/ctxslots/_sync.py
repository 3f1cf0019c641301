"""Running a coroutine to completion from sync code, inside an event loop's thread or not,
and blocking work off an event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["off_loop", "run_to_completion"]

T = TypeVar("T")


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def run_to_completion(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` and return its result: on a new event loop, or, when called from
    a thread whose loop is running (a notebook cell, sync code called by an async
    handler), on a loop of its own in a worker thread, as ``asyncio.run`` cannot there."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(awaitable))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _await(awaitable)).result()


async def off_loop(call: Callable[[], T], *, here: bool = False) -> T:
    """``call()`` in a worker thread, so the event loop keeps serving; on this thread when
    ``here`` (inside a store's ``batch()`` this thread has open: a worker thread's store
    calls would wait for the batch to end, or land outside it)."""
    return call() if here else await asyncio.to_thread(call)
