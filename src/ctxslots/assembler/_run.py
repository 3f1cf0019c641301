"""Calling contributors, plain or async, without letting one break assembly."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from .._sync import run_to_completion
from ..contributors.base import Contributor
from ..model import Section
from ..request import AssemblyRequest

__all__ = ["Outcome", "call_async", "call_sync", "report_failure", "unsaid"]

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


def unsaid(warn: Callable[[], None]) -> None:
    """A teller that says nothing: for a failure that leaves nothing out (a contributor
    asked again whose first answer stands)."""


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


def _timed_out(contributor: Contributor, timeout: float, tell: _Teller = _now) -> Outcome:
    name = getattr(contributor, "name", contributor)
    tell(lambda: logger.warning("contributor %r gave no section within %g s", name, timeout))
    return Outcome(contributor, error=f"TimeoutError: no section within {timeout:g} s")


def call_sync(contributor: Contributor, request: AssemblyRequest,
              timeout: float | None = None, tell: _Teller = _now) -> Outcome:
    """Call ``contributor.contribute(request)``; an async one is run to completion.

    With a ``timeout``, the call runs on a thread of its own, and a contributor that
    has not answered in time is reported as an error: an async one is cancelled there; a
    plain one's thread is left to finish (a thread cannot be stopped), and what it
    returns then is not used. ``tell`` says a failure (a warning): at once by default.
    """
    if timeout is None:
        return _call(contributor, request, tell=tell)
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
                        tell(warn)
                    outcome.append(found)
        answered.set()

    _start(run)
    answered.wait(timeout)
    with lock:
        if outcome:
            return outcome[0]
        given_up.append(True)
    return _timed_out(contributor, timeout, tell)


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
                     timeout: float | None = None, *, here: bool = False) -> Outcome:
    """Await an async contributor, or run a plain one in a worker thread (what it returns
    awaited here); one that has not answered within ``timeout`` seconds is cancelled (a
    plain one, on a thread of its own then, is left to finish) and reported as an
    error. ``here`` (with no ``timeout``): a plain one is called on this thread instead
    (inside a batch this thread has open, where its store calls belong).

    Each contributor's seconds are its own: a plain one's are counted on its thread, so
    an ``async def`` that blocks the loop (a ``time.sleep``, a blocking client) does not
    make it late; that one is late itself when it gives the loop back after its time,
    and its answer is not used.
    """
    if timeout is None:
        return await _call_async(contributor, request, here=here)
    warnings: list[Callable[[], None]] = []
    try:
        outcome = await _call_async(contributor, request, timeout, warnings.append)
    except _Late:
        return _timed_out(contributor, timeout)
    for warn in warnings:  # said only for an answer in time: a late one is said above
        warn()
    return outcome


async def _call_async(contributor: Contributor, request: AssemblyRequest,
                      timeout: float | None = None, tell: _Teller = _now, *,
                      here: bool = False) -> Outcome:
    """:func:`call_async`'s call; :class:`_Late` when ``timeout`` ran out."""
    try:
        if inspect.iscoroutinefunction(contributor.contribute):
            result = await _on_loop(contributor.contribute(request), timeout)
        else:
            took = 0.0
            if here:
                result = contributor.contribute(request)
            elif timeout is None:
                result = await asyncio.to_thread(contributor.contribute, request)
            else:
                result, took = await _on_own_thread(contributor.contribute, request, timeout)
            if inspect.isawaitable(result):
                result = await _on_loop(result, None if timeout is None else timeout - took)
    except _Late:
        raise
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or task.cancelling():  # the assembly (or its timeout) cancels it
            raise
        return _failed(contributor, exc, tell)  # its own: a future it awaited was cancelled
    except Exception as exc:  # noqa: BLE001 - a contributor's failure is reported, not raised
        return _failed(contributor, exc, tell)
    return _checked(contributor, result, tell)


async def _on_loop(awaitable: Awaitable[Any], timeout: float | None) -> Any:
    """``awaitable``'s result, awaited on this loop within ``timeout`` seconds:
    :class:`_Late` after them, or when it gave the loop back only after them (a blocking
    call cannot be cancelled, but its answer is as late)."""
    if timeout is None:
        return await awaitable
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await _within(awaitable, timeout)
    if loop.time() - started > timeout:
        raise _Late
    return result


async def _on_own_thread(function: Callable[[AssemblyRequest], Any],
                         request: AssemblyRequest, timeout: float) -> tuple[Any, float]:
    """``function(request)`` on a thread of its own (see :func:`_start`), awaited, with
    the seconds it took there; :class:`_Late` when it has not returned within
    ``timeout`` seconds of its start there. Its time is counted on its thread, so a loop
    held meanwhile (by an ``async def`` that blocks) does not make it late."""
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()
    lock = threading.Lock()
    in_time: list[tuple[Any, BaseException | None, float]] = []
    given_up: list[bool] = []

    def settle() -> None:
        if not answered.done():  # given up on meanwhile
            answered.set_result(None)

    def run() -> None:
        started = time.monotonic()
        value: Any = None
        error: BaseException | None = None
        try:
            value = function(request)
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - handed on
            error = exc
        took = time.monotonic() - started
        with lock:
            if not given_up and took <= timeout:
                in_time.append((value, error, took))
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle)

    _start(run)
    await asyncio.wait({answered}, timeout=timeout)
    with lock:
        if not in_time:
            given_up.append(True)
            raise _Late
    value, error, took = in_time[0]
    if error is not None:
        raise error
    return value, took
