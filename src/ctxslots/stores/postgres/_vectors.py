"""The vector leg on PostgreSQL: pgvector with an HNSW index (cosine), exact for small scopes.

``fact_vectors`` holds one row per fact (with its scope and slot); its
dimension is fixed when an embedder is bound (:func:`reset`), which also
records the embedder in ``store_meta``. Vectors of up to 2,000 dimensions get
an HNSW index (pgvector's limit); larger ones are scanned exactly.

An HNSW search with a WHERE clause is approximate *and* short-sighted:
pgvector 0.6 walks at most ``hnsw.ef_search`` candidates and then applies the
filter, so a scope of 20 facts among 100,000 would come back nearly empty.
:func:`knn` therefore scans exactly when the visible set is small (counted up
to :data:`EXACT_SCAN_ROWS` through the scope index), and when the index
returns fewer than ``k`` rows for a larger set it scans exactly too.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from ...errors import StoreError
from ..backend import UNIT_TOLERANCE, FactFilter, Row, VectorRow, VectorState, unit_rows
from ._schema import OWNERS_VECTOR_INDEX
from ._sql import COLUMNS, Conn, filter_clause, id_list, relation_exists
from ._vector_io import Vector

__all__ = ["EXACT_SCAN_ROWS", "drop_unusable", "index_statements", "knn", "put", "reset",
           "state"]

META_MODEL = "embedder.model_id"
META_DIM = "embedder.dimension"
META_GENERATION = "vectors.generation"

#: A filtered set of at most this many vectors is scanned exactly, without the index.
EXACT_SCAN_ROWS = 5000
#: pgvector's largest indexable dimension for ``vector``.
MAX_INDEXED_DIMENSION = 2000
#: The approximate index of the vector leg (cosine).
HNSW_INDEX = ("CREATE INDEX fact_vectors_hnsw ON fact_vectors "
              "USING hnsw (embedding vector_cosine_ops)")


def table_exists(conn: Conn) -> bool:
    """Whether an embedder was bound (the vector table exists)."""
    return relation_exists(conn, "fact_vectors")


def _set_meta(conn: Conn, name: str, value: str) -> None:
    conn.execute("INSERT INTO store_meta (name, value) VALUES (%s, %s) "
                 "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (name, value))


def _meta(conn: Conn, name: str) -> str | None:
    row = conn.execute("SELECT value FROM store_meta WHERE name = %s", (name,)).fetchone()
    return None if row is None else str(row[0])


def reset(conn: Conn, model_id: str, dimension: int) -> None:
    """Drop every vector and create the table (and index) for this embedder."""
    if not 1 <= int(dimension) <= 16000:
        raise StoreError(f"a vector dimension must be from 1 to 16000, not {dimension}")
    conn.execute("DROP TABLE IF EXISTS fact_vectors")
    conn.execute(f"""
        CREATE TABLE fact_vectors (
            fact_id bigint NOT NULL,
            scope text NOT NULL,
            slot text NOT NULL,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            embedding vector({int(dimension)}) NOT NULL,
            PRIMARY KEY (fact_id, scope, user_id)
        )""")
    conn.execute(OWNERS_VECTOR_INDEX)
    if dimension <= MAX_INDEXED_DIMENSION:
        conn.execute(HNSW_INDEX)
    _set_meta(conn, META_MODEL, model_id)
    _set_meta(conn, META_DIM, str(int(dimension)))
    generation = int(_meta(conn, META_GENERATION) or 0) + 1
    _set_meta(conn, META_GENERATION, str(generation))


def put(conn: Conn, rows: Sequence[VectorRow], vectors: np.ndarray) -> None:
    """Write (or replace) the vectors of these facts."""
    if not rows:
        return
    if len(vectors) != len(rows):
        raise StoreError(f"{len(rows)} rows but {len(vectors)} vectors")
    unit = unit_rows(vectors)
    try:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO fact_vectors (fact_id, scope, slot, user_id, agent_id, embedding) "
                "VALUES (%s, %s, %s, %s, %s, %b) ON CONFLICT (fact_id, scope, user_id) "
                "DO UPDATE SET slot = excluded.slot, agent_id = excluded.agent_id, "
                "embedding = excluded.embedding",
                [(int(r.fact_id), r.scope, r.slot, r.user_id, r.agent_id, Vector(unit[i]))
                 for i, r in enumerate(rows)])
    except pgerrors.UndefinedTable as exc:
        raise StoreError("the store has no vector index yet: bind an embedder first "
                         "(reset_vectors)") from exc


def delete(conn: Conn, fact_ids: Sequence[int]) -> int:
    """Remove the vectors of these facts; how many there were."""
    if not fact_ids or not table_exists(conn):
        return 0
    return len(conn.execute("DELETE FROM fact_vectors WHERE fact_id = ANY(%s) RETURNING 1",
                            (id_list(fact_ids),)).fetchall())


def erase_all(conn: Conn) -> int:
    """Remove every vector; how many there were."""
    if not table_exists(conn):
        return 0
    return len(conn.execute("DELETE FROM fact_vectors RETURNING 1").fetchall())


def vectors_of(conn: Conn, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The stored vectors of these facts."""
    if not fact_ids or not table_exists(conn):
        return {}
    with conn.cursor(binary=True) as cur:
        rows = cur.execute("SELECT fact_id, embedding FROM fact_vectors WHERE fact_id = ANY(%s)",
                           (id_list(fact_ids),)).fetchall()
    return {int(fid): np.asarray(vec, dtype=np.float32) for fid, vec in rows}


def _filters(flt: FactFilter) -> tuple[list[str], list[Any], list[str], list[Any]]:
    """``flt`` as clauses on the vector table ``v`` and on its fact ``f``, with parameters."""
    on_vector: list[str] = []
    vector_params: list[Any] = []
    for column, values in (("user_id", flt.users), ("agent_id", flt.agents),
                           ("slot", flt.slots), ("scope", flt.scopes)):
        if values is not None:
            on_vector.append(f"v.{column} = ANY(%s)")
            vector_params.append(list(values))
    rest = attrs.evolve(flt, scopes=None, slots=None, users=None, agents=None)
    clause, fact_params = filter_clause(rest, "f")
    return on_vector, vector_params, [clause], fact_params


def knn(conn: Conn, vector: np.ndarray, flt: FactFilter, k: int) -> list[tuple[int, float]]:
    """The ``k`` facts passing ``flt`` nearest to ``vector``: ``(fact_id, cosine)`` best first."""
    unit = unit_rows(vector)[0]
    # A query with no direction (all zeros, or values not finite) is near nothing.
    if k <= 0 or not unit.any() or not table_exists(conn):
        return []
    on_vector, vector_params, on_fact, fact_params = _filters(flt)
    where = " AND ".join(on_vector + on_fact) or "TRUE"
    params = vector_params + fact_params
    query = Vector(unit)
    base = (f"SELECT v.fact_id, v.embedding <=> %b AS distance FROM fact_vectors v "
            f"JOIN facts f ON f.id = v.fact_id AND f.scope = v.scope "
            f"AND f.user_id = v.user_id WHERE {where} ")
    visible = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM fact_vectors v "
        f"WHERE {' AND '.join(on_vector) or 'TRUE'} LIMIT %s) c",
        (*vector_params, EXACT_SCAN_ROWS + 1), prepare=False).fetchone()[0]
    small = visible <= EXACT_SCAN_ROWS
    rows: list[Any] = []
    if not small:
        # The index walks ef_search candidates and filters afterwards. SET LOCAL
        # in a transaction, so no setting outlives the query (nor, behind a
        # transaction-pooling PgBouncer, lands on another server connection).
        with _in_transaction(conn):
            conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(100, 2 * k))}")
            rows = conn.execute(base + "ORDER BY v.embedding <=> %b LIMIT %s",
                                (query, *params, query, k), prepare=False).fetchall()
    if small or len(rows) < k:
        # "+ 0" keeps the planner off the HNSW index: an exact scan of the filtered rows.
        rows = conn.execute(base + "ORDER BY (v.embedding <=> %b) + 0, v.fact_id LIMIT %s",
                            (query, *params, query, k), prepare=False).fetchall()
    # A vector with no direction measures NaN (sorted last): left out.
    found = [(int(fid), 1.0 - float(dist)) for fid, dist in rows if math.isfinite(dist)]
    found.sort(key=lambda item: (-item[1], item[0]))
    return found


def _in_transaction(conn: Conn) -> contextlib.AbstractContextManager[Any]:
    """The connection's open transaction, or a new one for the block."""
    if conn.info.transaction_status == TransactionStatus.INTRANS:
        return contextlib.nullcontext()
    return conn.transaction()  # type: ignore[no-any-return]


#: A stored vector no search can use: its length (pgvector sums in double precision,
#: so 3e38 and 1e-40 measure true) is not 1; a vector with no direction measures 0.
_UNUSABLE = "NOT (abs(vector_norm(embedding) - 1) <= %s)"
_ORPHAN = "NOT EXISTS (SELECT 1 FROM facts f WHERE f.id = fact_vectors.fact_id)"


def state(conn: Conn) -> VectorState:
    """What the vector table holds."""
    dim = _meta(conn, META_DIM)
    if not table_exists(conn):
        missing = int(conn.execute("SELECT count(*) FROM facts").fetchone()[0])
        return VectorState(_meta(conn, META_MODEL), int(dim) if dim else None, 0, missing, 0)
    vectors, missing, orphans, unusable = conn.execute(
        "SELECT (SELECT count(*) FROM fact_vectors), "
        "(SELECT count(*) FROM facts f WHERE NOT EXISTS "
        " (SELECT 1 FROM fact_vectors v WHERE v.fact_id = f.id)), "
        f"(SELECT count(*) FROM fact_vectors WHERE {_ORPHAN}), "
        f"(SELECT count(*) FROM fact_vectors WHERE {_UNUSABLE})",
        (UNIT_TOLERANCE,)).fetchone()
    return VectorState(_meta(conn, META_MODEL), int(dim) if dim else None, int(vectors),
                       int(missing), int(orphans), int(unusable))


def drop_unusable(conn: Conn) -> int:
    """Remove the vectors no search can use and those of no fact; how many there were."""
    if not table_exists(conn):
        return 0
    return len(conn.execute(f"DELETE FROM fact_vectors WHERE {_UNUSABLE} OR {_ORPHAN} "
                            "RETURNING 1", (UNIT_TOLERANCE,)).fetchall())


def index_statements(conn: Conn) -> dict[str, str]:
    """The indexes the vector table needs, by name, with the statement that creates each
    (none before an embedder is bound)."""
    if not table_exists(conn):
        return {}
    wanted = {"fact_vectors_owners": OWNERS_VECTOR_INDEX.replace(
        "CREATE INDEX", "CREATE INDEX IF NOT EXISTS")}
    dim = _meta(conn, META_DIM)
    if dim and int(dim) <= MAX_INDEXED_DIMENSION:
        wanted["fact_vectors_hnsw"] = (HNSW_INDEX.replace("CREATE INDEX",
                                                         "CREATE INDEX IF NOT EXISTS"))
    return wanted


def without_vectors(conn: Conn, limit: int, after: int = 0) -> list[Row]:
    """Up to ``limit`` facts without a vector, by id, above ``after``."""
    if limit <= 0:
        return []
    gap = (" AND NOT EXISTS (SELECT 1 FROM fact_vectors v WHERE v.fact_id = facts.id)"
           if table_exists(conn) else "")
    with conn.cursor(row_factory=dict_row) as cur:
        return list(cur.execute(f"SELECT {COLUMNS} FROM facts WHERE id > %s{gap} "
                                "ORDER BY id LIMIT %s", (after, limit)).fetchall())
