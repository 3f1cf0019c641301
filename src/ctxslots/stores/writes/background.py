"""A daemon thread with its own connection that writes, batch by batch, what a store queued.

The store's vectors (:mod:`._vector_writer`) and its access counts
(:mod:`._access_writer`) are both written this way: the call that queued the
work returns at once, the thread takes everything queued since its last
batch, and ``wait`` and ``close`` let the store wait for the queue to empty.
Subclasses say what a queue holds, how a batch is taken from it, and how a
batch is written. The interpreter's normal exit writes what every writer still
has queued (waiting at most :data:`EXIT_TIMEOUT` seconds for each), whether or
not its store was closed.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .._forks import engine_work
from ..backend import Backend

__all__ = ["EXIT_TIMEOUT", "BackgroundWriter"]

#: Seconds the interpreter's exit waits for each writer's queue.
EXIT_TIMEOUT = 5.0

_writers: weakref.WeakSet[BackgroundWriter] = weakref.WeakSet()


@atexit.register
def _write_queued_at_exit() -> None:
    for writer in list(_writers):
        writer.close(EXIT_TIMEOUT)


if hasattr(os, "register_at_fork"):
    # A forked child's writers are the parent's, whose threads it lacks: the parent writes
    # their queues, and a store used in the child opens writers of its own.
    os.register_at_fork(after_in_child=_writers.clear)


class BackgroundWriter:
    """Writes queued work on a daemon thread, started at the first queued item.

    :param open_backend: Opens the thread's own connection to the store.
    """

    #: The thread's name.
    thread_name = "ctxslots-writer"

    def __init__(self, open_backend: Callable[[], Backend]) -> None:
        self._open = open_backend
        self._busy = 0
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        _writers.add(self)

    # -- what subclasses define ----------------------------------------------

    def _queued(self) -> int:
        """How many items wait in the queue (called holding the lock)."""
        raise NotImplementedError

    def _take_batch(self) -> tuple[Any, int]:
        """The next batch, taken out of the queue, and its size (holding the lock)."""
        raise NotImplementedError

    def _clear(self) -> None:
        """Drop what is queued (holding the lock; the thread has stopped)."""
        raise NotImplementedError

    def _write(self, backend: Backend, batch: Any) -> None:
        """Write one batch through the thread's connection."""
        raise NotImplementedError

    def _failed(self, exc: Exception) -> None:
        """The thread stops on ``exc`` (its connection failed, or a batch that cannot be
        dropped did); what is queued is dropped."""
        raise NotImplementedError

    # -- the queue -------------------------------------------------------------

    def _enqueue(self, add: Callable[[], None]) -> bool:
        """Run ``add`` (which puts items in the queue) under the lock and wake the
        thread, starting it if needed; False, without calling ``add``, once closed."""
        with self._cond:
            if self._closed:
                return False
            add()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=self.thread_name)
                self._thread.start()
            self._cond.notify_all()
            return True

    @property
    def pending(self) -> int:
        """Items queued or being written."""
        with self._cond:
            return self._queued() + self._busy

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until everything queued is written; whether that happened in time."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (not self._queued() and not self._busy) or self._thread is None, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write what is queued, then stop the thread, waiting at most ``timeout`` seconds
        in all (a thread still writing then is left to end on its own); what is left then
        is dropped."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wait(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        _writers.discard(self)

    def stop(self) -> None:
        """Let the thread write what is queued, then end with its connection, without
        waiting for it (its store was dropped unclosed); nothing more is queued."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _take(self) -> Any | None:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._queued()) or self._closed)
            if not self._queued():
                return None
            batch, self._busy = self._take_batch()
            return batch

    def _done(self) -> None:
        with self._cond:
            self._busy = 0
            self._cond.notify_all()

    def _run(self) -> None:
        backend = None
        try:
            with engine_work():  # a fork waits while this thread is in the engine
                backend = self._open()
            while (batch := self._take()) is not None:
                try:
                    with engine_work():
                        self._write(backend, batch)
                finally:
                    self._done()
        except Exception as exc:  # noqa: BLE001 - reported by the subclass; the store goes on
            self._failed(exc)
        finally:
            if backend is not None:
                with engine_work():
                    backend.close()
            with self._cond:
                self._clear()
                self._thread = None
                self._cond.notify_all()
