"""Stores opened before a fork: the child opens connections of its own.

A SQLite connection's locks and a PostgreSQL session belong to the process that opened
them; a forked child using its parent's corrupts what both see (on PostgreSQL the two
read each other's replies). A store counts the forks of its process and, at its first
use in a child, opens the engine again with the options it was given. What the parent
opened is kept, never closed, in the child: closing it there would close the parent's.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["FORK_WAIT_S", "engine_work", "generation", "keep", "let_forks_pass", "reopening"]

#: Longest a fork waits for the stores' own threads to leave their engines: a writer
#: blocked on a lock the forking thread holds (a fork inside an open transaction) would
#: otherwise hold the fork for good; past it the fork goes on as it would have.
FORK_WAIT_S = 10.0

_generation = 0
_lock = threading.Lock()
_kept: list[object] = []
# The stores' own threads inside an engine, and whether a fork waits for them to leave.
_quiet = threading.Condition()
_inside = 0
_forking = False


def generation() -> int:
    """How many forks separate this process from the one that imported this module."""
    return _generation


def reopening() -> threading.Lock:
    """The lock a store holds while it opens its engine again in a child."""
    return _lock


def keep(opened: object) -> None:
    """Hold what the parent opened for as long as the child lives (never closed here)."""
    _kept.append(opened)


@contextlib.contextmanager
def engine_work() -> Iterator[None]:
    """Held by a store's own thread (a background writer) while it works in its engine:
    a fork waits for it to leave, and it waits for a fork under way. A child forked while
    such a thread was inside SQLite inherits the library's locks held by a thread it does
    not have, and hangs at its first open. Never nest it."""
    global _inside
    with _quiet:
        _quiet.wait_for(lambda: not _forking)
        _inside += 1
    try:
        yield
    finally:
        with _quiet:
            _inside -= 1
            _quiet.notify_all()


def let_forks_pass() -> None:
    """Let a fork under way go ahead, from inside :func:`engine_work`, at a point where
    the thread holds nothing of its engine (between two chunks of a long read): the fork
    then waits for one chunk, not for the whole work."""
    global _inside
    with _quiet:
        if not _forking:
            return
        _inside -= 1
        _quiet.notify_all()
        _quiet.wait_for(lambda: not _forking)
        _inside += 1


def _before_fork() -> None:
    global _forking
    with _quiet:
        _forking = True
        _quiet.wait_for(lambda: _inside == 0, FORK_WAIT_S)


def _after_fork_in_parent() -> None:
    global _forking
    with _quiet:
        _forking = False
        _quiet.notify_all()


def _forked() -> None:
    global _generation, _lock, _quiet, _inside, _forking
    _generation += 1
    # A thread of the parent may have held them: the child has one thread, and fresh locks.
    _lock = threading.Lock()
    _quiet, _inside, _forking = threading.Condition(), 0, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_forked)
