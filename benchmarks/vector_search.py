"""The vector leg against numpy doing the same exact scan, and hybrid search.

    python benchmarks/vector_search.py                   # 100k facts
    python benchmarks/vector_search.py --sizes 100000,1000000

Uses the stores built by benchmarks/store_search.py (hashing embedder, 384
dimensions; built if missing). For each query, in the same run:

- floor ``numpy``: a pre-normalised float32 matrix of exactly the rows the
  search may see (the query's scope plus global facts), ``matrix @ q`` and
  ``argpartition`` for the top 50: the exact-scan floor.
- ``cache``: the store's vector leg through its in-memory cache (sync check +
  scan + top 50), ``VectorCache.knn`` after ``sync``.
- ``vec0``: the same KNN through sqlite-vec's ``vec0`` (one query per scope
  partition).
- ``hybrid cached``: the same with ``lexical_cache=True`` (the lexical leg from
  in-memory postings; its load happens before timing).
- ``hybrid``: ``FactStore.search`` with both legs at weight 1 (query embedding,
  BM25, KNN, fusion, ranking, access tracking).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_queries  # noqa: E402
from store_search import SCOPES, pct, store_file, timed  # noqa: E402

from ctxslots import FactStore, RankingPolicy  # noqa: E402
from ctxslots.stores.vectors import TABLE  # noqa: E402


def floor_matrices(store: FactStore) -> dict[str, np.ndarray]:
    """Per scope, the normalised matrix of the rows a search in that scope may see."""
    out = {}
    for scope in SCOPES:
        blobs = [r[0] for r in store._conn.execute(
            f"SELECT embedding FROM {TABLE} WHERE scope IN (?, '')", (scope,))]
        out[scope] = np.frombuffer(b"".join(blobs), np.float32).reshape(len(blobs), -1).copy()
    return out


def numpy_knn(matrix: np.ndarray, q: np.ndarray, k: int = 50) -> np.ndarray:
    """The floor: exact top-k cosine over a pre-normalised matrix."""
    sims = matrix @ q
    top = np.argpartition(-sims, k - 1)[:k]
    return top[np.argsort(-sims[top])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    queries = generate_queries(args.queries, seed=1)
    print(f"vector leg benchmark: {args.queries} queries, k = 50, repeat {args.repeat}\n")
    print(f"{'facts':>9} | {'rows seen':>9} | {'numpy p50':>9} | {'cache p50':>9} {'ratio':>6} | "
          f"{'vec0 p50':>9} {'ratio':>6} | {'hybrid p50':>10} {'p95':>8} | {'lexical p50':>11} | "
          f"{'hybrid cached p50':>17} {'p95':>8}")
    print("-" * 142)
    for n in (int(s) for s in args.sizes.split(",")):
        path, _ = store_file(n)
        hybrid = FactStore(path, ranking=RankingPolicy(vector_weight=1.0))
        lexical = FactStore(path)
        direct = FactStore(path, vector_cache=False, ranking=RankingPolicy(vector_weight=1.0))
        both = FactStore(path, ranking=RankingPolicy(vector_weight=1.0), lexical_cache=True)
        try:
            emb = hybrid.embedder
            work = [(q, SCOPES[i % 2]) for i, q in enumerate(queries)]
            vecs = [(emb.embed([q])[0], s) for q, s in work]
            floors = floor_matrices(hybrid)
            seen = int(np.mean([floors[s].shape[0] for s in SCOPES]))
            hybrid.search("warm the cache", scope=SCOPES[0])
            cache = hybrid._cache
            assert cache is not None

            def cache_knn(v: np.ndarray, s: str) -> object:
                cache.sync(hybrid._conn)
                return cache.knn(v, [s, ""], None, 50)

            t_numpy = timed(lambda v, s: numpy_knn(floors[s], v), vecs, args.repeat)
            t_cache = timed(cache_knn, vecs, args.repeat)
            t_vec0 = timed(lambda v, s: direct._index.knn(v, [s, ""], None, 50), vecs, 1)
            t_hybrid = timed(lambda q, s: hybrid.search(q, scope=s), work, args.repeat)
            t_lex = timed(lambda q, s: lexical.search(q, scope=s), work, args.repeat)
            both.search("warm the caches", scope=SCOPES[0])
            t_both = timed(lambda q, s: both.search(q, scope=s), work, args.repeat)
        finally:
            both.close()
            hybrid.close()
            lexical.close()
            direct.close()
        n50, c50, v50 = pct(t_numpy, 50), pct(t_cache, 50), pct(t_vec0, 50)
        print(f"{n:>9,} | {seen:>9,} | {n50:>7.2f}ms | {c50:>7.2f}ms {c50 / n50:>5.2f}x | "
              f"{v50:>7.2f}ms {v50 / n50:>5.2f}x | {pct(t_hybrid, 50):>8.2f}ms "
              f"{pct(t_hybrid, 95):>6.2f}ms | {pct(t_lex, 50):>9.2f}ms | "
              f"{pct(t_both, 50):>15.2f}ms {pct(t_both, 95):>6.2f}ms")


if __name__ == "__main__":
    main()
