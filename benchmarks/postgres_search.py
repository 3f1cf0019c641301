"""The PostgreSQL engine's search against the same SQL written by hand, query by query.

    python benchmarks/postgres_search.py                          # private pgserver, 100k facts
    python benchmarks/postgres_search.py --sizes 10000 --queries 100
    python benchmarks/postgres_search.py --url postgresql://user@host/db --sizes 100000

Each size uses database ``ctxslots_corpus_N`` holding the synthetic corpus,
written through ``FactStore(url)`` (``benchmarks/_stores.py``: built once,
resumed if interrupted; the private server's data is kept under
benchmarks/out/pgdata). Generated messages, scope ``repo-alpha`` or
``repo-beta`` in turn (each with the global facts), live facts, messages
with no word to search left out. For each message, in turn
(``benchmarks/_timing.py``):

- ``engine``: what a search asks of the engine for its words (opened on its
  own, ``benchmarks/_engine.py``): the document counts of the sanitized words
  (the common ones are left out), then ``lexical`` (BM25), pool = the
  store's candidate pool (100);
- floor ``hand SQL``: the same BM25 statement typed out below (the query's
  stems and their document counts, the matches with the filters (owners,
  scope, expiry, near-duplicates), term
  frequencies from the tsvector cut to the query's stems, the context's
  occurrences at half weight through the ``context_search`` join, the same
  columns, the same pool), on a plain psycopg connection with the words the
  engine searched and the same statistics;
- ``search``: ``FactStore(url).search(message, scope=..., limit=10)`` through
  the public API (words only: ranking, hits, the access-count write);
- floor ``hand SQL, 10 rows``: the hand statement returning the ten rows the
  search returns.

Ratios are the median of per-message ratios with their 10th-90th
percentiles; ``same ids`` checks (untimed) that each floor returns what its
side does. ``--writes N`` also times N facts written into a fresh database,
a transaction of 250 facts and 250 facts one transaction each, in turn.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

from _corpus import generate_facts, generate_queries
from _engine import engine_search, open_engine, search_filter
from _inputs import positive_int, positive_ints, whole_number
from _pg import Server, server
from _pg_hand import HandBM25
from _record import Record
from _stores import OUT, corpus_database, write_facts
from _timing import Load, Ratio, Turns, in_turn, load_average
from ctxslots import FactStore, Limits
from ctxslots.stores.backend import FACT_COLUMNS, Backend
from ctxslots.stores.owners import DEFAULT_AGENT, DEFAULT_USER
from ctxslots.stores.sanitize import DEFAULT_POLICY, query_tokens

SCOPES = ("repo-alpha", "repo-beta")
LIMIT = 10
_COLUMNS = ", ".join(f"f.{c}" for c in FACT_COLUMNS)

@dataclass(frozen=True)
class Work:
    """Messages with words to search: scope, the sanitized words, the words searched."""

    queries: list[str]
    scopes: list[str]
    tokens: list[list[str]]
    words: list[list[str]]
    dropped: int
    #: The words with the common ones kept, which a search whose words find nothing
    #: looks for instead (its hand SQL too).
    relaxed: list[list[str]]

    @classmethod
    def of(cls, store: FactStore, messages: list[str]) -> Work:
        """The messages that leave words to search (the store's own words), scopes in turn."""
        kept = [(m, store.query_words(m)) for m in messages]
        usable = [(m, w) for m, w in kept if w]
        return cls([m for m, _ in usable], [SCOPES[i % 2] for i in range(len(usable))],
                   [query_tokens(m, DEFAULT_POLICY) for m, _ in usable],
                   [w for _, w in usable], len(messages) - len(usable),
                   [store.query_words(m, relaxed=True) for m, _ in usable])


@dataclass
class HandSQL:
    """The floor: the engine's BM25 statement typed out (``benchmarks/_pg_hand.py``) on a
    plain connection, with the engine's statistics."""

    conn: psycopg.Connection[Any]
    bm25: HandBM25

    @classmethod
    def open(cls, url: str) -> HandSQL:
        """A plain autocommit connection and the table's N and mean document length."""
        conn = psycopg.connect(url, autocommit=True)
        return cls(conn, HandBM25.open(conn))

    def rows(self, words: Sequence[str], scope: str, now: float, limit: int, *,
             context: bool = True, prepare: bool | None = None,
             relaxed: Sequence[str] = ()) -> list[Any]:
        """The best ``limit`` facts for ``words`` in ``scope`` and the global facts
        (``context=False``: without the context's words, less than the engine does);
        for ``relaxed`` when none match (see ``HandBM25.rows``)."""
        return self.bm25.rows(words, [DEFAULT_USER, ""], [DEFAULT_AGENT, ""], [scope, ""], now,
                              limit, columns=_COLUMNS, context=context, prepare=prepare,
                              relaxed=relaxed)


def sides(store: FactStore, backend: Backend, hand: HandSQL, work: Work
          ) -> dict[str, Callable[[int], object]]:
    """The four sides timed in turn."""
    now = time.time()
    pool = store.candidate_pool
    flts = {s: search_filter(s, now=now) for s in SCOPES}
    return {
        "engine": lambda i: engine_search(backend, work.tokens[i], flts[work.scopes[i]], pool,
                                          DEFAULT_POLICY),
        "hand SQL": lambda i: hand.rows(work.words[i], work.scopes[i], now, pool),
        "search": lambda i: store.search(work.queries[i], scope=work.scopes[i], limit=LIMIT),
        "hand SQL, 10 rows": lambda i: hand.rows(work.words[i], work.scopes[i], now, LIMIT,
                                                 relaxed=work.relaxed[i]),
    }


def same_ids(store: FactStore, backend: Backend, hand: HandSQL, work: Work
             ) -> tuple[float, float]:
    """Shares of messages where the engine's candidates and the search's hits are the hand
    statement's rows (untimed)."""
    now = time.time()
    engine = search = 0
    for i, scope in enumerate(work.scopes):
        flt = search_filter(scope, now=now)
        found = [int(c.row["id"]) for c in engine_search(backend, work.tokens[i], flt,
                                                          store.candidate_pool, DEFAULT_POLICY)]
        engine += found == [int(r[0]) for r in hand.rows(work.words[i], scope, now,
                                                          store.candidate_pool)]
        hits = [h.fact.id for h in store.search(work.queries[i], scope=scope, limit=LIMIT,
                                                 track_access=False)]
        search += set(hits) == {int(r[0]) for r in hand.rows(work.words[i], scope, now, LIMIT,
                                                             relaxed=work.relaxed[i])}
    return engine / len(work.scopes), search / len(work.scopes)


@dataclass
class SizeResult:
    """What one size measured."""

    facts: int
    turns: Turns
    same: tuple[float, float]
    dropped: int

    def ratios(self) -> dict[str, Ratio]:
        """Each side over its floor."""
        return {"engine / hand SQL": self.turns.ratio("engine", "hand SQL"),
                "search / hand SQL, 10 rows": self.turns.ratio("search", "hand SQL, 10 rows")}

    def figures(self) -> dict[str, Any]:
        """The figures for a JSON record."""
        t = self.turns
        return {"facts": self.facts, "load": t.load.short(), "same_ids_engine": self.same[0],
                "same_ids_search": self.same[1], "dropped": self.dropped,
                **{f"{side} p50": t.p(side) for side in t.times},
                **{name: r.as_dict() for name, r in self.ratios().items()}}


def measure(srv: Server, n: int, messages: list[str], repeat: int) -> SizeResult:
    """Every side on the ``n``-fact database, message by message."""
    url = corpus_database(srv, n)
    backend = open_engine(url)
    hand = HandSQL.open(url)
    try:
        with FactStore(url) as store:
            work = Work.of(store, messages)
            same = same_ids(store, backend, hand, work)
            turns = in_turn(sides(store, backend, hand, work), len(work.queries), repeat=repeat)
    finally:
        backend.close()
        hand.conn.close()
    return SizeResult(hand.bm25.facts, turns, same, work.dropped)


def print_size(result: SizeResult) -> None:
    """One size's lines."""
    t = result.turns
    print(f"\n{result.facts:,} facts, {len(t.times['engine'])} messages x "
          f"{len(t.times['engine'][0])} ({result.dropped} left no word to search); {t.load}")
    print(f"{'':<18} {'p50':>9} {'p95':>9}")
    for side in t.times:
        print(f"{side:<18} {t.p(side):>7.2f}ms {t.p(side, 95):>7.2f}ms")
    for name, ratio in result.ratios().items():
        print(f"{name}: {ratio}")
    print(f"same ids as the hand SQL: engine {result.same[0]:.0%} of messages (in order), "
          f"search {result.same[1]:.0%} (as a set of ten)")


def write_rates(srv: Server, n: int, rounds_of: int = 250) -> Turns:
    """``n`` facts into a fresh database: a batch and one by one, a round of each in turn."""
    url = srv.fresh("ctxslots_bench_writes")
    facts = generate_facts(n, seed=7)
    with FactStore(url, limits=Limits(max_batch=rounds_of)) as store:
        def batch(_: int) -> None:
            write_facts(store, facts, rounds_of)

        def one_by_one(_: int) -> None:
            for _ in range(rounds_of):
                write_facts(store, facts, 1)

        return in_turn({"batch": batch, "one by one": one_by_one}, n // (2 * rounds_of),
                       warm=0)


def main() -> None:
    """Measure every size, print the tables, write the record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a PostgreSQL server URL (default: a private pgserver)")
    parser.add_argument("--sizes", type=positive_ints, default="100000")
    parser.add_argument("--queries", type=positive_int, default=200)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--writes", type=whole_number, default=0, help="facts for the write rates")
    parser.add_argument("--json", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    messages = generate_queries(args.queries, seed=1)
    record = Record("postgres_search")
    started = load_average()
    with server(args.url, None if args.url else OUT / "pgdata") as srv:
        for n in args.sizes:
            result = measure(srv, n, messages, args.repeat)
            print_size(result)
            record.figures[str(n)] = result.figures()
        if args.writes:
            turns = write_rates(srv, args.writes)
            rates = {side: 250_000 / turns.p(side) for side in turns.times}
            print(f"\nwrites, facts/s ({turns.load}): " + ", ".join(
                f"{side} {rate:,.0f}" for side, rate in rates.items()))
            record.figures["writes"] = rates
    record.add_load(Load.around(started))
    record.write(args.json)


if __name__ == "__main__":
    main()
