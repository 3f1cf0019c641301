"""Exact top-k cosine over in-memory vector blocks, split across a few plain threads.

Not ``matrix @ query``: that is a threaded BLAS call whose idle worker threads
spin for many milliseconds after each call and, on a small machine, starve an
embedding model in the same process (BENCHMARKS.md, "Why not BLAS"). Here each
piece of at most
:data:`PIECE_ROWS` rows is scored by numpy's ``einsum`` (its own loop, which
releases the GIL) on a pool of ordinary threads that sleep while idle, and the
calling thread waits without spinning.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

__all__ = ["PIECE_ROWS", "top_k"]

#: Rows scored by one task.
PIECE_ROWS = 16_384
#: Below this many rows in all, one thread scans everything (no hand-off cost).
PARALLEL_MIN_ROWS = 2 * PIECE_ROWS


def _usable_cpus() -> int:
    # The CPUs this process may run on (a container or taskset may allow fewer than the host has).
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


_WORKERS = min(4, _usable_cpus())

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class Block(Protocol):
    """What a scan needs of a block: ids, vectors, liveness, rows used, dead rows."""

    ids: np.ndarray
    mat: np.ndarray
    alive: np.ndarray
    n: int
    dead: int


def _forget_pool() -> None:
    # A forked child has the pool object but none of its threads (and the lock may have
    # been held by one of them).
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="ctxslots-scan")
        return _pool


def _piece(block: Block, start: int, stop: int, query: np.ndarray, k: int
           ) -> tuple[np.ndarray, np.ndarray]:
    sims = np.einsum("ij,j->i", block.mat[start:stop], query)
    if block.dead:
        sims[~block.alive[start:stop]] = -np.inf
    take = min(k, stop - start)
    cut = sims[np.argpartition(-sims, take - 1)[take - 1]]
    # Every row tied at the cut, so the caller gives ties to the lower id: a partition
    # alone keeps any of them.
    top = np.flatnonzero(sims >= cut)
    top = top[np.isfinite(sims[top])]
    return block.ids[start + top], sims[top]


def top_k(blocks: Sequence[Block], query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` live rows of ``blocks`` most similar to ``query``: ``(id, cosine)`` best first.

    Vectors are unit length, so the dot product is the cosine. Ties go to the
    lower id, whatever the split.
    """
    pieces = [(block, start, min(start + PIECE_ROWS, block.n))
              for block in blocks if block.n > block.dead
              for start in range(0, block.n, PIECE_ROWS)]
    if not pieces:
        return []
    q = np.ascontiguousarray(query, dtype=np.float32)
    def score(piece: tuple[Block, int, int]) -> tuple[np.ndarray, np.ndarray]:
        block, start, stop = piece
        return _piece(block, start, stop, q, k)

    if _WORKERS > 1 and sum(stop - start for _, start, stop in pieces) >= PARALLEL_MIN_ROWS:
        found = list(_executor().map(score, pieces))
    else:
        found = [score(p) for p in pieces]
    ids = np.concatenate([i for i, _ in found])
    sims = np.concatenate([s for _, s in found])
    order = np.lexsort((ids, -sims))[:k]
    return [(int(ids[i]), float(sims[i])) for i in order]
