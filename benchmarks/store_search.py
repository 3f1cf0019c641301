"""FactStore.search and inserts against raw SQLite doing the same work.

    python benchmarks/store_search.py                    # 10k, 100k, 1M facts
    python benchmarks/store_search.py --sizes 10000,100000 --queries 200

For each size a store file is built once under benchmarks/out/ (reused on the
next run). Then, in the same run and on the same file:

- ``search``: ``FactStore.search(query, scope=..., limit=10)``: sanitizing,
  the FTS5 query with slot/scope/expiry filters, ranking with decay and
  reinforcement, building Hits, and the access-count update.
- floor ``fts``: the raw FTS5 query alone,
  ``SELECT rowid, rank FROM facts_fts WHERE facts_fts MATCH ? ORDER BY rank LIMIT 10``,
  with the same words the store searches (stop words and words found in more
  than 10% of the facts left out).
- floor ``fts+filter``: the same with the scope/expiry join, i.e. the same
  candidate SQL the store runs, with nothing around it.
- ``cached``: ``FactStore.search`` with ``lexical_cache=True`` (BM25 from an
  in-memory copy of the index), timed once loaded; ``load`` is its background
  load from the first search, and ``during load`` the searches made meanwhile
  (on FTS5, sharing the interpreter with the loading thread),
- ``plain fts``: the raw FTS5 query with every sanitized word (stop words out,
  common words kept): what a store without common-word pruning runs.

Inserts: facts per second through ``FactStore.add``/``upsert`` in one
transaction, against ``executemany`` of raw INSERTs into the same schema.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_facts, generate_queries  # noqa: E402

from ctxslots import FactStore, Limits  # noqa: E402
from ctxslots.stores.sqlite import open_connection  # noqa: E402
from ctxslots.stores.sanitize import sanitize_query, to_match  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
SCOPES = ("repo-alpha", "repo-beta")


def build(path: Path, n: int, chunk: int = 100_000) -> float:
    """Fill a new store with n facts; return facts/s of the first one-transaction chunk."""
    rate = 0.0
    # One transaction per chunk, so the first chunk's rate is one large write.
    with FactStore(path, limits=Limits(max_batch=chunk)) as store:
        facts = generate_facts(n, seed=0)
        done = 0
        while done < n:
            batch = [next(facts) for _ in range(min(chunk, n - done))]
            start = time.perf_counter()
            with store.batch():
                for f in batch:
                    if f.key:
                        store.upsert(f.slot, f.key, f.value, scope=f.scope, tags=f.tags)
                    else:
                        store.add(f.slot, f.value, scope=f.scope, tags=f.tags)
            if not rate:
                rate = len(batch) / (time.perf_counter() - start)
            done += len(batch)
    return rate


def raw_insert_rate(path: Path, n: int) -> float:
    """Facts/s of raw executemany INSERTs into the same schema, one transaction."""
    if path.exists():
        path.unlink()
    conn = open_connection(path)
    rows = [
        (f.slot, f.scope or "", f.key, f.value, "\n".join(f.tags), 1.0, 1.0)
        for f in generate_facts(n, seed=0)
    ]
    start = time.perf_counter()
    with conn.write():
        conn.executemany(
            "INSERT INTO facts (slot, scope, key, value, tags, created_at, updated_at) "
            "VALUES (?,?,?,?,?,?,?)",
            rows,
        )
    rate = n / (time.perf_counter() - start)
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return rate


def store_file(n: int) -> tuple[Path, float | None]:
    """The cached store of n facts, built if missing; with its build insert rate."""
    OUT.mkdir(exist_ok=True)
    path = OUT / f"store_{n}.db"
    if path.exists():
        conn = open_connection(path)
        count = conn.scalar("SELECT count(*) FROM facts")
        conn.close()
        if count == n:
            return path, None
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path, build(path, n)


def timed(fn, args_list, repeat: int) -> list[float]:
    """Milliseconds per call, every call of every repeat."""
    for args in args_list[:20]:  # warm the page cache
        fn(*args)
    out = []
    for _ in range(repeat):
        for args in args_list:
            start = time.perf_counter_ns()
            fn(*args)
            out.append((time.perf_counter_ns() - start) / 1e6)
    return out


def during_load(values: list[float]) -> str:
    """p50 and count of the searches made while the lexical copy loaded."""
    if len(values) < 2:
        return f"{len(values)} searches"
    return f"{pct(values, 50):.2f}ms p50 over {len(values)} searches"


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def bench_size(n: int, queries: list[str], repeat: int) -> dict[str, float]:
    path, rate = store_file(n)
    row: dict[str, float] = {"n": n}
    if rate:
        row["insert_rate"] = rate
    work = [(q, SCOPES[i % 2]) for i, q in enumerate(queries)]
    now = time.time()

    store = FactStore(path)
    conn = open_connection(path)
    # The store's own query (common words left out) and the plain sanitized one.
    sanitized = [(to_match(store.query_words(q)), s) for q, s in work]
    plain = [(sanitize_query(q), s) for q, s in work]
    fts_sql = ("SELECT rowid, rank FROM facts_fts WHERE facts_fts MATCH ? "
               "ORDER BY rank LIMIT 10")
    cached = FactStore(path, lexical_cache=True)
    try:
        # The first search starts the background load; searches meanwhile use FTS5.
        start = time.perf_counter()
        cached.search("warm up the in-memory lexical index", scope=SCOPES[0])
        during: list[float] = []
        while not cached.load_lexical_cache(timeout=0):
            q, s = work[len(during) % len(work)]
            began = time.perf_counter_ns()
            cached.search(q, scope=s, limit=10)
            during.append((time.perf_counter_ns() - began) / 1e6)
        row["cache_load_s"] = time.perf_counter() - start
        row["during_load"] = during
        row["search_cached"] = timed(lambda q, s: cached.search(q, scope=s, limit=10), work,
                                     repeat)
    finally:
        cached.close()
    try:
        row["search"] = timed(lambda q, s: store.search(q, scope=s, limit=10), work, repeat)
        row["fts"] = timed(lambda m, s: m and conn.execute(fts_sql, (m,)).fetchall(),
                           sanitized, repeat)
        row["fts_plain"] = timed(lambda m, s: m and conn.execute(fts_sql, (m,)).fetchall(),
                                 plain, repeat)
        row["fts_filter"] = timed(
            lambda m, s: m and conn.execute(
                "SELECT f.id, facts_fts.rank FROM facts_fts JOIN facts AS f "
                "ON f.id = facts_fts.rowid WHERE facts_fts MATCH ? AND f.scope IN (?, '') "
                "AND (f.expires_at IS NULL OR f.expires_at > ?) ORDER BY facts_fts.rank "
                "LIMIT 50", (m, s, now)).fetchall(),
            sanitized, repeat)
    finally:
        store.close()
        conn.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--raw-insert", type=int, default=100_000,
                        help="facts for the raw-INSERT floor (0 to skip)")
    args = parser.parse_args()
    queries = generate_queries(args.queries, seed=1)
    empty = sum(1 for q in queries if not sanitize_query(q))
    print(f"ctxslots store benchmark: {args.queries} queries ({empty} sanitize to nothing), "
          f"repeat {args.repeat}, python {sys.version.split()[0]}, {os.cpu_count()} cpus\n")

    print(f"{'facts':>9} | {'search p50':>10} {'p95':>7} | {'fts p50':>8} {'p95':>7} | "
          f"{'fts+filter p50':>14} {'p95':>7} | {'ratio vs fts':>12} {'vs fts+filter':>13} | "
          f"{'plain fts p50':>13} {'p95':>7} | {'cached p50':>10} {'p95':>7} {'load':>6} | during load")
    print("-" * 164)
    rates = []
    for n in (int(s) for s in args.sizes.split(",")):
        row = bench_size(n, queries, args.repeat)
        s50, s95 = pct(row["search"], 50), pct(row["search"], 95)
        f50, f95 = pct(row["fts"], 50), pct(row["fts"], 95)
        j50, j95 = pct(row["fts_filter"], 50), pct(row["fts_filter"], 95)
        print(f"{n:>9,} | {s50:>8.2f}ms {s95:>5.2f}ms | {f50:>6.2f}ms {f95:>5.2f}ms | "
              f"{j50:>12.2f}ms {j95:>5.2f}ms | {s50 / f50:>11.2f}x {s50 / j50:>12.2f}x | "
              f"{pct(row['fts_plain'], 50):>11.2f}ms {pct(row['fts_plain'], 95):>5.2f}ms | "
              f"{pct(row['search_cached'], 50):>8.2f}ms {pct(row['search_cached'], 95):>5.2f}ms "
              f"{row['cache_load_s']:>5.1f}s | {during_load(row['during_load'])}")
        if "insert_rate" in row:
            rates.append((n, row["insert_rate"]))

    if args.raw_insert:
        raw = raw_insert_rate(OUT / "raw_insert.db", args.raw_insert)
        print(f"\ninserts, one transaction: raw executemany {raw:,.0f} facts/s")
        for n, rate in rates:
            print(f"  FactStore.add/upsert while building {n:,}: {rate:,.0f} facts/s "
                  f"(ratio {raw / rate:.2f}x slower than raw)")
        if not rates:
            print("  (stores were cached; delete benchmarks/out/ to measure FactStore inserts)")


if __name__ == "__main__":
    main()
