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

import warnings
from collections.abc import Callable

from ...errors import ReadOnlyStoreError
from ..backend import Backend
from .background import BackgroundWriter

__all__ = ["AccessWriter"]

class AccessWriter(BackgroundWriter):
    """Writes queued access counts on a daemon thread.

    :param open_backend: Opens the writer's own connection to the store.
    """

    thread_name = "ctxslots-access"

    def __init__(self, open_backend: Callable[[], Backend]) -> None:
        super().__init__(open_backend)
        self._queue: list[tuple[list[int], float]] = []
        #: Set once the store refused a write: nothing is counted from then on.
        self.read_only = False
        #: The last error a write of counts ended in (its counts were dropped).
        self.failure: BaseException | None = None

    def put(self, fact_ids: list[int], now: float) -> None:
        """Queue one access of each fact, at ``now`` (nothing once the store refused a write)."""
        if not self.read_only:
            self._enqueue(lambda: self._queue.append((fact_ids, now)))

    def _queued(self) -> int:
        return sum(len(ids) for ids, _ in self._queue)

    def _take_batch(self) -> tuple[list[tuple[list[int], float]], int]:
        taken, self._queue = self._queue, []
        return taken, sum(len(ids) for ids, _ in taken)

    def _clear(self) -> None:
        self._queue.clear()

    def _write(self, backend: Backend, taken: list[tuple[list[int], float]]) -> None:
        try:
            with backend.transaction():
                for fact_ids, now in taken:
                    # A count may be put off: on PostgreSQL a row a writer holds is
                    # skipped, not waited for (nor deadlocked with).
                    backend.touch(fact_ids, now, wait=0.0)
        except ReadOnlyStoreError as exc:
            # Counts queued before the first refusal was seen are refused too: said once.
            if not self.read_only:
                self.read_only = True
                message = f"{exc}: searches answer, but accesses are not counted"
                warnings.warn(message, RuntimeWarning, stacklevel=1)
            raise
        except Exception as exc:  # noqa: BLE001 - a busy or failing store loses these counts
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if self.failure is None and not self.read_only:
            message = f"access counts could not be written ({exc}); the facts shown are not counted"
            warnings.warn(message, RuntimeWarning, stacklevel=1)
        self.failure = exc
