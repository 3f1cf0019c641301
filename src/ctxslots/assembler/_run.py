"""Calling contributors, plain or async, without letting one break assembly."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import attrs

from .._sync import run_to_completion
from ..contributors.base import Contributor
from ..model import Section
from ..request import AssemblyRequest

__all__ = ["Outcome", "call_async", "call_sync"]

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


def _checked(contributor: Contributor, result: Any) -> Outcome:
    if result is None or isinstance(result, Section):
        return Outcome(contributor, result)
    return Outcome(contributor, error=(
        f"TypeError: contribute() returned {type(result).__name__}, expected Section or None"
    ))


def _failed(contributor: Contributor, exc: Exception) -> Outcome:
    logger.warning("contributor %r failed", getattr(contributor, "name", contributor),
                   exc_info=exc)
    return Outcome(contributor, error=_error_text(exc))


def call_sync(contributor: Contributor, request: AssemblyRequest) -> Outcome:
    """Call ``contributor.contribute(request)``; an async one is run to completion."""
    try:
        result = contributor.contribute(request)
        if inspect.isawaitable(result):
            result = run_to_completion(result)
    except Exception as exc:  # noqa: BLE001 - a contributor's failure is reported, not raised
        return _failed(contributor, exc)
    return _checked(contributor, result)


async def call_async(contributor: Contributor, request: AssemblyRequest) -> Outcome:
    """Await an async contributor, or run a plain one in a worker thread."""
    try:
        if inspect.iscoroutinefunction(contributor.contribute):
            result = await contributor.contribute(request)
        else:
            result = await asyncio.to_thread(contributor.contribute, request)
            if inspect.isawaitable(result):
                result = await result
    except Exception as exc:  # noqa: BLE001 - a contributor's failure is reported, not raised
        return _failed(contributor, exc)
    return _checked(contributor, result)
