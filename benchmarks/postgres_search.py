"""PostgresBackend search and writes at 100,000 facts, against the same SQL written by hand.

    python benchmarks/postgres_search.py                         # private pgserver, 100k facts
    python benchmarks/postgres_search.py --url postgresql://user@host/db --facts 100000
    python benchmarks/postgres_search.py --dim 384               # vectors too (slow to build)

A fresh database is filled with the synthetic corpus (benchmarks/_corpus.py)
through ``PostgresBackend.insert``, 1,000 facts per transaction (``batch``
writes/s); then 2,000 more facts are written one per transaction (``one by
one``). Then, on the same server in the same run, for each query of the
corpus (scope ``repo-alpha`` and global, live facts, superseded left out,
pool 50):

- ``lexical``: ``backend.drop_common`` then ``backend.lexical`` (BM25), what
  the facade asks of the engine for the words of one search;
- floor ``hand SQL``: the same BM25 statement, typed out below, run on a plain
  psycopg connection with the same words and statistics, nothing around it;
- ``ts_rank_cd`` and its floor: PostgreSQL's own ranking, the same way;
- with ``--dim``: ``vector``, ``backend.vector_knn`` (k = 50) against the
  HNSW query by hand (vectors are random: this times the index, not quality).

The ratio column is backend p50 over floor p50.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import psycopg

from _corpus import generate_facts, generate_queries
from _pg import server
from ctxslots.stores.backend import FactFilter
from ctxslots.stores.postgres import PostgresBackend
from ctxslots.stores.sanitize import DEFAULT_POLICY, query_tokens

NOW = 1_800_000_000.0
SCOPE = "repo-alpha"
POOL = 50

#: The lexical leg's BM25 statement, typed out (parameters: words, N, mean length, OR query,
#: scopes, now, pool).
HAND_BM25 = """
WITH d AS MATERIALIZED (
    SELECT lexeme, (SELECT count(*)::float8 FROM facts
                    WHERE search @@ quote_literal(lexeme)::tsquery) AS n
    FROM (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('ctxslots_english', %s)))
          AS lexeme) s),
q AS MATERIALIZED (
    SELECT coalesce(array_agg(lexeme), '{}') AS lexemes,
           array_agg(greatest(ln((greatest(%s::float8, n) - n + 0.5) / (n + 0.5)), 1e-6)) AS idf
    FROM d),
s AS (
    SELECT f.id, (SELECT sum(q.idf[array_position(q.lexemes, u.lexeme)]
                             * cardinality(u.positions) * 2.2
                             / (cardinality(u.positions)
                                + 1.2 * (0.25 + 0.75 * f.doc_len::float8 / %s::float8)))
                  FROM unnest(ts_filter(setweight(f.search, 'A', q.lexemes), '{a}')) u) AS bm25
    FROM facts f, q
    WHERE f.search @@ to_tsquery('ctxslots_english', %s) AND f.scope = ANY(%s)
      AND (f.expires_at IS NULL OR f.expires_at > %s) AND f.superseded_by IS NULL
    ORDER BY bm25 DESC, f.id LIMIT %s)
SELECT f.*, -s.bm25 FROM s JOIN facts f ON f.id = s.id ORDER BY s.bm25 DESC, s.id
"""

HAND_RANK_CD = """
SELECT f.*, -ts_rank_cd(f.search, q) AS _score
FROM facts f, to_tsquery('ctxslots_english', %s) q
WHERE f.search @@ q AND f.scope = ANY(%s) AND (f.expires_at IS NULL OR f.expires_at > %s)
  AND f.superseded_by IS NULL
ORDER BY _score, f.id LIMIT %s
"""

HAND_KNN = """
SELECT v.fact_id, v.embedding <=> %s::vector AS distance FROM fact_vectors v
JOIN facts f ON f.id = v.fact_id AND f.scope = v.scope
WHERE v.scope = ANY(%s) AND (f.expires_at IS NULL OR f.expires_at > %s)
  AND f.superseded_by IS NULL
ORDER BY v.embedding <=> %s::vector LIMIT %s
"""


def row(fact: Any, now: float) -> dict[str, Any]:
    """A backend row for a corpus fact."""
    return {"slot": fact.slot, "scope": fact.scope or "", "key": fact.key, "value": fact.value,
            "tags": "\n".join(fact.tags), "source": None, "confidence": 1.0, "score": 0.0,
            "created_at": now, "updated_at": now, "observed_at": now, "last_accessed": None,
            "access_count": 0, "expires_at": None, "superseded_by": None}


def fill(backend: PostgresBackend, n: int, dim: int | None, batch: int = 1000) -> float:
    """Write ``n`` facts (and vectors) in transactions of ``batch``; facts per second."""
    rng = np.random.default_rng(0)
    facts = generate_facts(n, seed=0)
    started = time.perf_counter()
    done = 0
    while done < n:
        chunk = [next(facts) for _ in range(min(batch, n - done))]
        with backend.transaction():
            ids = [backend.insert(row(f, NOW)) for f in chunk]
            if dim:
                rows = [(i, f.scope or "", f.slot) for i, f in zip(ids, chunk, strict=True)]
                backend.put_vectors(rows, rng.normal(size=(len(chunk), dim)).astype(np.float32))
        done += len(chunk)
    return n / (time.perf_counter() - started)


def one_by_one(backend: PostgresBackend, n: int, dim: int | None) -> float:
    """Write ``n`` more facts, one transaction each; facts per second."""
    rng = np.random.default_rng(1)
    facts = list(generate_facts(n, seed=7))
    started = time.perf_counter()
    for f in facts:
        with backend.transaction():
            fact_id = backend.insert(row(f, NOW) | {"key": None})
            if dim:
                backend.put_vectors([(fact_id, f.scope or "", f.slot)],
                                    rng.normal(size=(1, dim)).astype(np.float32))
    return n / (time.perf_counter() - started)


def timed(calls: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Milliseconds of each call, after a warm-up pass."""
    for call in calls:
        call()
    out = []
    for _ in range(repeat):
        for call in calls:
            start = time.perf_counter_ns()
            call()
            out.append((time.perf_counter_ns() - start) / 1e6)
    return out


def p50(values: list[float]) -> float:
    """The median."""
    return statistics.median(values)


def main() -> None:
    """Build, measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a PostgreSQL server URL (default: a private pgserver)")
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dim", type=int, help="also write and search vectors of this size")
    args = parser.parse_args()
    policy = DEFAULT_POLICY
    flt = FactFilter(scopes=(SCOPE, ""), live_at=NOW, include_superseded=False)
    with server(args.url) as fresh:
        url = fresh("ctxslots_bench_search")
        backend = PostgresBackend(url)
        ranked = PostgresBackend(url, lexical_ranking="ts_rank_cd")
        if args.dim:
            with backend.transaction():
                backend.reset_vectors("random", args.dim)
        batch_rate = fill(backend, args.facts, args.dim)
        single_rate = one_by_one(backend, 2000, args.dim)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            total, avg_len = conn.execute(
                "SELECT count(*), avg(doc_len)::float8 FROM facts").fetchone()
        words = [query_tokens(q, policy) for q in generate_queries(args.queries)]
        words = [backend.drop_common(w, share=policy.max_doc_share,
                                     min_rows=policy.common_min_facts) for w in words]
        words = [w for w in words if w]
        rows: list[tuple[str, float, float]] = []
        with psycopg.connect(url, autocommit=True) as raw:
            def search(w: list[str], leg: PostgresBackend = backend) -> Any:
                kept = leg.drop_common(w, share=policy.max_doc_share,
                                       min_rows=policy.common_min_facts)
                return leg.lexical(kept, flt, POOL)

            def or_query(w: list[str]) -> str:
                return " | ".join(f"'{t}'" for t in w)

            mine = timed([lambda w=w: search(w) for w in words], args.repeat)
            floor = timed([lambda w=w: raw.execute(HAND_BM25, (
                " ".join(w), total, avg_len, or_query(w), [SCOPE, ""], NOW, POOL)).fetchall()
                for w in words], args.repeat)
            rows.append(("lexical (BM25)", p50(mine), p50(floor)))
            mine = timed([lambda w=w: search(w, ranked) for w in words], args.repeat)
            floor = timed([lambda w=w: raw.execute(HAND_RANK_CD, (
                or_query(w), [SCOPE, ""], NOW, POOL)).fetchall() for w in words], args.repeat)
            rows.append(("lexical (ts_rank_cd)", p50(mine), p50(floor)))
            if args.dim:
                rng = np.random.default_rng(5)
                vectors = [rng.normal(size=args.dim).astype(np.float32) for _ in words]
                mine = timed([lambda v=v: backend.vector_knn(v, flt, POOL) for v in vectors],
                             args.repeat)
                raw.execute("SET hnsw.ef_search = 100")
                floor = timed([lambda v=v: raw.execute(HAND_KNN, (
                    str(v.tolist()), [SCOPE, ""], NOW, str(v.tolist()), POOL)).fetchall()
                    for v in vectors], args.repeat)
                rows.append(("vector (HNSW)", p50(mine), p50(floor)))
        backend.close()
        ranked.close()
    print(f"{total:,} facts, {len(words)} queries x {args.repeat}, scope {SCOPE} + global, "
          f"pool {POOL}\n")
    print("| search | backend p50 ms | hand SQL p50 ms | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for name, ours, floor_ms in rows:
        print(f"| {name} | {ours:.2f} | {floor_ms:.2f} | {ours / floor_ms:.2f}x |")
    print("\n| writes | facts/s |")
    print("| --- | ---: |")
    print(f"| batch (1,000 per transaction{', with vectors' if args.dim else ''}) "
          f"| {batch_rate:,.0f} |")
    print(f"| one by one (a transaction each{', with vectors' if args.dim else ''}) "
          f"| {single_rate:,.0f} |")


if __name__ == "__main__":
    main()
