"""FactStore.search and inserts against raw SQLite doing the same work.

    python benchmarks/store_search.py                    # 10k, 100k, 1M facts
    python benchmarks/store_search.py --sizes 10000,100000 --queries 200
    python benchmarks/store_search.py --sizes 100000 --raw-insert 0 --query-shares 1,0.2,0.15,0.1

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

The tail: ``search`` p95 / p50, and what the slowest fifth of the queries
(by their median time) share against the rest: the facts their kept words
match (``SELECT count(*) ... MATCH``, what FTS5 must score) and how many words
they keep.

With ``--query-shares``, ``search`` is also timed on the last size with each
``QueryPolicy(max_query_share=...)``, query by query in a rotating order.

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

from _corpus import generate_facts, generate_queries
from ctxslots import FactStore, Limits, QueryPolicy
from ctxslots.stores.sanitize import sanitize_query, to_match
from ctxslots.stores.sqlite import open_connection

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
        row["tail"] = tail(row["search"], work, store, conn)
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


def tail(times: list[float], work: list[tuple[str, str]], store: FactStore, conn) -> str:
    """What the slowest fifth of the queries share, against the rest."""
    per_query = [statistics.median(times[i::len(work)]) for i in range(len(work))]
    facts = []
    for q, _ in work:
        match = to_match(store.query_words(q))
        facts.append(conn.scalar("SELECT count(*) FROM facts_fts WHERE facts_fts MATCH ?",
                                 (match,)) if match else 0)
    words = [len(store.query_words(q)) for q, _ in work]
    order = sorted(range(len(work)), key=lambda i: -per_query[i])
    slow, rest = order[:len(order) // 5], order[len(order) // 5:]

    def describe(group: list[int]) -> str:
        return (f"{statistics.median(per_query[i] for i in group):.1f} ms, "
                f"{statistics.median(facts[i] for i in group):,.0f} facts matched, "
                f"{statistics.mean(words[i] for i in group):.1f} words")

    return f"slowest fifth {describe(slow)}; the rest {describe(rest)}"


def share_sweep(n: int, queries: list[str], repeat: int, shares: list[float]) -> None:
    """search p50 and p95 with each max_query_share, in one run on the same file."""
    path, _ = store_file(n)
    work = [(q, SCOPES[i % 2]) for i, q in enumerate(queries)]
    stores = {x: FactStore(path, query_policy=QueryPolicy(max_query_share=x)) for x in shares}
    times: dict[float, list[float]] = {x: [] for x in shares}
    try:
        for store in stores.values():
            for q, scope in work[:20]:
                store.search(q, scope=scope, track_access=False)
        for _ in range(repeat):
            for i, (q, scope) in enumerate(work):
                for x in shares[i % len(shares):] + shares[:i % len(shares)]:
                    start = time.perf_counter_ns()
                    stores[x].search(q, scope=scope, track_access=False)
                    times[x].append((time.perf_counter_ns() - start) / 1e6)
    finally:
        for store in stores.values():
            store.close()
    print(f"\n{n:,} facts, search by max_query_share (track_access=False):")
    print(f"{'share':>6} | {'p50':>8} {'p95':>8} {'p95 / p50':>10}")
    for x in shares:
        p50, p95 = pct(times[x], 50), pct(times[x], 95)
        print(f"{x:>6g} | {p50:>6.2f}ms {p95:>6.2f}ms {p95 / p50:>9.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--raw-insert", type=int, default=100_000,
                        help="facts for the raw-INSERT floor (0 to skip)")
    parser.add_argument("--query-shares", default="",
                        help="comma-separated max_query_share values to compare on the last size")
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
    tails: list[str] = []
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
        tails.append(f"{n:>9,}: search p95 / p50 {s95 / s50:.2f}; {row['tail']}")
        if "insert_rate" in row:
            rates.append((n, row["insert_rate"]))
    print("\n" + "\n".join(tails))
    if args.query_shares:
        share_sweep(n, queries, args.repeat, [float(x) for x in args.query_shares.split(",")])

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
