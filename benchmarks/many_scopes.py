"""What many scopes cost a SQLite store: file size, and search in one scope among many.

    python benchmarks/many_scopes.py                       # 10 and 10,000 other scopes
    python benchmarks/many_scopes.py --scopes 10,1000,10000 --embedder hash

For each count N a fresh store gets one fact in each of N scopes, plus a
target scope of 500 facts; then, in the same run and on the same file:

- ``file``: the database size (after a WAL checkpoint) and bytes per fact;
- ``search``: ``FactStore.search(query, scope="target", limit=10)`` p50;
- floor ``fts``: the raw FTS5 query with the scope filter the store applies,
  ``SELECT ... FROM facts_fts JOIN facts ... WHERE MATCH ? AND scope IN (?, '')
  ORDER BY rank LIMIT 10``, on its own connection;
- ``vector``: with ``--embedder`` other than ``none``, the vector leg alone
  (exact KNN of the target scope read from the vector table), p50.

A search in one scope should cost the same whatever N is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_facts, generate_queries
from ctxslots import FactStore, Limits, RankingPolicy
from ctxslots.stores.backend import FactFilter
from ctxslots.stores.sanitize import to_match
from ctxslots.stores.sqlite import open_connection

TARGET = 500


def build(path: Path, scopes: int, embedder: str) -> None:
    """One fact in each of ``scopes`` scopes and ``TARGET`` facts in scope ``target``."""
    facts = generate_facts(scopes + TARGET, seed=3)
    emb: object = False if embedder == "none" else embedder
    # With an embedder, vectors are kept (vector weight 1): the larger file.
    ranking = RankingPolicy(vector_weight=0.0 if embedder == "none" else 1.0)
    with FactStore(path, embedder=emb, ranking=ranking,
                   limits=Limits(max_batch=scopes + TARGET)) as store, store.batch():
        for i in range(scopes):
            store.add("agent", next(facts).value, scope=f"user-{i:05d}")
        for _ in range(TARGET):
            store.add("agent", next(facts).value, scope="target")


def timed(fn, args: list, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        for a in args:
            start = time.perf_counter()
            fn(a)
            out.append((time.perf_counter() - start) * 1000)
    return out


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def run(scopes: int, queries: list[str], embedder: str, repeat: int, folder: Path) -> dict:
    path = folder / f"scopes-{scopes}.db"
    build(path, scopes, embedder)
    conn = open_connection(path, migrate=False)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    size = os.path.getsize(path)
    emb: object = False if embedder == "none" else embedder
    with FactStore(path, embedder=emb, vector_cache=False,
                   ranking=RankingPolicy(vector_weight=0.0)) as store:  # words-only search timed
        words = [store.query_words(q) for q in queries]
        t_search = timed(lambda q: store.search(q, scope="target", track_access=False),
                         queries, repeat)
        t_vector: list[float] = []
        if embedder != "none":
            flt = FactFilter(scopes=("target", ""))
            vectors = [store.embedder.embed([q])[0] for q in queries]
            t_vector = timed(lambda v: store.backend.vector_knn(v, flt, 50), vectors, repeat)

    def fts(w: list[str]) -> object:
        match = to_match(w)
        if not match:
            return []
        return conn.execute(
            "SELECT f.id, facts_fts.rank FROM facts_fts JOIN facts AS f ON f.id = facts_fts.rowid "
            "WHERE facts_fts MATCH ? AND f.scope IN (?, '') AND (f.expires_at IS NULL OR "
            "f.expires_at > ?) ORDER BY facts_fts.rank LIMIT 10",
            (match, "target", time.time())).fetchall()

    t_fts = timed(fts, words, repeat)
    conn.close()
    return {"scopes": scopes, "facts": scopes + TARGET, "size": size,
            "search": p50(t_search), "fts": p50(t_fts), "vector": p50(t_vector)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scopes", default="10,10000", help="comma-separated counts of other scopes")
    parser.add_argument("--embedder", default="hash",
                        help="embedder spec for the stores (their vectors kept), or 'none' for "
                             "the words-only default store (default: hash)")
    parser.add_argument("--queries", type=int, default=200, help="queries per run")
    parser.add_argument("--repeat", type=int, default=3, help="times each query is run")
    args = parser.parse_args()
    queries = generate_queries(args.queries, seed=5)
    print(f"{'scopes':>7} {'facts':>7} | {'file MB':>8} {'B/fact':>7} | {'search p50':>10} "
          f"{'fts p50':>8} {'ratio':>6} | {'vector p50':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for count in [int(c) for c in args.scopes.split(",")]:
            r = run(count, queries, args.embedder, args.repeat, Path(tmp))
            print(f"{r['scopes']:>7} {r['facts']:>7} | {r['size'] / 1e6:>8.2f} "
                  f"{r['size'] / r['facts']:>7.0f} | {r['search']:>8.3f}ms {r['fts']:>6.3f}ms "
                  f"{r['search'] / max(r['fts'], 1e-9):>5.2f}x | {r['vector']:>8.3f}ms")


if __name__ == "__main__":
    main()
