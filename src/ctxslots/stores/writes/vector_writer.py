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
``reindex`` repairs (embedding only them).

A text the embedder refuses (``EmbedderError.refused_input``) is left without a
vector, with a warning, and the rest of its batch is written. A batch that fails
otherwise (the embedder's server is down) stops the thread and drops
what was queued: the writer keeps the ids it dropped (:attr:`VectorWriter.dropped`),
so the store's ``wait_for_vectors`` answers false until they have vectors.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ..backend import Backend, FactFilter, VectorRow
from ..embedders.partial import embed_what_it_takes, warn_refused
from .background import BackgroundWriter

__all__ = ["VectorWriter"]

#: Most facts embedded in one batch.
MAX_BATCH = 64
#: Times a fact another transaction held when its vector was written is queued again,
#: after a wait that doubles from :data:`RETRY_WAIT_S` (up to a second): such a hold is an
#: upsert of the same fact, over in milliseconds.
RETRIES = 5
RETRY_WAIT_S = 0.1


class VectorWriter(BackgroundWriter):
    """Embeds queued facts on a daemon thread and writes their vectors.

    :param open_backend: Opens the writer's own connection to the store.
    :param embed: ``embed(texts) -> vectors``.
    """

    thread_name = "ctxslots-vectors"

    def __init__(self, open_backend: Callable[[], Backend], embed: Callable[[list[str]], Any]
                 ) -> None:
        super().__init__(open_backend)
        self._embed = embed
        self._queue: dict[int, None] = {}
        self._batch: list[int] = []
        self._dropped: set[int] = set()
        self._tries: dict[int, int] = {}
        self.failure: BaseException | None = None

    def put(self, fact_ids: Iterable[int]) -> None:
        """Queue facts whose value changed in a committed transaction."""
        self._enqueue(lambda: self._queue.update(dict.fromkeys(fact_ids)))

    def _queued(self) -> int:
        return len(self._queue)

    def _take_batch(self) -> tuple[list[int], int]:
        ids = list(self._queue)[:MAX_BATCH]
        for fact_id in ids:
            del self._queue[fact_id]
        self._batch = ids
        return ids, len(ids)

    def _clear(self) -> None:
        self._dropped.update(self._queue)
        self._queue.clear()

    @property
    def dropped(self) -> set[int]:
        """The facts whose vectors were queued and dropped when a batch failed (a copy)."""
        with self._cond:
            return set(self._dropped)

    def forget_dropped(self, fact_ids: set[int]) -> None:
        """Stop counting these facts as dropped (they have their vectors now, or are gone)."""
        with self._cond:
            self._dropped -= fact_ids

    def _again(self, skipped: list[int]) -> int:
        """Queue again the facts a batch left out because another transaction held them
        (a deleted one is found gone then), each up to :data:`RETRIES` times; past
        that it counts as dropped (``doctor`` counts it, ``reindex`` embeds it). The
        most tries of a fact queued again (0: none was)."""
        most = 0
        with self._cond:
            for fact_id in skipped:
                tries = self._tries.get(fact_id, 0) + 1
                if tries > RETRIES:
                    self._tries.pop(fact_id, None)
                    self._dropped.add(fact_id)
                else:
                    self._tries[fact_id] = tries
                    self._queue[fact_id] = None
                    most = max(most, tries)
            for fact_id in set(self._tries) - set(skipped):
                if fact_id not in self._queue:
                    del self._tries[fact_id]
        return most

    def _failed(self, exc: Exception) -> None:
        with self._cond:
            self.failure = exc
            self._dropped.update(self._batch)
            count = len(self._dropped) + len(self._queue)
        warnings.warn(f"vectors of new facts could not be written ({exc}); {count} "
                      f"{'facts have' if count != 1 else 'fact has'} none: `ctxslots doctor` counts them "
                      "and `ctxslots reindex` embeds them", RuntimeWarning, stacklevel=1)

    def _write(self, backend: Backend, ids: list[int]) -> None:
        # A fact written meanwhile is no longer one a failure dropped.
        self.forget_dropped(set(ids))
        rows = backend.rows_by_ids(ids, FactFilter())
        if not rows:
            self._batch = []
            return
        made = embed_what_it_takes(self._embed, [r["value"] for r in rows])
        with backend.transaction():
            # A value changed since it was read is queued again by that write.
            # Held: a fact another transaction is deleting is left out (no vector
            # outlives its fact), and so is one another holds for an update meanwhile.
            current = {int(r["id"]): r["value"]
                       for r in backend.rows_by_ids(ids, FactFilter(), held=True)}
            keep = [n for n, i in enumerate(made.kept)
                    if current.get(int(rows[i]["id"])) == rows[i]["value"]]
            backend.put_vectors([VectorRow.of(rows[made.kept[n]]["id"], rows[made.kept[n]])
                                 for n in keep], made.vectors[keep])
        self._batch = []
        tries = self._again([int(rows[i]["id"]) for i in made.kept
                             if int(rows[i]["id"]) not in current])
        if tries:  # let the transaction holding them end first
            time.sleep(min(RETRY_WAIT_S * 2 ** (tries - 1), 1.0))
        warn_refused({int(rows[i]["id"]): exc for i, exc in made.refused.items()})
