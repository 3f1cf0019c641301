"""The vector leg of the SQLite engine: fact embeddings in the ``vectors`` table.

Each row holds a fact's float32 embedding with its scope and slot; an index on
``(scope, slot)`` lets a KNN read only the rows a search may see, so a search
in a small scope costs what that scope holds, however many other scopes the
file has, and no scope costs anything before it has rows. Distances come from
sqlite-vec's ``vec_distance_cosine`` (exact). ``store_meta`` records which
embedder (model id and dimension) built the vectors. Every write or delete is
logged in ``vector_log`` for the in-memory copy (:mod:`._vector_cache`), which
:class:`VectorIndex` keeps for long-running searches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from ...errors import StoreError
from ..backend import (
    META_EMBEDDER_DIMENSION,
    META_EMBEDDER_MODEL,
    UNIT_TOLERANCE,
    FactFilter,
    FactRow,
    VectorRow,
    VectorState,
    rows_in,
    unit_rows,
)
from . import _rows
from ._connection import Connection
from ._loader import CacheSlot
from ._meta import get_meta, set_meta
from ._schema import vector_objects
from ._sql import LIMIT, READ, filter_clause, marks
from ._vector_cache import META_GENERATION, TABLE, VectorCache, log_bounds, vector_cache_builder

__all__ = ["VectorIndex", "delete", "drop_unusable", "put", "reset", "state", "vectors_of",
           "without_vectors"]

#: The log keeps this many entries; a copy further behind reloads in full.
_LOG_KEEP = 50_000
#: The cosine distances a usable vector measures (0 to 2, and float32 rounding).
_MIN_DISTANCE, _MAX_DISTANCE = -0.01, 2.01


def _unusable(dimension: int | None) -> tuple[str, list[float]]:
    """The condition of a stored vector no search can use (see :mod:`..backend.unit_vectors`):
    its length (sqlite-vec's float32 distance to zero: 0 for none, NULL or infinite for
    values out of range) not 1, or a blob of another dimension."""
    condition = ("(NOT ((abs(vec_distance_l2(embedding, zeroblob(length(embedding))) - 1.0) "
                 "<= ?) IS TRUE) OR length(embedding) != ?)")
    return condition, [UNIT_TOLERANCE, 4 * (dimension or 0)]


def _table_exists(conn: Connection) -> bool:
    return conn.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                       (TABLE,)) is not None


def state(conn: Connection) -> VectorState:
    """What the vector table holds against the facts (a missing table holds nothing)."""
    dim = get_meta(conn, META_EMBEDDER_DIMENSION)
    dimension = int(dim) if dim else None
    scalar = conn.scalar
    model = get_meta(conn, META_EMBEDDER_MODEL)
    if not _table_exists(conn):
        return VectorState(model, dimension, 0, int(scalar("SELECT count(*) FROM facts")), 0)
    unusable, params = _unusable(dimension)
    return VectorState(
        model_id=model,
        dimension=dimension,
        vectors=int(scalar(f"SELECT count(*) FROM {TABLE}")),
        missing=int(scalar(
            f"SELECT count(*) FROM facts WHERE id NOT IN (SELECT fact_id FROM {TABLE})")),
        orphans=int(scalar(
            f"SELECT count(*) FROM {TABLE} WHERE fact_id NOT IN (SELECT id FROM facts)")),
        unusable=int(scalar(f"SELECT count(*) FROM {TABLE} WHERE {unusable}", params)),
    )


def drop_unusable(conn: Connection) -> int:
    """Remove the vectors no search can use and those of no fact, and log it; how many."""
    dim = get_meta(conn, META_EMBEDDER_DIMENSION)
    unusable, params = _unusable(int(dim) if dim else None)
    ids = [int(r[0]) for r in conn.execute(
        f"SELECT fact_id FROM {TABLE} WHERE {unusable} "
        "OR fact_id NOT IN (SELECT id FROM facts)", params).fetchall()]
    return delete(conn, ids)


def reset(conn: Connection, model_id: str, dimension: int) -> None:
    """Drop every vector; bind the table to this embedder (recreating the table, its log
    and their indexes where they are gone: they hold nothing the facts do not)."""
    names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master").fetchall()}
    for _, name, sql in vector_objects():
        if name not in names:
            conn.execute(sql)
    conn.execute(f"DELETE FROM {TABLE}")
    conn.execute("DELETE FROM vector_log")
    set_meta(conn, META_EMBEDDER_MODEL, model_id)
    set_meta(conn, META_EMBEDDER_DIMENSION, str(dimension))
    set_meta(conn, META_GENERATION, str(int(get_meta(conn, META_GENERATION) or 0) + 1))


def _log(conn: Connection, fact_ids: Sequence[int], op: str) -> None:
    conn.executemany("INSERT INTO vector_log (fact_id, op) VALUES (?, ?)",
                     [(fid, op) for fid in fact_ids])
    low, high = log_bounds(conn)
    if high is not None and low is not None and high - low > 2 * _LOG_KEEP:
        conn.execute("DELETE FROM vector_log WHERE seq <= ?", (high - _LOG_KEEP,))


def put(conn: Connection, rows: Sequence[VectorRow], vectors: np.ndarray) -> None:
    """Write the vectors of these facts and log them."""
    if not rows:
        return
    unit = unit_rows(vectors)
    conn.executemany(
        f"INSERT OR REPLACE INTO {TABLE} (fact_id, scope, slot, user_id, agent_id, embedding) "
        "VALUES (?,?,?,?,?,?)",
        [(r.fact_id, r.scope, r.slot, r.user_id, r.agent_id, unit[i].tobytes())
         for i, r in enumerate(rows)])
    _log(conn, [r.fact_id for r in rows], "put")


def delete(conn: Connection, fact_ids: Sequence[int]) -> int:
    """Remove the vectors of these facts and log those there were; how many there were.

    A fact without a vector is not logged: a value replaced in a store that keeps no
    vectors adds nothing to the log other processes' copies read."""
    if not fact_ids:
        return 0
    removed: list[int] = []
    for chunk in rows_in(fact_ids):
        removed += [int(fact_id) for (fact_id,) in conn.execute(
            f"DELETE FROM {TABLE} WHERE fact_id IN ({marks(len(chunk))}) RETURNING fact_id",
            chunk).fetchall()]
    _log(conn, removed, "del")
    return len(removed)


def erase_all(conn: Connection) -> int:
    """Remove every vector and the log of their changes; how many there were."""
    removed = conn.changed(f"DELETE FROM {TABLE}")
    conn.execute("DELETE FROM vector_log")
    # with the log gone, a new generation is what tells other copies to reload
    set_meta(conn, META_GENERATION, str(int(get_meta(conn, META_GENERATION) or 0) + 1))
    return removed


def vectors_of(conn: Connection, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """Stored vectors by fact id."""
    out: dict[int, np.ndarray] = {}
    for chunk in rows_in(fact_ids):
        for fid, blob in conn.execute(f"SELECT fact_id, embedding FROM {TABLE} WHERE fact_id "
                                      f"IN ({marks(len(chunk))})", chunk).fetchall():
            out[int(fid)] = np.frombuffer(blob, np.float32)
    return out


def without_vectors(conn: Connection, limit: int, after: int = 0) -> list[FactRow]:
    """Live facts lacking a vector, by id, above ``after``."""
    return cast(list[FactRow], conn.rows(
        f"SELECT {READ} FROM facts WHERE id > ? AND id NOT IN (SELECT fact_id FROM {TABLE}) "
        "ORDER BY id LIMIT ?", (after, limit)))


def _exact_knn(conn: Connection, vector: np.ndarray, flt: FactFilter, k: int
               ) -> list[tuple[int, float]]:
    cond, params = filter_clause(flt, "f.")
    # The vectors' own owners, slot and scope pick the rows through their index.
    owners, owner_params = filter_clause(FactFilter(users=flt.users, agents=flt.agents,
                                                    slots=flt.slots, scopes=flt.scopes), "v.")
    query = np.asarray(vector, np.float32).tobytes()
    # A vector with no direction measures NULL (sorted last): left out, and the list is
    # read further while such vectors took some of its places. A vector of another
    # length (written by a process still bound to the embedder before a switch) is not
    # measured at all: sqlite-vec refuses to compare it.
    want = k
    while True:
        found = conn.execute(
            f"SELECT v.fact_id, vec_distance_cosine(v.embedding, ?) AS d FROM {TABLE} AS v "
            f"JOIN facts AS f ON f.id = v.fact_id WHERE {owners} AND {cond} "
            f"AND length(v.embedding) = ? ORDER BY d NULLS LAST, v.fact_id {LIMIT}",
            (query, *owner_params, *params, len(query), want)).fetchall()
        kept = [(int(fid), 1.0 - float(d)) for fid, d in found
                if d is not None and _MIN_DISTANCE <= d <= _MAX_DISTANCE]
        if len(kept) >= k or len(found) < want:
            return kept[:k]
        want *= 4


class VectorIndex:
    """Nearest-neighbour search, from the file or an in-memory copy of the vectors.

    :param use_copy: Search an in-memory copy (loaded in the background at the
        first search that can use it) instead of reading the file each time.
    """

    def __init__(self, *, use_copy: bool) -> None:
        self.use_copy = use_copy
        self._slot: CacheSlot[VectorCache] | None = None

    def knn(self, conn: Connection, vector: np.ndarray, flt: FactFilter, k: int
            ) -> list[tuple[int, float]]:
        """The ``k`` facts passing ``flt`` nearest to ``vector``: ``(fact_id, cosine)``."""
        vector = unit_rows(vector)[0]
        if not vector.any():  # a query with no direction is near nothing
            return []
        # Inside a write the table answers: the copy takes in only what was committed.
        if self.use_copy and flt.scopes is not None and not conn.in_transaction:
            copy = self._cache_slot(conn).ready(conn)
            if copy is not None:
                copy.sync(conn)
                return self._copy_knn(conn, copy, vector, flt, k)
        return _exact_knn(conn, vector, flt, k)

    def _copy_knn(self, conn: Connection, copy: VectorCache, vector: np.ndarray,
                  flt: FactFilter, k: int) -> list[tuple[int, float]]:
        # The copy knows scopes and slots, not expiry or near-duplicates: ask for
        # more until enough of the nearest pass the filter or the rows run out.
        assert flt.scopes is not None
        want = k
        while True:
            nearest = copy.knn(vector, flt, want)
            ids = [f for f, _ in nearest]
            passing = _rows.ids_passing(conn, ids, flt)
            kept = [(f, c) for f, c in nearest if f in passing]
            if len(kept) >= k or len(nearest) < want:
                return kept[:k]
            want *= 4

    def load(self, conn: Connection, timeout: float | None) -> bool:
        """Load the in-memory copy now; whether it is loaded."""
        if not self.use_copy:
            raise StoreError("this store was opened with vector_cache=False", path=conn.path)
        return self._cache_slot(conn).load_now(conn, timeout)

    @property
    def copy(self) -> VectorCache | None:
        """The loaded in-memory copy, or ``None``."""
        return None if self._slot is None else self._slot.copy

    @property
    def loading(self) -> bool:
        """Whether a background load of the copy is under way."""
        return self._slot is not None and self._slot.loader is not None

    def forget_copy(self) -> None:
        """Drop the copy (its vectors were dropped) and stop any load."""
        if self._slot is not None:
            self._slot.stop()
            self._slot = None

    def _cache_slot(self, conn: Connection) -> CacheSlot[VectorCache]:
        if self._slot is None:
            dim = get_meta(conn, META_EMBEDDER_DIMENSION)
            self._slot = CacheSlot("in-memory vector copy", vector_cache_builder(int(dim or 0)),
                                   load_vec=True)
        return self._slot

    def close(self) -> None:
        """Stop any background load."""
        if self._slot is not None:
            self._slot.stop()

