"""Vectors written after the fact: a background thread that embeds what was just written.

With a real model, embedding is most of what a write costs, and a model
embeds a batch of texts far faster per text than one text at a time. So a
store may write each fact at once (durable and findable by its words when
``add`` returns) and leave its vector to :class:`VectorWriter`: a thread with
its own connection to the store that takes every fact queued since its last
batch, reads the current values, embeds them together and writes their
vectors in one transaction. One-at-a-time writes thus end up embedded in
batches. A search of the same store waits for the queue to empty before its
vector leg, so it never misses a vector its own writes are owed; a process
that dies first leaves facts without vectors, which ``doctor`` reports and
``reindex`` repairs.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from .backend import Backend, FactFilter

__all__ = ["VectorWriter"]

#: Most facts embedded in one batch.
MAX_BATCH = 64


class VectorWriter:
    """Embeds queued facts on a daemon thread and writes their vectors.

    :param open_backend: Opens the writer's own connection to the store.
    :param embed: ``embed(texts) -> vectors``.
    """

    def __init__(self, open_backend: Callable[[], Backend], embed: Callable[[list[str]], Any]
                 ) -> None:
        self._open = open_backend
        self._embed = embed
        self._queue: dict[int, None] = {}
        self._busy = 0
        self._cond = threading.Condition()
        self._closed = False
        self.failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def put(self, fact_ids: Iterable[int]) -> None:
        """Queue facts whose value changed in a committed transaction."""
        with self._cond:
            for fact_id in fact_ids:
                self._queue[fact_id] = None
            self._start()

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="ctxslots-vectors")
            self._thread.start()
        self._cond.notify_all()

    @property
    def pending(self) -> int:
        """Facts queued or being embedded."""
        with self._cond:
            return len(self._queue) + self._busy

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every queued fact has its vector; whether that happened in time."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (not self._queue and not self._busy) or self._thread is None,
                timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write everything queued, then stop the thread.

        :param timeout: Give up waiting after this many seconds (``None``: wait
            until the queue is written or the writer fails); what is left then
            has no vector, which ``doctor`` reports and ``reindex`` repairs.
        """
        self.wait(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _take(self) -> list[int] | None:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._queue) or self._closed)
            if not self._queue:
                return None
            ids = list(self._queue)[:MAX_BATCH]
            for fact_id in ids:
                del self._queue[fact_id]
            self._busy = len(ids)
            return ids

    def _done(self) -> None:
        with self._cond:
            self._busy = 0
            self._cond.notify_all()

    def _run(self) -> None:
        backend = None
        try:
            backend = self._open()
            while (ids := self._take()) is not None:
                try:
                    self._write(backend, ids)
                finally:
                    self._done()
        except Exception as exc:  # noqa: BLE001 - reported once; the facts stay findable by words
            self.failure = exc
            warnings.warn(f"vectors of new facts could not be written ({exc}); `ctxslots "
                          "doctor` lists the facts without one and `reindex` repairs them",
                          RuntimeWarning, stacklevel=1)
        finally:
            if backend is not None:
                backend.close()
            with self._cond:
                self._queue.clear()
                self._thread = None
                self._cond.notify_all()

    def _write(self, backend: Backend, ids: list[int]) -> None:
        rows = backend.rows_by_ids(ids, FactFilter())
        if not rows:
            return
        vectors = self._embed([r["value"] for r in rows])
        with backend.transaction():
            # A value changed since it was read is queued again by that write.
            current = {int(r["id"]): r["value"] for r in backend.rows_by_ids(ids, FactFilter())}
            keep = [i for i, r in enumerate(rows) if current.get(int(r["id"])) == r["value"]]
            backend.put_vectors([(int(rows[i]["id"]), rows[i]["scope"], rows[i]["slot"])
                                 for i in keep], vectors[keep] if keep else vectors[:0])
