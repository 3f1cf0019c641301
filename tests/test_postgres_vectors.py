"""Vector hits under filters at 100,000 facts: no scope, however small, comes back short.

pgvector 0.6's HNSW index walks at most ``hnsw.ef_search`` candidates and
filters afterwards, so a search filtered to a scope far from the query finds
next to nothing through the index. The store is built here so that this
happens (the raw indexed query is checked to come back short), then the
backend must still return every hit, in exact order.

Loading 100,000 rows one by one through the HNSW index takes minutes, so the
rows are copied in with the index dropped, and the index is built afterwards
with small build parameters (``m = 4, ef_construction = 10``): they lower the
index's recall, never the ``ef_search`` cut this test is about.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest

pytest.importorskip("psycopg_pool")

from ctxslots.stores.backend import FactFilter
from ctxslots.stores.postgres import PostgresBackend

NOW = 1_800_000_000.0
DIM = 8
TOTAL = 100_000
SMALL = 20
BIG = 60_000
BIG_LIVE = 30


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in vector.tolist()) + "]"


@pytest.fixture(scope="module", name="store")
def fixture_store(postgres: Any) -> Iterator[dict[str, Any]]:
    """100,000 facts; scope ``small`` (20) and the 30 live of ``big`` lie far from the query."""
    url = postgres.database()
    rng = np.random.default_rng(11)
    toward = rng.normal(size=DIM).astype(np.float32)
    toward /= np.linalg.norm(toward)
    vectors = (toward + 0.6 * rng.normal(size=(TOTAL, DIM))).astype(np.float32)
    scopes = ["small"] * SMALL + ["big"] * BIG + [f"s{n % 40}" for n in range(TOTAL - SMALL - BIG)]
    expires: list[float | None] = [None] * TOTAL
    for n in range(SMALL, SMALL + BIG):
        expires[n] = None if n < SMALL + BIG_LIVE else NOW - 1
    far = [n for n in range(TOTAL) if scopes[n] == "small" or (scopes[n] == "big"
                                                                and expires[n] is None)]
    vectors[far] = (-toward + 0.6 * rng.normal(size=(len(far), DIM))).astype(np.float32)
    backend = PostgresBackend(url)
    with backend.transaction():
        backend.reset_vectors("test-model", DIM)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX fact_vectors_hnsw")
        with conn.cursor() as cur:
            with cur.copy("COPY facts (id, slot, scope, value, created_at, updated_at, "
                          "observed_at, expires_at) FROM STDIN") as copy:
                for n in range(TOTAL):
                    copy.write_row((n + 1, "agent", scopes[n], f"fact {n}", NOW, NOW, NOW,
                                    expires[n]))
            with cur.copy("COPY fact_vectors (fact_id, scope, slot, embedding) FROM STDIN"
                          ) as copy:
                for n in range(TOTAL):
                    copy.write_row((n + 1, scopes[n], "agent", _literal(vectors[n])))
        conn.execute("SELECT setval('fact_ids', %s)", (TOTAL,))
        conn.execute("CREATE INDEX fact_vectors_hnsw ON fact_vectors "
                     "USING hnsw (embedding vector_cosine_ops) WITH (m = 4, ef_construction = 10)")
        conn.execute("ANALYZE facts")
        conn.execute("ANALYZE fact_vectors")
    stored = np.array([[float(x) for x in _literal(v)[1:-1].split(",")] for v in vectors],
                      dtype=np.float32)
    try:
        yield {"url": url, "backend": backend, "vectors": stored, "scopes": scopes,
               "expires": expires, "query": toward}
    finally:
        backend.close()


def exact(store: dict[str, Any], rows: list[int], k: int) -> list[int]:
    """Fact ids of ``rows`` (0-based) nearest the query by cosine, best first."""
    vectors, query = store["vectors"][rows], store["query"]
    cosines = vectors @ query / np.linalg.norm(vectors, axis=1)
    order = sorted(range(len(rows)), key=lambda i: (-cosines[i], rows[i]))
    return [rows[i] + 1 for i in order[:k]]


def test_the_index_alone_comes_back_short(store):
    """The raw HNSW queries, filtered to the small scope or to the live big facts, miss hits."""
    # "scope || ''" keeps the planner off the scope index, leaving it the HNSW index.
    small = ("SELECT v.fact_id FROM fact_vectors v WHERE v.scope || '' = 'small' "
             "ORDER BY v.embedding <=> %s::vector LIMIT 50")
    live = ("SELECT v.fact_id FROM fact_vectors v JOIN facts f ON f.id = v.fact_id "
            "WHERE v.scope || '' = 'big' AND f.expires_at IS NULL "
            "ORDER BY v.embedding <=> %s::vector LIMIT 50")
    query = (_literal(store["query"]),)
    with psycopg.connect(store["url"], autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        for sql, hits in ((small, SMALL), (live, BIG_LIVE)):
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, query))
            assert "fact_vectors_hnsw" in plan
            assert len(conn.execute(sql, query).fetchall()) < hits


def test_a_scope_of_20_among_100000_gets_every_hit(store):
    """knn filtered to the 20-fact scope returns all 20, in exact cosine order."""
    found = store["backend"].vector_knn(store["query"], FactFilter(scopes=("small",)), 50)
    assert exact(store, list(range(SMALL)), 50) == [fid for fid, _ in found]


def test_a_large_scope_with_few_live_facts_falls_back_to_an_exact_scan(store):
    """60,000 facts of which 30 are live: the index comes back short, the backend does not."""
    flt = FactFilter(scopes=("big",), live_at=NOW, include_superseded=False)
    found = store["backend"].vector_knn(store["query"], flt, 50)
    live = list(range(SMALL, SMALL + BIG_LIVE))
    assert exact(store, live, 50) == [fid for fid, _ in found]


def test_an_unfiltered_search_uses_the_index_and_finds_the_nearest(store):
    """Across all 100,000 facts the index answers, with most of the exact top 10."""
    found = store["backend"].vector_knn(store["query"], FactFilter(), 10)
    wanted = exact(store, list(range(TOTAL)), 10)
    assert 10 == len(found)
    assert len(set(wanted) & {fid for fid, _ in found}) >= 7
