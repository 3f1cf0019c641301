"""Stores opened before a fork: the child opens connections of its own.

A SQLite connection's locks and a PostgreSQL session belong to the process that opened
them; a forked child using its parent's corrupts what both see (on PostgreSQL the two
read each other's replies). A store counts the forks of its process and, at its first
use in a child, opens the engine again with the options it was given. What the parent
opened is kept, never closed, in the child: closing it there would close the parent's.
"""

from __future__ import annotations

import os
import threading

__all__ = ["generation", "keep", "reopening"]

_generation = 0
_lock = threading.Lock()
_kept: list[object] = []


def generation() -> int:
    """How many forks separate this process from the one that imported this module."""
    return _generation


def reopening() -> threading.Lock:
    """The lock a store holds while it opens its engine again in a child."""
    return _lock


def keep(opened: object) -> None:
    """Hold what the parent opened for as long as the child lives (never closed here)."""
    _kept.append(opened)


def _forked() -> None:
    global _generation, _lock
    _generation += 1
    # A thread of the parent may have held it: the child has one thread, and a fresh lock.
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
