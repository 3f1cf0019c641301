"""Where a words-only search spends its time beyond raw FTS5, phase by phase, in turn.

    python benchmarks/search_phases.py                       # the 1M store
    python benchmarks/search_phases.py --size 100000 --queries 100 --repeat 2

On the shared corpus store (``benchmarks/_stores.py``), for each message, in
turn (``benchmarks/_timing.py``), each part of ``FactStore.search`` (default
store, no lexical copy) is timed on its own next to the whole and the floor:

- ``search`` and ``search, no access write`` (``track_access=False``);
- ``engine: common words``: the engine's document counts of the sanitized
  words, the common ones left out (what ``query_words`` asks of it);
- ``engine: candidates + rows``: its ``lexical`` with the store's pool: one
  statement, FTS5 with the filter join picking the pool's ids, and those rows read;
- ``engine: rows``: ``rows_by_ids`` of the pool's ids alone;
- ``engine: links``, ``engine: hidden counts``: the two look-ups a search
  makes over its ten hits (``links_among`` at the default strength,
  ``hidden_counts``);
- ``engine: access write``: ``touch`` of the ten hits in its own transaction
  (what ``track_access`` writes);
- ``planner: words``: ``FactStore.query_words`` (sanitizing, stop words, the
  common-word check);
- ``sql: candidates, pool``: the engine's candidate statement typed out
  (ids and rank only, ``LIMIT`` pool) on a plain connection;
- ``sql: candidates, 10``: the same with ``LIMIT 10``;
- ``sql: FTS5 alone, 10``: FTS5 with the same words and no filter join (no
  fact row read), ``LIMIT 10``: what the filter join costs;
- ``ranking``: ``rank_candidates`` over the pool's candidates (as a search
  builds them from the engine's rows);
- floor ``fts``: the headline floor (the same words and join, every column
  of the ten rows, ``benchmarks/_floors.py``).

The engine is opened on its own on the same file (``benchmarks/_engine.py``):
the store's backend property is not public API. Printed: p50 of each, the share of
``search`` p50, and each part's per-message ratio to the floor.
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

import apsw

from _corpus import generate_queries
from _engine import common_words, open_engine, plan_of, search_filter
from _floors import FtsFloor, visible
from _inputs import positive_int
from _stores import corpus_store
from _timing import Turns, in_turn
from ctxslots import FactStore
from ctxslots.stores.owners import DEFAULT_AGENT, DEFAULT_USER
from ctxslots.stores.periods import query_periods
from ctxslots.stores.ranking import Candidate, rank_candidates
from ctxslots.stores.sanitize import query_tokens, to_match
from ctxslots.stores.stemming import stemmed_query

SCOPES = ("repo-alpha", "repo-beta")
# ``LIMIT +?`` as the store writes it (SQLite plans a plain ``LIMIT ?`` under an
# ``ORDER BY`` again on each run).
CANDIDATES = (
    "SELECT f.id, facts_fts.rank FROM facts_fts JOIN facts AS f ON f.id = facts_fts.rowid "
    "WHERE facts_fts MATCH ? AND f.user_id IN (?, '') AND f.agent_id IN (?, '') "
    "AND f.scope IN (?, ?) AND f.superseded_by IS NULL "
    "AND (f.expires_at IS NULL OR f.expires_at > ?) ORDER BY facts_fts.rank, f.id LIMIT +?")

ALONE = "SELECT rowid, rank FROM facts_fts WHERE facts_fts MATCH ? ORDER BY rank LIMIT 10"


def candidates(rows: list[dict[str, object]], ranks: list[float]) -> list[Candidate]:
    """The candidates a search builds from the engine's rows."""
    return [Candidate(fact_id=int(r["id"]), slot=r["slot"], updated_at=r["updated_at"],
                      score=r["score"], confidence=r["confidence"], observed_at=r["observed_at"],
                      bm25_rank=i, bm25=rank)
            for i, (r, rank) in enumerate(zip(rows, ranks, strict=True), start=1)]


def sides(path: Path, stack: ExitStack, messages: list[str]
          ) -> tuple[dict[str, Callable[[int], object]], int]:
    """The whole search, its parts and the floor, and how many messages have words to search."""
    store = stack.enter_context(FactStore(path))
    backend = open_engine(path)
    stack.callback(backend.close)
    floor = FtsFloor.open(path)
    stack.callback(floor.close)
    plain = apsw.Connection(str(path))
    stack.callback(plain.close)
    policy, pool, now = store.query_policy, store.candidate_pool, time.time()
    work = [(m, SCOPES[i % 2], store.query_words(m)) for i, m in enumerate(messages)]
    work = [w for w in work if w[2]]
    tokens = [query_tokens(m, policy) for m, _, _ in work]
    # A search whose words find nothing looks for the common ones too; so does the floor.
    relaxed = [store.query_words(m, relaxed=True) for m, _, _ in work]
    flts = {s: search_filter(s, now=now) for s in SCOPES}
    found = [backend.lexical(plan_of(w), flts[s], pool) for _, s, w in work]
    ids = [[int(c.row["id"]) for c in leg] for leg in found]
    cands = [candidates([c.row for c in leg], [c.score for c in leg]) for leg in found]
    hits = [[h.fact.id for h in store.search(m, scope=s, track_access=False)]
            for m, s, _ in work]
    strength = store.ranking.link_min_strength or 3.0

    def touch(i: int) -> None:
        with backend.transaction():
            backend.touch(hits[i], now)

    def sql(i: int, limit: int) -> object:
        _, scope, words = work[i]
        return plain.execute(CANDIDATES, (to_match(stemmed_query(words)), DEFAULT_USER, DEFAULT_AGENT,
                                          *visible(scope), now, limit)).fetchall()

    return {
        "search": lambda i: store.search(work[i][0], scope=work[i][1]),
        "search, no access write": lambda i: store.search(work[i][0], scope=work[i][1],
                                                          track_access=False),
        "engine: common words": lambda i: common_words(backend, tokens[i], policy),
        "engine: candidates + rows": lambda i: backend.lexical(plan_of(work[i][2]),
                                                               flts[work[i][1]], pool),
        "engine: rows": lambda i: backend.rows_by_ids(ids[i], flts[work[i][1]]),
        "engine: links": lambda i: backend.links_among(hits[i], strength),
        "engine: hidden counts": lambda i: backend.hidden_counts(hits[i]),
        "engine: access write": touch,
        "planner: words": lambda i: store.query_words(work[i][0]),
        "sql: candidates, pool": lambda i: sql(i, pool),
        "sql: candidates, 10": lambda i: sql(i, 10),
        "sql: FTS5 alone, 10": lambda i: plain.execute(ALONE, (to_match(stemmed_query(work[i][2])),)
                                                       ).fetchall(),
        "ranking": lambda i: rank_candidates(cands[i], now=now, policy=store.ranking,
                                             limit=10, depth=pool,
                                             periods=query_periods(work[i][0], now)),
        "fts": lambda i: floor.rows(work[i][2], scope=work[i][1], now=now, limit=10,
                                    relaxed=relaxed[i]),
    }, len(work)


def report(n: int, turns: Turns) -> None:
    """Each part's p50, its share of the search and its ratio to the floor."""
    whole = turns.p("search")
    print(f"\n{n:,} facts, {len(turns.times['search'])} messages; {turns.load}")
    print(f"{'':<27} {'p50':>9} {'of search':>10} {'/ fts, per message (p10-p90)':>34}")
    for side in turns.times:
        ratio = turns.ratio(side, "fts")
        print(f"{side:<27} {turns.p(side):>7.2f}ms {turns.p(side) / whole:>9.0%} "
              f"{ratio.median:>12.2f}x ({ratio.spread()})")


def main() -> None:
    """Time every part in turn, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=positive_int, default=1_000_000)
    parser.add_argument("--queries", type=positive_int, default=200)
    parser.add_argument("--repeat", type=positive_int, default=3)
    args = parser.parse_args()
    path = corpus_store(args.size)
    messages = generate_queries(args.queries, seed=1)
    with ExitStack() as stack:
        made, count = sides(path, stack, messages)
        turns = in_turn(made, count, repeat=args.repeat)
    report(args.size, turns)


if __name__ == "__main__":
    main()
