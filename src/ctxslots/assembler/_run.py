"""Calling contributors, plain or async, without letting one break assembly."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from .._sync import run_to_completion
from ..contributors.base import Contributor
from ..model import Section
from ..request import AssemblyRequest

__all__ = ["Outcome", "call_async", "call_sync", "report_failure"]

logger = logging.getLogger("ctxslots.assembler")


@attrs.frozen
class Outcome:
    """What one contributor gave: a section, nothing, or an error.

    Attributes:
        contributor: The contributor.
        section: Its section, or ``None``.
        error: ``"Type: message"`` when it raised or returned something else.
    """

    contributor: Contributor
    section: Section | None = None
    error: str | None = None


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def report_failure(name: str, error: str) -> None:
    """Log that contributor ``name``'s section was left out, and why (``"Type: message"``):
    one warning per failed section, as for a contributor that raised."""
    logger.warning("contributor %r failed: %s", name, error)


#: Says a failure (calls the warning it is given) now, or later, or not at all.
_Teller = Callable[[Callable[[], None]], None]


def _now(warn: Callable[[], None]) -> None:
    warn()


def _checked(contributor: Contributor, result: Any, tell: _Teller = _now) -> Outcome:
    if result is None or isinstance(result, Section):
        return Outcome(contributor, result)
    error = f"TypeError: contribute() returned {type(result).__name__}, expected Section or None"
    tell(lambda: report_failure(contributor.name, error))
    return Outcome(contributor, error=error)


def _failed(contributor: Contributor, exc: BaseException, tell: _Teller = _now) -> Outcome:
    tell(lambda: logger.warning("contributor %r failed", getattr(contributor, "name", contributor),
                                exc_info=exc))
    return Outcome(contributor, error=_error_text(exc))


def _timed_out(contributor: Contributor, timeout: float) -> Outcome:
    name = getattr(contributor, "name", contributor)
    logger.warning("contributor %r gave no section within %g s", name, timeout)
    return Outcome(contributor, error=f"TimeoutError: no section within {timeout:g} s")


def call_sync(contributor: Contributor, request: AssemblyRequest,
              timeout: float | None = None) -> Outcome:
    """Call ``contributor.contribute(request)``; an async one is run to completion.

    With a ``timeout``, the call runs on a thread of its own, and a contributor that
    has not answered in time is reported as an error: an async one is cancelled there; a
    plain one's thread is left to finish (a thread cannot be stopped), and what it
    returns then is not used.
    """
    if timeout is None:
        return _call(contributor, request)
    answered, lock = threading.Event(), threading.Lock()
    outcome: list[Outcome] = []
    given_up: list[bool] = []

    def run() -> None:
        warnings: list[Callable[[], None]] = []
        with contextlib.suppress(_Late):  # reported below, once, whichever ran out first
            found = _call(contributor, request, timeout, warnings.append)
            with lock:  # an answer come too late is not used, nor said
                if not given_up:
                    for warn in warnings:
                        warn()
                    outcome.append(found)
        answered.set()

    _start(run)
    answered.wait(timeout)
    with lock:
        if outcome:
            return outcome[0]
        given_up.append(True)
    return _timed_out(contributor, timeout)


def _start(work: Callable[[], None]) -> None:
    """Run ``work`` on a daemon thread of its own, in the caller's context. Not a pool's
    thread: one that hangs would hold the pool (and ``asyncio.run``'s exit)."""
    context = contextvars.copy_context()
    threading.Thread(target=lambda: context.run(work), daemon=True,
                     name="ctxslots-contributor").start()


class _Late(Exception):
    """An awaitable given ``timeout`` seconds on a contributor's own thread ran out of them
    (the caller, waiting as long, reports it)."""


def _call(contributor: Contributor, request: AssemblyRequest,
          timeout: float | None = None, tell: _Teller = _now) -> Outcome:
    try:
        result = contributor.contribute(request)
        if inspect.isawaitable(result):
            result = run_to_completion(_within(result, timeout))
    except _Late:
        raise
    # A CancelledError here is the contributor's own (a future it awaited was cancelled):
    # nothing cancels a plain call, and a timeout's cancel is a _Late.
    except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - reported, not raised
        return _failed(contributor, exc, tell)
    return _checked(contributor, result, tell)


async def _within(awaitable: Awaitable[Any], timeout: float | None) -> Any:
    """``awaitable``'s result; cancelled after ``timeout`` seconds (then :class:`_Late`; a
    TimeoutError of the contributor's own passes as it is)."""
    try:
        async with asyncio.timeout(timeout) as limit:
            return await awaitable
    except TimeoutError:
        if limit.expired():
            raise _Late from None
        raise


async def call_async(contributor: Contributor, request: AssemblyRequest,
                     timeout: float | None = None) -> Outcome:
    """Await an async contributor, or run a plain one in a worker thread (what it returns
    awaited here); one that has not answered within ``timeout`` seconds is cancelled (a
    plain one, on a thread of its own then, is left to finish) and reported as an
    error."""
    if timeout is None:
        return await _call_async(contributor, request, asyncio.to_thread)
    try:
        return await asyncio.wait_for(_call_async(contributor, request, _on_own_thread),
                                      timeout)
    except TimeoutError:  # the contributor's own errors are outcomes, never raised here
        return _timed_out(contributor, timeout)


async def _call_async(contributor: Contributor, request: AssemblyRequest,
                      on_thread: Callable[..., Awaitable[Any]]) -> Outcome:
    try:
        if inspect.iscoroutinefunction(contributor.contribute):
            result = await contributor.contribute(request)
        else:
            result = await on_thread(contributor.contribute, request)
            if inspect.isawaitable(result):
                result = await result
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or task.cancelling():  # the assembly (or its timeout) cancels it
            raise
        return _failed(contributor, exc)  # its own: a future it awaited was cancelled
    except Exception as exc:  # noqa: BLE001 - a contributor's failure is reported, not raised
        return _failed(contributor, exc)
    return _checked(contributor, result)


async def _on_own_thread(function: Callable[[AssemblyRequest], Any],
                         request: AssemblyRequest) -> Any:
    """``function(request)`` on a thread of its own (see :func:`_start`), awaited."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: Exception | None) -> None:
        if answer.done():  # given up on meanwhile
            return
        if error is None:
            answer.set_result(value)
        else:
            answer.set_exception(error)

    def run() -> None:
        value, error = None, None
        try:
            value = function(request)
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, value, error)

    _start(run)
    return await answer
