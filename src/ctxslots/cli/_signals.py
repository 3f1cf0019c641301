"""How the command stops on a signal: Ctrl-C (SIGINT) and SIGTERM end it the same way.

Python raises ``KeyboardInterrupt`` for Ctrl-C, so a write in progress is rolled
back, servers stop listening, stores close and the interpreter's exit writes
the vectors still queued. SIGTERM (``kill``, systemd, a container stopping, an
MCP host shutting its server down) would otherwise end the process at once, with
none of that and no line said; :func:`sigterm_as_interrupt` makes it raise
:class:`Terminated`, a ``KeyboardInterrupt``, so it takes the same way out. Inside
``asyncio.run`` (the MCP server over stdio), which answers Ctrl-C by cancelling its
main task and raising ``KeyboardInterrupt`` once that ended, SIGTERM is answered that
way too: raised in whichever task ran, it left the loop half-way, and asyncio's
shutdown printed a traceback of the task it failed.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click

__all__ = ["Interrupted", "Stopped", "Terminated", "interrupted", "sigterm_as_interrupt"]


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: raised where Ctrl-C's ``KeyboardInterrupt`` would be."""


class Interrupted(click.ClickException):
    """A command Ctrl-C stopped: one line, and exit status 130, as a shell reports SIGINT."""

    exit_code = 128 + signal.SIGINT


class Stopped(Interrupted):
    """A command SIGTERM stopped: one line, and exit status 143, as a shell reports it."""

    exit_code = 128 + signal.SIGTERM


def interrupted(exc: KeyboardInterrupt, what: str = "") -> Interrupted:
    """The one line and exit status for a command ``exc`` stopped; ``what`` says what
    became of its work (``"nothing was imported"``)."""
    if isinstance(exc, Terminated) or _received.is_set():
        return Stopped(f"stopped (SIGTERM): {what}" if what else "stopped (SIGTERM)")
    return Interrupted(f"interrupted: {what}" if what else "interrupted (Ctrl-C)")


#: Set when SIGTERM arrived inside ``asyncio.run``, whose ``KeyboardInterrupt`` then says
#: nothing of it (only while :func:`sigterm_as_interrupt` is open).
_received = threading.Event()


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    on_sigint = signal.getsignal(signal.SIGINT)
    if isinstance(on_sigint, functools.partial) \
            and isinstance(getattr(on_sigint.func, "__self__", None), asyncio.Runner):
        _received.set()
        on_sigint(signal.SIGINT, frame)  # cancels the main task (a second: raises at once)
        return
    raise Terminated()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` in the main thread.

    Left as it is where a handler is already set (a program running the command
    chose its own) or off the main thread (where Python cannot set one).
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    _received.clear()
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _received.clear()
