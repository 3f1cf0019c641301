"""FactStore.search against raw FTS5 doing the same work, query by query in one process.

    python benchmarks/store_search.py                    # 10k, 100k, 1M facts
    python benchmarks/store_search.py --sizes 10000,100000 --queries 200 --repeat 3
    python benchmarks/store_search.py --sizes 100000 --query-shares 1,0.2,0.15,0.1

Each size uses the shared store of the synthetic corpus (``benchmarks/_stores.py``:
built once under benchmarks/out/, its build resumed if interrupted). Generated
user messages, scopes alternating, ``limit=10``; messages with no word left to
search are left out. For each message, in turn (``benchmarks/_timing.py``):

- ``search``: ``FactStore.search(message, scope=..., limit=10)``, the default
  store (words only): sanitizing, the common-word check, the FTS5 candidates
  with the filters, reading them, ranking with decay and reinforcement,
  building hits, and the access-count write.
- ``cached``: the same with ``lexical_cache=True`` (BM25 from the in-memory
  copy of the index; loaded before timing, with the searches made while it
  loads reported apart), whose access counts are written in the background.
- floor ``fts``: raw FTS5 on its own connection doing the same work
  (``benchmarks/_floors.py``): the words the store searches, the same filter
  join, the same order, every column of the same 10 rows.
- ``fts alone``: FTS5 with the same words and no join, ids only (what the
  filter join and the row reads add to the floor).

Ratios are the median of per-message ratios with their 10th-90th percentiles.
``same ids``: the share of messages for which the store's ten hits are the
floor's ten rows, as a set and in order (equal BM25 scores may be ordered
differently: the store breaks such ties by decay, the floor by id). With
``--query-shares``, ``search`` is also timed on the last size with each ``QueryPolicy(max_query_share=...)``
in turn, with what the slowest fifth of the messages share.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_queries
from _floors import FtsFloor
from _inputs import positive_int, positive_ints, shares
from _record import Record
from _stores import corpus_store
from _timing import Load, Turns, in_turn, load_average
from ctxslots import FactStore, QueryPolicy
from ctxslots.stores.sanitize import to_match
from ctxslots.stores.stemming import stemmed_query

SCOPES = ("repo-alpha", "repo-beta")
LIMIT = 10


@dataclass(frozen=True)
class Work:
    """The messages searched, each with its scope and the words the store looks for."""

    queries: list[str]
    scopes: list[str]
    words: list[list[str]]
    dropped: int
    #: The words with the common ones kept, which a search whose words find nothing
    #: looks for instead (the floor too).
    relaxed: list[list[str]]

    @classmethod
    def of(cls, store: FactStore, messages: list[str]) -> Work:
        """The messages that leave words to search, scopes alternating."""
        kept = [(m, store.query_words(m)) for m in messages]
        usable = [(m, w) for m, w in kept if w]
        return cls([m for m, _ in usable], [SCOPES[i % 2] for i in range(len(usable))],
                   [w for _, w in usable], len(messages) - len(usable),
                   [store.query_words(m, relaxed=True) for m, _ in usable])


@dataclass(frozen=True)
class Loading:
    """The lexical copy's background load: seconds, and the searches made meanwhile (ms)."""

    seconds: float
    during: list[float]

    def describe(self) -> str:
        """``"2.4 s, 228 searches meanwhile at 9.42 ms p50"``."""
        if not self.during:
            return f"{self.seconds:.1f} s, no search meanwhile"
        return (f"{self.seconds:.1f} s, {len(self.during)} searches meanwhile at "
                f"{statistics.median(self.during):.2f} ms p50")


def load_copy(store: FactStore, work: Work) -> Loading:
    """Start the lexical copy's load with a first search, searching until it is ready."""
    started = time.perf_counter()
    store.search("warm up the in-memory lexical index", scope=SCOPES[0])
    during: list[float] = []
    while not store.load_lexical_cache(timeout=0):
        i = len(during) % len(work.queries)
        began = time.perf_counter_ns()
        store.search(work.queries[i], scope=work.scopes[i], limit=LIMIT)
        during.append((time.perf_counter_ns() - began) / 1e6)
    return Loading(time.perf_counter() - started, during)


def same_ids(store: FactStore, floor: FtsFloor, work: Work
             ) -> tuple[float, float, list[int]]:
    """The shares of messages whose ten hits are the floor's ten rows: in the same order,
    and as a set; and the messages that found nothing with their words and looked for
    the common ones too (untimed)."""
    now = time.time()
    in_order = as_set = 0
    relaxed_too: list[int] = []
    for i, (query, scope, words, relaxed) in enumerate(zip(
            work.queries, work.scopes, work.words, work.relaxed, strict=True)):
        found = store.search(query, scope=scope, limit=LIMIT, track_access=False)
        hits = [h.fact.id for h in found]
        rows = floor.ids(words, scope=scope, now=now, limit=LIMIT, relaxed=relaxed)
        in_order += hits == rows
        as_set += set(hits) == set(rows)
        if found and found[0].trace.fill == "relaxed":
            relaxed_too.append(i)
    return in_order / len(work.queries), as_set / len(work.queries), relaxed_too


def sides(store: FactStore, cached: FactStore, floor: FtsFloor, work: Work
          ) -> dict[str, Callable[[int], object]]:
    """The four sides timed in turn."""
    now = time.time()
    bare = "SELECT rowid, rank FROM facts_fts WHERE facts_fts MATCH ? ORDER BY rank LIMIT ?"
    matches = [to_match(stemmed_query(words)) for words in work.words]
    return {
        "search": lambda i: store.search(work.queries[i], scope=work.scopes[i], limit=LIMIT),
        "cached": lambda i: cached.search(work.queries[i], scope=work.scopes[i], limit=LIMIT),
        "fts": lambda i: floor.rows(work.words[i], scope=work.scopes[i], now=now, limit=LIMIT,
                                    relaxed=work.relaxed[i]),
        "fts alone": lambda i: floor.conn.execute(bare, (matches[i], LIMIT)).fetchall(),
    }


@dataclass
class SizeResult:
    """What one size measured."""

    facts: int
    turns: Turns
    loading: Loading
    same: tuple[float, float, list[int]]
    dropped: int

    def figures(self) -> dict[str, Any]:
        """The figures for a JSON record."""
        t = self.turns
        return {"facts": self.facts, "load": t.load.short(), "same_ids_in_order": self.same[0],
                "same_ids_as_set": self.same[1], "relaxed_too": len(self.same[2]),
                "dropped": self.dropped, "copy_load_s": self.loading.seconds,
                **{f"{side} p50": t.p(side) for side in t.times},
                **{f"{side} p95": t.p(side, 95) for side in t.times},
                "search / fts": t.ratio("search", "fts").as_dict(),
                "cached / fts": t.ratio("cached", "fts").as_dict(),
                "fts / fts alone": t.ratio("fts", "fts alone").as_dict()}


def measure(n: int, messages: list[str], repeat: int) -> SizeResult:
    """Every side on the ``n``-fact store, message by message."""
    path = corpus_store(n)
    with FactStore(path) as store, FactStore(path, lexical_cache=True) as cached:
        floor = FtsFloor.open(path)
        try:
            work = Work.of(store, messages)
            loading = load_copy(cached, work)
            same = same_ids(store, floor, work)
            turns = in_turn(sides(store, cached, floor, work), len(work.queries), repeat=repeat)
        finally:
            floor.close()
    return SizeResult(n, turns, loading, same, work.dropped)


def print_size(result: SizeResult) -> None:
    """One size's lines."""
    t = result.turns
    print(f"\n{result.facts:,} facts, {len(t.times['search'])} messages x "
          f"{len(t.times['search'][0])} ({result.dropped} left no word to search); {t.load}")
    print(f"{'':<11} {'p50':>9} {'p95':>9}   per-message ratio to fts (p10-p90)")
    for side in t.times:
        ratio = t.ratio(side, "fts")
        print(f"{side:<11} {t.p(side):>7.2f}ms {t.p(side, 95):>7.2f}ms   "
              f"{ratio.median:.2f}x ({ratio.spread()})")
    fell_back = result.same[2]
    searches = t.per_query("search")
    cost = (f" (their search {statistics.median(searches[i] for i in fell_back):.2f} ms p50)"
            if fell_back else "")
    print(f"same ten ids as the floor: {result.same[1]:.0%} of messages ({result.same[0]:.0%} "
          f"in the same order); {len(fell_back)} found nothing with their words and looked "
          f"for the common ones too{cost}; lexical copy load {result.loading.describe()}")


def share_sweep(n: int, messages: list[str], repeat: int, shares: list[float]) -> None:
    """``search`` with each ``max_query_share`` in turn (no access write), and the tail."""
    path = corpus_store(n)
    stores = {x: FactStore(path, query_policy=QueryPolicy(max_query_share=x)) for x in shares}
    try:
        work = Work.of(stores[shares[0]], messages)
        turns = in_turn({f"{x:g}": (lambda i, s=s: s.search(
            work.queries[i], scope=work.scopes[i], limit=LIMIT, track_access=False))
            for x, s in stores.items()}, len(work.queries), repeat=repeat)
        words = {x: [len(s.query_words(q)) for q in work.queries] for x, s in stores.items()}
    finally:
        for store in stores.values():
            store.close()
    print(f"\n{n:,} facts, search by max_query_share (track_access=False); {turns.load}")
    print(f"{'share':>6} | {'p50':>8} {'p95':>8} {'p95 / p50':>10} | slowest fifth")
    for x in shares:
        side = f"{x:g}"
        p50, p95 = turns.p(side), turns.p(side, 95)
        print(f"{side:>6} | {p50:>6.2f}ms {p95:>6.2f}ms {p95 / p50:>9.2f}x | "
              f"{slowest_fifth(turns.per_query(side), words[x])}")


def slowest_fifth(per_query: list[float], words: list[int]) -> str:
    """The median time and mean words kept of the slowest fifth of the messages."""
    order = sorted(range(len(per_query)), key=lambda i: -per_query[i])
    slow = order[:max(1, len(order) // 5)]
    return (f"{statistics.median(per_query[i] for i in slow):.1f} ms, "
            f"{statistics.mean(words[i] for i in slow):.1f} words kept")


def main() -> None:
    """Measure every size, print the tables, write the record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive_ints, default="10000,100000,1000000")
    parser.add_argument("--queries", type=positive_int, default=200)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--query-shares", type=shares, default=[],
                        help="comma-separated max_query_share values to compare on the last size")
    parser.add_argument("--json", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    messages = generate_queries(args.queries, seed=1)
    sizes = args.sizes
    record = Record("store_search")
    started = load_average()
    for n in sizes:
        result = measure(n, messages, args.repeat)
        print_size(result)
        record.figures[str(n)] = result.figures()
    if args.query_shares:
        share_sweep(sizes[-1], messages, args.repeat, args.query_shares)
    record.add_load(Load.around(started))
    record.write(args.json)


if __name__ == "__main__":
    main()
