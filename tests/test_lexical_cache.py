"""The in-memory lexical leg against FTS5 on real store files: same candidates, same BM25, in step."""

from __future__ import annotations

import random

import pytest

from ctxslots import FactStore
from ctxslots.stores import lexical_cache
from ctxslots.stores._legs import lexical_leg
from ctxslots.stores.sanitize import to_match

WORDS = ("deploy cache server test user editor python rust queue worker retry flaky vpn staging "
         "payment search index token budget prompt").split()


def _fill(store, n, seed=1):
    rng = random.Random(seed)
    with store.batch():
        for _ in range(n):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))) + "."
            store.add(rng.choice(["user", "project", "agent"]), text,
                      scope=rng.choice([None, "a", "b"]),
                      tags=[rng.choice(WORDS)] if rng.random() < 0.3 else [])


def _both_legs(store, query, scope, slots=None):
    tokens = store._query_tokens(query)
    now = store.clock()
    where, params = store._filters(slots, scope, now=now, alias="f.", include_superseded=False)
    fts = {c.fact_id: c.bm25 for c, _ in lexical_leg(store._conn, "facts", to_match(tokens),
                                                     where, params, 50)}
    cached = {c.fact_id: c.bm25 for c, _ in store._cached_lexical_leg(
        tokens, scope, slots, now, where, params, 50, False)}
    return fts, cached


def test_same_candidates_and_bm25_as_fts5(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as store:
        _fill(store, 2000)
        rng = random.Random(2)
        for _ in range(60):
            query = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
            scope = rng.choice([None, "a", "b"])
            slots = rng.choice([None, ["user"], ["project", "agent"]])
            fts, cached = _both_legs(store, query, scope, slots)
            assert fts and set(fts) == set(cached)
            for fact_id, bm25 in fts.items():
                assert cached[fact_id] == pytest.approx(bm25, rel=1e-6)


def test_search_gives_the_same_hits_with_and_without_the_cache(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False) as store:
        _fill(store, 800, seed=3)
    queries = ["deploy the staging server", "flaky retry worker", "payment token budget"]
    with FactStore(db_path, clock=clock, embedder=False) as plain, \
            FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as cached:
        for query in queries:
            a = plain.search(query, scope="a", track_access=False)
            b = cached.search(query, scope="a", track_access=False)
            assert [h.fact.id for h in a] == [h.fact.id for h in b]
            assert [h.trace.final for h in a] == pytest.approx([h.trace.final for h in b])


def test_the_cache_follows_writes_of_another_connection(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as reader, \
            FactStore(db_path, clock=clock, embedder=False) as writer:
        first = writer.add("agent", "The staging VPN needs a fresh token.", scope="a")
        assert [h.fact.id for h in reader.search("staging vpn", scope="a")] == [first.id]
        second = writer.add("agent", "Staging deploys wait for the VPN.", scope="a")
        writer.update(first.id, value="The production VPN needs a fresh token.")
        assert [h.fact.id for h in reader.search("staging", scope="a")] == [second.id]
        assert [h.fact.id for h in reader.search("production", scope="a")] == [first.id]
        writer.forget(second.id)
        assert reader.search("staging", scope="a") == []
        short = writer.add("agent", "Staging is frozen this week.", scope="a",
                           expires_at=clock.now + 60)
        assert [h.fact.id for h in reader.search("staging frozen", scope="a")] == [short.id]
        clock.advance(seconds=120)
        assert reader.search("staging frozen", scope="a") == []
        assert reader.search("production", scope="b") == []


def test_superseded_facts_are_hidden_unless_asked(db_path, clock):
    with FactStore(db_path, clock=clock, lexical_cache=True) as store:
        old = store.add("user", "The user prefers dark mode in every editor.")
        clock.advance(seconds=1)
        new = store.add("user", "The user prefers dark mode in every editor!")
        store.search("dark mode")
        store.consolidate()
        assert [h.fact.id for h in store.search("dark mode")] == [new.id]
        assert {h.fact.id for h in store.search("dark mode", include_superseded=True)} == {
            old.id, new.id}


def test_a_cache_behind_the_trimmed_log_reloads(db_path, clock, monkeypatch):
    monkeypatch.setattr(lexical_cache, "LOG_KEEP", 3)
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as reader, \
            FactStore(db_path, clock=clock, embedder=False) as writer:
        writer.add("agent", "Seed fact about mailboxes.")
        reader.search("mailboxes")
        ids = [writer.add("agent", f"Worker {n} retries the payment queue.").id for n in range(20)]
        low = writer._conn.scalar("SELECT min(seq) FROM fact_log")
        assert low > 2                                      # the log was trimmed past the reader
        hits = reader.search("payment queue", limit=50)
        assert {h.fact.id for h in hits} == set(ids)


def test_many_updates_rebuild_the_cache(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as store:
        fact = store.add("agent", "Version 0 of the cache note.")
        others = [store.add("agent", f"Filler {n} about rust.").id for n in range(1100)]
        store.search("cache")
        for n in range(1, 1200):
            store.update(fact.id, value=f"Version {n} of the cache note.")
            if n % 400 == 0:
                store.search("cache")
        assert store._lexical.rows_loaded < 2 * (len(others) + 1)
        hits = store.search("version 1199 cache note")
        assert hits[0].fact.id == fact.id and hits[0].fact.value == "Version 1199 of the cache note."
