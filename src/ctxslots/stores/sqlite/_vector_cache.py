"""An in-memory copy of the SQLite engine's vectors, for long-running searches.

:class:`VectorCache` is an in-memory copy of the vectors, one block per scope and slot (scanned by
:mod:`._scan`), kept consistent with the file
through ``vector_log``: every vector write or delete appends to it in the same
transaction, and each search first applies what the log says changed since the
cache last looked. The file stays the source of truth; the cache can be
dropped at any time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from ..backend import FactFilter, unit_rows
from ._connection import Connection
from ._loader import row_chunks
from ._meta import get_meta
from ._scan import top_k

__all__ = ["META_GENERATION", "TABLE", "VectorCache", "log_bounds", "vector_cache_builder"]

TABLE = "vectors"
META_GENERATION = "vectors.generation"


def log_bounds(conn: Connection, table: str = "vector_log") -> tuple[int | None, int | None]:
    """The lowest and highest ``seq`` of a change log (``vector_log`` or ``fact_log``)."""
    # Two statements on purpose: SQLite answers a lone min() or max() from the
    # index in O(log n), but scans the whole table for both in one SELECT.
    return (conn.scalar(f"SELECT min(seq) FROM {table}"),
            conn.scalar(f"SELECT max(seq) FROM {table}"))


@attrs.define
class _Block:
    """The vectors of one scope and slot, in append order with a liveness mask."""

    dim: int
    ids: np.ndarray
    mat: np.ndarray
    alive: np.ndarray
    n: int = 0
    dead: int = 0

    @classmethod
    def empty(cls, dim: int, capacity: int) -> _Block:
        return cls(dim, np.zeros(capacity, np.int64), np.zeros((capacity, dim), np.float32),
                   np.zeros(capacity, bool))

    def append(self, ids: np.ndarray, mat: np.ndarray) -> range:
        need = self.n + len(ids)
        if need > len(self.ids):
            cap = max(need, 2 * len(self.ids))
            self.ids = np.resize(self.ids, cap)
            grown = np.zeros((cap, self.dim), np.float32)
            grown[: self.n] = self.mat[: self.n]
            self.mat = grown
            self.alive = np.concatenate([self.alive[: self.n], np.zeros(cap - self.n, bool)])
        start = self.n
        self.ids[start:need] = ids
        self.mat[start:need] = mat
        self.alive[start:need] = True
        self.n = need
        return range(start, need)

    def compact(self) -> np.ndarray:
        """Drop the dead rows; return the ids of the rows kept, in their new order."""
        keep = np.flatnonzero(self.alive[: self.n])
        self.ids = self.ids[keep].copy()
        self.mat = self.mat[keep].copy()
        self.alive = np.ones(len(keep), bool)
        self.n = len(keep)
        self.dead = 0
        return self.ids


#: A block's slot, scope, user and agent.
_Key = tuple[str, str, str, str]
_ROW = "fact_id, slot, scope, user_id, agent_id, embedding"


def _searchable(mat: np.ndarray) -> np.ndarray:
    """Rows as a scan scores them: unit length (their dot product is the cosine), and a
    row with no direction all NaN, which the scan leaves out (:mod:`._scan`)."""
    unit = unit_rows(mat)
    unit[~unit.any(axis=1)] = np.nan
    return unit


#: A block is compacted once it holds more dead rows than this and than live ones.
COMPACT_MIN_DEAD = 1024


@attrs.define
class VectorCache:
    """An in-memory copy of the index, one block per slot and owners, synced through ``vector_log``.

    A search reads only the blocks of the slots and owners it may see, so the
    three slot-filtered searches of one prompt assembly scan each row once
    between them, and one user's search scans none of another user's rows.

    Attributes:
        dimension: Vector dimension.
    """

    dimension: int
    _blocks: dict[_Key, _Block] = attrs.Factory(dict)
    _where: dict[int, tuple[_Key, int]] = attrs.Factory(dict)
    _seq: int = -1
    _generation: str | None = None

    def sync(self, conn: Connection, *, cancelled: Callable[[], bool] | None = None) -> None:
        """Apply the changes the log records since the last sync (or reload in full).

        :param cancelled: For a load on a background thread: checked between
            small chunks of a full reload, which also let other threads run
            between them; when it returns true the reload stops half done.
        """
        generation = get_meta(conn, META_GENERATION)
        low, high = log_bounds(conn)
        high = int(high or 0)
        if generation != self._generation or (low is not None and self._seq < int(low) - 1):
            self._reload(conn, generation, high, cancelled)
            return
        if high <= self._seq:
            return
        changes = conn.execute(
            "SELECT fact_id, max(seq) FROM vector_log WHERE seq > ? GROUP BY fact_id",
            (self._seq,),
        ).fetchall()
        changed = [int(fid) for fid, _ in changes]
        for fid in changed:
            self._remove(fid)
        for start in range(0, len(changed), 500):
            chunk = changed[start:start + 500]
            rows = conn.execute(
                f"SELECT {_ROW} FROM {TABLE} "
                f"WHERE fact_id IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            self._add_rows(rows)
        self._compact()
        self._seq = high

    def _reload(self, conn: Connection, generation: str | None, high: int,
                cancelled: Callable[[], bool] | None) -> None:
        self._blocks.clear()
        self._where.clear()
        rows = conn.execute(f"SELECT {_ROW} FROM {TABLE}")
        for chunk in row_chunks(rows, cancelled, background_size=50):
            self._add_rows(chunk)
        if cancelled is not None and cancelled():
            return
        self._generation = generation
        self._seq = high

    def _add_rows(self, rows: Sequence[Any]) -> None:
        groups: dict[_Key, list[Any]] = {}
        size = 4 * self.dimension
        for row in rows:
            if len(row[5]) != size:  # a row of another dimension: no search can use it
                continue
            groups.setdefault((str(row[1]), str(row[2]), str(row[3]), str(row[4])),
                              []).append(row)
        for key, group in groups.items():
            block = self._blocks.get(key)
            if block is None:  # sized to its rows (a block per user: most stay small)
                block = self._blocks[key] = _Block.empty(self.dimension, len(group))
            ids = np.array([int(r[0]) for r in group], np.int64)
            mat = _searchable(np.frombuffer(b"".join(r[5] for r in group), np.float32).reshape(
                -1, self.dimension))
            for fid, pos in zip(ids.tolist(), block.append(ids, mat)):
                self._where[fid] = (key, pos)

    def _remove(self, fact_id: int) -> None:
        where = self._where.pop(fact_id, None)
        if where is not None:
            block = self._blocks[where[0]]
            block.alive[where[1]] = False
            block.mat[where[1]] = np.nan  # an erased fact's vector stays in no dead row
            block.dead += 1

    def _compact(self) -> None:
        for key, block in list(self._blocks.items()):
            if block.dead and block.dead == block.n:  # every row gone (an erased user's)
                del self._blocks[key]
            elif block.dead > COMPACT_MIN_DEAD and block.dead > block.n - block.dead:
                for pos, fid in enumerate(block.compact().tolist()):
                    self._where[fid] = (key, pos)

    @property
    def rows(self) -> int:
        """Rows held, live and dead."""
        return sum(block.n for block in self._blocks.values())

    def knn(self, query: np.ndarray, flt: FactFilter, k: int) -> list[tuple[int, float]]:
        """Exact KNN over the cached rows of the slots and owners ``flt`` may see:
        ``(fact_id, cosine)`` best first (expiry and the rest are the caller's to check)."""
        wanted = [None if v is None else set(v) for v in (flt.slots, flt.scopes, flt.users,
                                                           flt.agents)]
        blocks = [block for key, block in self._blocks.items()
                  if all(w is None or part in w for part, w in zip(key, wanted, strict=True))]
        return top_k(blocks, query, k)


def vector_cache_builder(dimension: int) -> Callable[[Connection, Callable[[], bool]], VectorCache]:
    """``build(conn, cancelled)`` making a full :class:`VectorCache` (for a background load)."""

    def build(conn: Connection, cancelled: Callable[[], bool]) -> VectorCache:
        cache = VectorCache(dimension)
        cache.sync(conn, cancelled=cancelled)
        return cache

    return build
