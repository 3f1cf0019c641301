"""The benchmarks' floors do the work of the search they are compared with: on a small store of
the benchmark corpus, each floor returns the facts the store returns, in the same order.

A floor that leaves out a join the engine makes (the context's words on PostgreSQL), searches
other words or reads other rows would time less work than the store; these tests fail then.
Every fact is written and searched at one moment, so decay orders nothing and the store's order
is BM25's, as the floor's is. The floors leave out the lift of facts holding a query word common
to much of the store (``RankingPolicy.common_word_boost`` and ``common_subject_boost``: one more
statement when a message has such a word), so the stores here switch it off; the benchmarks
time the store with it, the floors without. Some facts carry a context, so its weight counts,
and some belong to another user or agent, so the owners' filter counts.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:  # the benchmark helpers live beside tests/, not in src/
    sys.path.insert(0, str(BENCHMARKS))

from _corpus import generate_facts, generate_queries
from _floors import FtsFloor
from ctxslots import FactStore, Limits, RankingPolicy

#: Enough facts for the common-word check to drop words (it starts at 2,000 facts).
FACTS = 2_500
MESSAGES = 60
SCOPES = ("repo-alpha", "repo-beta")
#: The store's ranking without the common-word lift, which the floors do not do.
PLAIN = RankingPolicy(common_word_boost=1.0, common_subject_boost=1.0)


def fill(store: FactStore, n: int = FACTS) -> None:
    """The first ``n`` corpus facts, every third with the previous fact's text as its context;
    every fourth user or agent fact belongs to another user or agent, whom no search here is for."""
    facts = generate_facts(n, seed=0)
    previous = "deploy notes"
    with store.batch():
        for i, fact in enumerate(facts):
            options = {"scope": fact.scope, "tags": fact.tags,
                       "context": previous if i % 3 == 0 else None}
            if i % 4 == 0 and fact.slot in ("user", "agent"):
                options[fact.slot] = "someone-else"
            if fact.key:
                store.upsert(fact.slot, fact.key, fact.value, **options)
            else:
                store.add(fact.slot, fact.value, **options)
            previous = fact.value


def messages(store: FactStore) -> Iterator[tuple[str, str, list[str], list[str]]]:
    """Generated messages that leave words to search, with their scope, the store's words and
    its words with the common ones kept (what a search whose words find nothing looks for)."""
    for i, message in enumerate(generate_queries(MESSAGES, seed=1)):
        words = store.query_words(message)
        if words:
            yield message, SCOPES[i % 2], words, store.query_words(message, relaxed=True)


@pytest.fixture(name="sqlite_store")
def fixture_sqlite_store(db_path: Path, clock) -> Iterator[FactStore]:
    """A SQLite store of the corpus, written and searched at one moment."""
    with FactStore(db_path, clock=clock, limits=Limits(max_batch=FACTS), ranking=PLAIN) as store:
        fill(store)
        yield store


def test_the_fts5_floor_returns_the_hits_of_a_search(sqlite_store, db_path, clock):
    """The raw FTS5 floor of store_search.py returns the ten hits of FactStore.search, in order."""
    floor = FtsFloor.open(db_path)
    checked = fell_back = 0
    try:
        for message, scope, words, relaxed in messages(sqlite_store):
            hits = sqlite_store.search(message, scope=scope, limit=10, track_access=False)
            expected = [h.fact.id for h in hits]
            assert expected == floor.ids(words, scope=scope, now=clock(), limit=10,
                                         relaxed=relaxed), message
            checked += bool(expected)
            fell_back += bool(hits) and hits[0].trace.fill == "relaxed"
    finally:
        floor.close()
    assert checked >= MESSAGES // 2
    assert fell_back, "some message must look for the common words too"


def test_the_fts5_floor_returns_the_hits_of_the_lexical_copy(sqlite_store, db_path, clock):
    """The same floor returns the hits of a store searching its in-memory lexical copy."""
    floor = FtsFloor.open(db_path)
    with FactStore(db_path, clock=clock, lexical_cache=True, ranking=PLAIN) as cached:
        cached.load_lexical_cache()
        try:
            for message, scope, words, relaxed in messages(cached):
                hits = cached.search(message, scope=scope, limit=10, track_access=False)
                assert [h.fact.id for h in hits] == floor.ids(words, scope=scope, now=clock(),
                                                              limit=10, relaxed=relaxed), message
        finally:
            floor.close()


def test_the_fts5_floor_of_one_slot_returns_that_slots_hits(sqlite_store, db_path, clock):
    """With a slot (assemble.py's floor: one query per memory slot), the floor returns the
    hits of a search of that slot."""
    floor = FtsFloor.open(db_path)
    try:
        for (message, scope, words, relaxed), slot in zip(
                messages(sqlite_store), itertools.cycle(("user", "project", "agent"))):
            hits = sqlite_store.search(message, scope=scope, slots=[slot], limit=10,
                                       track_access=False)
            assert [h.fact.id for h in hits] == floor.ids(words, scope=scope, now=clock(),
                                                          limit=10, slot=slot,
                                                          relaxed=relaxed), message
    finally:
        floor.close()


@pytest.fixture(name="pg_store")
def fixture_pg_store(pg_url: str, clock) -> Iterator[FactStore]:
    """A smaller PostgreSQL store of the corpus (writes cost more there), written and searched
    at one moment."""
    with FactStore(pg_url, clock=clock, limits=Limits(max_batch=FACTS), ranking=PLAIN) as store:
        fill(store, 600)
        yield store


@pytest.mark.parametrize("counts", ["counted", "kept"])
def test_the_hand_sql_is_the_postgres_engines_statement(pg_store, pg_url, clock, counts,
                                                         monkeypatch):
    """postgres_search.py's hand SQL (the context join included) returns the engine's
    candidates with the engine's BM25 scores, and the ten hits of FactStore.search: with
    document counts made in the statement (a small table) and kept (a large one)."""
    import _pg_hand
    from _engine import engine_search, open_engine, search_filter
    from ctxslots.stores.postgres import _lexical
    from ctxslots.stores.sanitize import DEFAULT_POLICY, query_tokens
    from postgres_search import HandSQL

    if counts == "kept":
        monkeypatch.setattr(_lexical, "_EXACT_BELOW", 0)
        monkeypatch.setattr(_pg_hand, "EXACT_BELOW", 0)

    backend = open_engine(pg_url)
    hand = HandSQL.open(pg_url)
    pool = pg_store.candidate_pool
    try:
        for message, scope, words, relaxed in messages(pg_store):
            flt = search_filter(scope, now=clock())
            tokens = query_tokens(message, DEFAULT_POLICY)
            engine = [(int(c.row["id"]), round(c.score, 9))
                      for c in engine_search(backend, tokens, flt, pool, DEFAULT_POLICY)]
            rows = hand.rows(words, scope, clock(), pool)
            assert engine == [(int(r[0]), round(r[-1], 9)) for r in rows], message
            hits = pg_store.search(message, scope=scope, limit=10, track_access=False)
            assert [h.fact.id for h in hits] == [int(r[0]) for r in hand.rows(
                words, scope, clock(), 10, relaxed=relaxed)], message
    finally:
        backend.close()
        hand.conn.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_owners_floor_returns_the_hits_of_a_users_search(engine, request, tmp_path, clock,
                                                             monkeypatch):
    """owners_scale.py's floor, in a store of 60 users where a user's search asks for their
    owner terms, returns the ten hits of that user's FactStore.search, in order (on
    PostgreSQL the small table counts as large, so words are counted once and kept)."""
    import _pg_hand
    from _owners_floors import PostgresHand, SqliteHand, Who
    from _people import AGENT
    from ctxslots.stores.postgres import _lexical

    if engine == "sqlite":
        location, facts, hand_of = str(tmp_path / "owners.db"), 6_000, SqliteHand.open
    else:
        location, facts, hand_of = request.getfixturevalue("pg_url"), 1_200, PostgresHand.open
        monkeypatch.setattr(_lexical, "_EXACT_BELOW", 0)
        monkeypatch.setattr(_pg_hand, "EXACT_BELOW", 0)
    with FactStore(location, clock=clock, limits=Limits(max_batch=facts), ranking=PLAIN) as store:
        with store.batch():
            for i, fact in enumerate(generate_facts(facts, seed=2)):
                scope = SCOPES[i % 2]
                if i % 20 == 0:
                    store.add("project", fact.value, scope=scope)
                elif i % 20 == 1:
                    store.add("agent", fact.value, agent=AGENT, scope=scope)
                else:
                    store.add("user", fact.value, user=f"user{i % 60}")
        hand = hand_of(location)
        checked = 0
        try:
            for i, (message, scope, words, relaxed) in enumerate(messages(store)):
                who = Who(f"user{i % 60}", scope)
                owners = [who.user, "", who.agent, "", who.scope]
                if engine == "sqlite":
                    assert hand._owner_match(owners), "the floor must narrow as the store does"
                else:
                    assert hand.bm25.owners([who.user, ""], [who.agent, ""], [scope, ""])
                hits = store.search(message, user=who.user, scope=scope, agent=AGENT, limit=10,
                                    track_access=False)
                expected = [h.fact.id for h in hits]
                found = hand._bm25(words, owners, None, clock(), 10) or (
                    hand._bm25(relaxed, owners, None, clock(), 10) if relaxed != words else [])
                assert expected == [int(r[0]) for r in found], message
                checked += bool(expected)
        finally:
            hand.close()
    assert checked >= MESSAGES // 2


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_owners_floors_writes_keep_the_index_in_step(engine, request, tmp_path, clock):
    """owners_scale.py's flush floor writes what the store writes for an upsert: a
    replaced value and a new fact are found by their new words, the old words find nothing."""
    from _owners_floors import Op, PostgresHand, SqliteHand, Who
    from _people import AGENT

    if engine == "sqlite":
        location, hand_of = str(tmp_path / "floor.db"), SqliteHand.open
    else:
        location, hand_of = request.getfixturevalue("pg_url"), PostgresHand.open
    with FactStore(location, clock=clock, ranking=PLAIN) as store:
        store.upsert("user", "home", "Ada lives in Porto by the river.", user="ada")
        hand = hand_of(location)
        try:
            hand.write([Op("home", "Ada moved to Lisbon last spring."),
                        Op("pet", "Ada adopted a greyhound called Biscuit.")],
                       Who("ada", "", AGENT), clock())
        finally:
            hand.close()
        assert [f.value for f in store.facts(user="ada")] == [
            "Ada moved to Lisbon last spring.", "Ada adopted a greyhound called Biscuit."]
        assert {h.fact.key for h in store.search("Lisbon greyhound", user="ada")} == {"home", "pet"}
        assert not store.search("Porto river", user="ada")
