"""Where the PostgreSQL engine's words-only search spends its time beyond hand SQL, in turn.

    python benchmarks/postgres_phases.py                      # 100k facts, private pgserver
    python benchmarks/postgres_phases.py --size 10000 --queries 60 --repeat 2

On database ``ctxslots_corpus_N`` (``benchmarks/_stores.py``), for each message,
in turn (``benchmarks/_timing.py``):

- ``search`` and ``search, no access write``: ``FactStore(url).search``;
- ``engine: common words``: the engine's document counts of the sanitized words,
  the common ones left out;
- ``engine: lexical``: its BM25 statement with the store's pool;
- ``engine: links``, ``engine: hidden counts``: the two look-ups a search
  makes over its ten hits (``links_among`` at the default strength,
  ``hidden_counts``);
- ``engine: access write``: ``touch`` of the ten hits in its own transaction
  (what ``track_access`` writes);
- ``planner: words``: ``FactStore.query_words`` (sanitizing, stop words, the
  common-word check);
- ``hand SQL``: postgres_search.py's floor (the same statement typed out, the
  same pool), on one plain connection, where psycopg prepares a statement it
  has run five times; ``hand SQL, not prepared`` the same parsed and planned
  every time; ``hand SQL, no context join`` the floor before the context join
  was added to it; ``hand SQL, 10 rows`` the search's floor;
- ``counts, stats read twice (before)`` and ``counts, stats read once (after)``:
  the lexical leg's word counts on a plain connection, as they were (the
  table's statistics read, then read again by ``document_counts``) and as they
  are (read once and handed on); in a store under 20,000 facts each read is a
  round trip;
- ``pool: borrow``: borrowing a connection from a pool set up as the engine's
  (autocommit, the connection check on each borrow) and giving it back.

The engine is opened on its own on the same database (``benchmarks/_engine.py``):
the store's backend property is not public API.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from psycopg_pool import ConnectionPool

from _corpus import generate_queries
from _engine import common_words, open_engine, plan_of, search_filter
from _inputs import positive_int
from _pg import server
from _pg_hand import statement
from _stores import OUT, corpus_database
from _timing import Turns, in_turn
from ctxslots import FactStore
from ctxslots.stores.postgres._lexical import LexicalLeg
from ctxslots.stores.sanitize import query_tokens
from postgres_search import SCOPES, HandSQL

BEFORE, AFTER = "counts, stats read twice (before)", "counts, stats read once (after)"
assert "context_search" not in statement("f.id", context=False), "the hand SQL changed"


def sides(url: str, stack: ExitStack, messages: list[str]
          ) -> tuple[dict[str, Callable[[int], object]], int]:
    """The search, its parts, the floors and a pool borrow; the count of messages timed."""
    store = stack.enter_context(FactStore(url))
    backend = open_engine(url)
    stack.callback(backend.close)
    hand = HandSQL.open(url)
    stack.callback(hand.conn.close)
    pool = ConnectionPool(url, min_size=1, max_size=2, kwargs={"autocommit": True},
                          check=ConnectionPool.check_connection, open=True)
    stack.callback(pool.close)
    policy, depth, now = store.query_policy, store.candidate_pool, time.time()
    work = [(m, SCOPES[i % 2], store.query_words(m)) for i, m in enumerate(messages)]
    work = [w for w in work if w[2]]
    tokens = [query_tokens(m, policy) for m, _, _ in work]
    # A search whose words find nothing looks for the common ones too; so does its floor.
    relaxed = [store.query_words(m, relaxed=True) for m, _, _ in work]
    flts = {s: search_filter(s, now=now) for s in SCOPES}
    hits = [[h.fact.id for h in store.search(m, scope=s, track_access=False)]
            for m, s, _ in work]
    strength = store.ranking.link_min_strength or 3.0

    def touch(i: int) -> None:
        with backend.transaction():
            backend.touch(hits[i], now)

    def hand_sql(i: int, limit: int, *, context: bool = True, prepare: bool | None = None
                 ) -> object:
        _, scope, words = work[i]
        return hand.rows(words, scope, now, limit, context=context, prepare=prepare,
                         relaxed=relaxed[i])

    counting = stack.enter_context(psycopg.connect(url, autocommit=True))
    leg = LexicalLeg()

    def counts_before(i: int) -> object:
        if leg.stats(counting, "facts").rows < policy.common_min_facts:
            return None
        return leg.document_counts(counting, tokens[i])

    def borrow(_: int) -> None:
        with pool.connection():
            pass

    return {
        "search": lambda i: store.search(work[i][0], scope=work[i][1]),
        "search, no access write": lambda i: store.search(work[i][0], scope=work[i][1],
                                                          track_access=False),
        "engine: common words": lambda i: common_words(backend, tokens[i], policy),
        "engine: lexical": lambda i: backend.lexical(plan_of(work[i][2]), flts[work[i][1]],
                                                     depth),
        "engine: links": lambda i: backend.links_among(hits[i], strength),
        "engine: hidden counts": lambda i: backend.hidden_counts(hits[i]),
        "engine: access write": touch,
        "planner: words": lambda i: store.query_words(work[i][0]),
        "hand SQL": lambda i: hand_sql(i, depth),
        "hand SQL, not prepared": lambda i: hand_sql(i, depth, prepare=False),
        "hand SQL, no context join": lambda i: hand_sql(i, depth, context=False),
        "hand SQL, 10 rows": lambda i: hand_sql(i, 10),
        BEFORE: counts_before,
        AFTER: lambda i: leg.counts(
            counting, tokens[i], min_rows=policy.common_min_facts),
        "pool: borrow": borrow,
    }, len(work)


def report(n: int, turns: Turns) -> None:
    """Each part's p50 and its per-message ratio to the hand SQL; the word counts after
    over before."""
    print(f"\n{n:,} facts, {len(turns.times['search'])} messages; {turns.load}")
    print(f"{'':<36} {'p50':>9} {'/ hand SQL, per message (p10-p90)':>38}")
    for side in turns.times:
        ratio = turns.ratio(side, "hand SQL")
        print(f"{side:<36} {turns.p(side):>7.2f}ms {ratio.median:>15.2f}x ({ratio.spread()})")
    print(f"word counts, after / before, per message: "
          f"{turns.ratio(AFTER, BEFORE)}")


def main() -> None:
    """Time every part in turn, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a PostgreSQL server URL (default: a private pgserver)")
    parser.add_argument("--size", type=positive_int, default=100_000)
    parser.add_argument("--queries", type=positive_int, default=200)
    parser.add_argument("--repeat", type=positive_int, default=3)
    args = parser.parse_args()
    messages = generate_queries(args.queries, seed=1)
    with server(args.url, None if args.url else OUT / "pgdata") as srv, ExitStack() as stack:
        made, count = sides(corpus_database(srv, args.size), stack, messages)
        turns = in_turn(made, count, repeat=args.repeat)
    report(args.size, turns)


if __name__ == "__main__":
    main()
