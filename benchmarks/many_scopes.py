"""What many scopes cost a SQLite store: file size, and search in one scope among many.

    python benchmarks/many_scopes.py                       # 10 and 10,000 other scopes
    python benchmarks/many_scopes.py --scopes 10,1000,10000 --embedder hash

For each count N a fresh store gets one fact in each of N scopes, plus a
target scope of 500 facts; then, in the same run and on the same file:

- ``file``: the database size (after a WAL checkpoint) and bytes per fact;
message by message in turn (``benchmarks/_timing.py``; messages with no word
to search left out):

- ``search``: ``FactStore.search(query, scope="target", limit=10)`` p50;
- floor ``fts``: the raw FTS5 query doing the same work on its own connection
  (``benchmarks/_floors.py``: the store's words, its filter join, the ten rows);
- ``vector``: with ``--embedder`` other than ``none``, the vector leg alone
  (exact KNN of the target scope read from the vector table), p50.

The ratio is the median of per-message ratios, with their 10th-90th percentiles.

A search in one scope should cost the same whatever N is.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_facts, generate_queries
from _engine import open_engine, search_filter
from _floors import FtsFloor
from _inputs import embedder_spec, or_none, positive_int, whole_numbers
from _timing import in_turn
from ctxslots import FactStore, Limits, RankingPolicy

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


def sides(path: Path, store: FactStore, queries: list[str], embedder: str, stack: ExitStack
          ) -> dict[str, Callable[[int], object]]:
    """The search, its FTS5 floor and, with vectors, the vector leg alone."""
    floor = FtsFloor.open(path)
    stack.callback(floor.close)
    words = [store.query_words(q) for q in queries]
    relaxed = [store.query_words(q, relaxed=True) for q in queries]
    now = time.time()
    out: dict[str, Callable[[int], object]] = {
        "search": lambda i: store.search(queries[i], scope="target", track_access=False),
        "fts": lambda i: floor.rows(words[i], scope="target", now=now, limit=10,
                                    relaxed=relaxed[i])}
    if embedder != "none":
        # The vector leg alone, asked of the engine (see benchmarks/_engine.py).
        backend = open_engine(path, vector_cache=False)
        stack.callback(backend.close)
        flt = search_filter("target", now=now)
        vectors = [store.embedder.embed([q])[0] for q in queries]
        out["vector"] = lambda i: backend.vector_knn(vectors[i], flt, 50)
    return out


def run(scopes: int, queries: list[str], embedder: str, repeat: int, folder: Path
        ) -> dict[str, Any]:
    """Build the store of ``scopes`` other scopes, time its search and floor in turn."""
    path = folder / f"scopes-{scopes}.db"
    build(path, scopes, embedder)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    size = os.path.getsize(path)
    emb: object = False if embedder == "none" else embedder
    with FactStore(path, embedder=emb, vector_cache=False,
                   ranking=RankingPolicy(vector_weight=0.0)) as store, ExitStack() as stack:
        searched = [q for q in queries if store.query_words(q)]
        turns = in_turn(sides(path, store, searched, embedder, stack), len(searched),
                        repeat=repeat)
    return {"scopes": scopes, "facts": scopes + TARGET, "size": size, "turns": turns}


def main() -> None:
    """Every count of other scopes, one line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scopes", type=whole_numbers, default="10,10000",
                        help="comma-separated counts of other scopes")
    parser.add_argument("--embedder", type=or_none(embedder_spec), default="hash",
                        help="embedder spec for the stores (their vectors kept), or 'none' for "
                             "the words-only default store (default: hash)")
    parser.add_argument("--queries", type=positive_int, default=200, help="queries per run")
    parser.add_argument("--repeat", type=positive_int, default=3, help="times each query is run")
    args = parser.parse_args()
    queries = generate_queries(args.queries, seed=5)
    print(f"{'scopes':>7} {'facts':>7} | {'file MB':>8} {'B/fact':>7} | {'search p50':>10} "
          f"{'fts p50':>8} {'ratio (p10-p90)':>22} | {'vector p50':>10} | load")
    with tempfile.TemporaryDirectory() as tmp:
        for count in args.scopes:
            r = run(count, queries, args.embedder, args.repeat, Path(tmp))
            t = r["turns"]
            ratio = t.ratio("search", "fts")
            vector = f"{t.p('vector'):>8.3f}ms" if "vector" in t.times else f"{'-':>10}"
            print(f"{r['scopes']:>7} {r['facts']:>7} | {r['size'] / 1e6:>8.2f} "
                  f"{r['size'] / r['facts']:>7.0f} | {t.p('search'):>8.3f}ms "
                  f"{t.p('fts'):>6.3f}ms {ratio.median:>6.2f}x ({ratio.spread()}) | {vector} | "
                  f"{t.load.short()}")


if __name__ == "__main__":
    main()
