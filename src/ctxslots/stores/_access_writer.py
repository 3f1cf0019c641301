"""Access counts written after the fact: a background thread that counts shown facts.

Counting a fact as shown (``access_count + 1``, ``last_accessed = now``)
rewrites its row, and a prompt shows about eighty facts scattered over as
many pages: at 100,000 facts the write is a third of a warm assembly. The
counts matter to pruning and to the user profile's order, not to the prompt
being built. So a store may queue them for :class:`AccessWriter`, a thread
with its own connection that writes everything queued since its last
transaction in one transaction.

What that gives up, and what it keeps:

- A count lands a few milliseconds after the assembly or search that made
  it; a read in between shows the count before it. ``wait`` waits for them.
- A process that dies first loses the counts still queued (at most the last
  few assemblies'). Closing the store, or the interpreter exiting normally,
  writes them.
- Counts of facts deleted or archived meanwhile are ignored, as they are
  when written at once.
"""

from __future__ import annotations

import atexit
import threading
import warnings
import weakref
from collections.abc import Callable

from ..errors import ReadOnlyStoreError
from .backend import Backend

__all__ = ["AccessWriter"]

#: Seconds the interpreter's exit waits for each writer's queue.
EXIT_TIMEOUT = 5.0

_writers: weakref.WeakSet[AccessWriter] = weakref.WeakSet()


@atexit.register
def _write_queued_at_exit() -> None:
    for writer in list(_writers):
        writer.close(EXIT_TIMEOUT)


class AccessWriter:
    """Writes queued access counts on a daemon thread.

    :param open_backend: Opens the writer's own connection to the store.
    """

    def __init__(self, open_backend: Callable[[], Backend]) -> None:
        self._open = open_backend
        self._queue: list[tuple[list[int], float]] = []
        self._busy = False
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        #: Set once the store refused a write: nothing is counted from then on.
        self.read_only = False
        #: The last error a write of counts ended in (its counts were dropped).
        self.failure: BaseException | None = None
        _writers.add(self)

    def put(self, fact_ids: list[int], now: float) -> None:
        """Queue one access of each fact, at ``now``."""
        with self._cond:
            if self._closed or self.read_only:
                return
            self._queue.append((fact_ids, now))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="ctxslots-access")
                self._thread.start()
            self._cond.notify_all()

    @property
    def pending(self) -> int:
        """Accesses queued or being written."""
        with self._cond:
            return sum(len(ids) for ids, _ in self._queue) + int(self._busy)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every queued count is written; whether that happened in time."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (not self._queue and not self._busy) or self._thread is None, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write what is queued (waiting at most ``timeout`` seconds), then stop the thread."""
        self.wait(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        _writers.discard(self)

    def _take(self) -> list[tuple[list[int], float]] | None:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._queue) or self._closed)
            if not self._queue:
                return None
            taken, self._queue = self._queue, []
            self._busy = True
            return taken

    def _done(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def _run(self) -> None:
        backend = None
        try:
            backend = self._open()
            while (taken := self._take()) is not None:
                try:
                    self._write(backend, taken)
                finally:
                    self._done()
        except Exception as exc:  # noqa: BLE001 - counts are bookkeeping: say so once, go on
            self._fail(exc)
        finally:
            if backend is not None:
                backend.close()
            with self._cond:
                self._queue.clear()
                self._thread = None
                self._cond.notify_all()

    def _write(self, backend: Backend, taken: list[tuple[list[int], float]]) -> None:
        try:
            with backend.transaction():
                for fact_ids, now in taken:
                    backend.touch(fact_ids, now)
        except ReadOnlyStoreError as exc:
            self.read_only = True
            message = f"{exc}: searches answer, but accesses are not counted"
            warnings.warn(message, RuntimeWarning, stacklevel=1)
            raise
        except Exception as exc:  # noqa: BLE001 - a busy or failing store loses these counts
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None and not self.read_only:
            message = f"access counts could not be written ({exc}); the facts shown are not counted"
            warnings.warn(message, RuntimeWarning, stacklevel=1)
        self.failure = exc
