"""The in-memory lexical leg against FTS5 on real store files: same candidates, same BM25, in step."""

from __future__ import annotations

import random

import pytest

from _sql import plan_of, raw
from ctxslots import FactStore
from ctxslots.stores.backend import FactFilter, visible_scopes, visible_to
from ctxslots.stores.sqlite import SQLiteBackend, lexical_cache

WORDS = ["deploy", "cache", "server", "test", "user", "editor", "python", "rust", "queue", "worker", "retry", "flaky", "vpn", "staging", "payment", "search", "index", "token", "budget", "prompt"]


def _fill(store, n, seed=1):
    rng = random.Random(seed)
    with store.batch():
        for _ in range(n):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))) + "."
            slot = rng.choice(["user", "project", "agent"])
            owners = {"user": {"user": rng.choice(["default", "u2"])},
                      "agent": {"agent": rng.choice(["default", "a2"]),
                                "scope": rng.choice([None, "a", "b"])},
                      "project": {"scope": rng.choice([None, "a", "b"])}}[slot]
            store.add(slot, text, tags=[rng.choice(WORDS)] if rng.random() < 0.3 else [],
                      **owners)


def _both_legs(store, query, scope, slots=None, user="default", agent="default"):
    """Every match of ``query`` with its BM25: as ``store`` scores it from its loaded
    copy, and as FTS5 scores it on the same file."""
    assert store.cache_status().lexical_loaded
    cached = {h.fact.id: h.trace.bm25 for h in store.search(
        query, scope=scope, slots=slots, limit=1000, track_access=False, user=user,
        agent=agent)}
    plan = plan_of(store.query_words(query))
    flt = FactFilter(scopes=visible_scopes(scope or ""), users=visible_to(user),
                     agents=visible_to(agent),
                     slots=None if slots is None else tuple(slots), live_at=store.clock(),
                     include_superseded=False)
    fts5 = SQLiteBackend(store.path)
    try:
        fts = {int(c.row["id"]): c.score for c in fts5.lexical(plan, flt, 1000)}
    finally:
        fts5.close()
    return fts, cached


def test_same_candidates_and_bm25_as_fts5(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as store:
        _fill(store, 2000)
        assert store.load_lexical_cache()
        rng = random.Random(2)
        for _ in range(60):
            query = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
            scope = rng.choice([None, "a", "b"])
            slots = rng.choice([None, ["user"], ["project", "agent"]])
            fts, cached = _both_legs(store, query, scope, slots,
                                     user=rng.choice(["default", "u2"]),
                                     agent=rng.choice(["default", "a2"]))
            assert fts and set(fts) == set(cached)
            for fact_id, bm25 in fts.items():
                assert cached[fact_id] == pytest.approx(bm25, rel=1e-12)


def test_search_gives_the_same_hits_with_and_without_the_cache(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False) as store:
        _fill(store, 800, seed=3)
    queries = ["deploy the staging server", "flaky retry worker", "payment token budget"]
    with FactStore(db_path, clock=clock, embedder=False) as plain, \
            FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as cached:
        assert cached.load_lexical_cache()
        for query in queries:
            a = plain.search(query, scope="a", track_access=False)
            b = cached.search(query, scope="a", track_access=False)
            assert [h.fact.id for h in a] == [h.fact.id for h in b]
            assert [h.trace.final for h in a] == pytest.approx([h.trace.final for h in b])


def test_the_cache_follows_writes_of_another_connection(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as reader, \
            FactStore(db_path, clock=clock, embedder=False) as writer:
        assert reader.load_lexical_cache()
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
        assert reader.cache_status().lexical_loaded and reader.cache_status().lexical_rows >= 4


def test_superseded_facts_are_hidden_unless_asked(db_path, clock):
    with FactStore(db_path, clock=clock, lexical_cache=True) as store:
        assert store.load_lexical_cache()
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
        assert reader.load_lexical_cache()
        reader.search("mailboxes")
        ids = [writer.add("agent", f"Worker {n} retries the payment queue.").id for n in range(20)]
        low = raw(writer).scalar("SELECT min(seq) FROM fact_log")
        assert low > 2                                      # the log was trimmed past the reader
        hits = reader.search("payment queue", limit=50)
        assert {h.fact.id for h in hits} == set(ids)


def test_many_updates_rebuild_the_cache(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as store:
        fact = store.add("agent", "Version 0 of the cache note.")
        others = [store.add("agent", f"Filler {n} about rust.").id for n in range(1100)]
        assert store.load_lexical_cache()
        store.search("cache")
        for n in range(1, 1200):
            store.update(fact.id, value=f"Version {n} of the cache note.")
            if n % 400 == 0:
                store.search("cache")
        assert store.cache_status().lexical_rows < 2 * (len(others) + 1)
        hits = store.search("version 1199 cache note")
        assert hits[0].fact.id == fact.id and hits[0].fact.value == "Version 1199 of the cache note."


def test_the_first_search_does_not_wait_for_the_load(db_path, clock):
    """The first search starts the load in the background and answers from FTS5 meanwhile."""
    with FactStore(db_path, clock=clock, embedder=False) as store:
        _fill(store, 3000, seed=4)
    with FactStore(db_path, clock=clock, embedder=False) as plain, \
            FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as cached:
        first = cached.search("flaky retry worker", scope="a", track_access=False)
        assert not cached.cache_status().lexical_loaded and cached.cache_status().lexical_loading
        expected = plain.search("flaky retry worker", scope="a", track_access=False)
        assert [h.fact.id for h in first] == [h.fact.id for h in expected]
        assert cached.load_lexical_cache()
        again = cached.search("flaky retry worker", scope="a", track_access=False)
        assert cached.cache_status().lexical_loaded
        assert [h.fact.id for h in again] == [h.fact.id for h in expected]
        assert [h.trace.bm25 for h in again] == pytest.approx([h.trace.bm25 for h in expected])


def test_writes_made_while_the_copy_loads_are_seen(db_path, clock):
    """Facts written, changed or forgotten during the background load show up once it is used."""
    with FactStore(db_path, clock=clock, embedder=False) as store:
        _fill(store, 3000, seed=5)
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as reader, \
            FactStore(db_path, clock=clock, embedder=False) as writer:
        reader.search("deploy", scope="a")  # starts the load
        new = writer.add("agent", "Zanzibar mirrors sync at dawn.", scope="a")
        gone = writer.add("agent", "Quixotic cron entry for the archive.", scope="a")
        writer.forget(gone.id)
        assert reader.load_lexical_cache()
        assert [h.fact.id for h in reader.search("zanzibar mirrors", scope="a")] == [new.id]
        assert reader.search("quixotic cron", scope="a") == []
        assert reader.cache_status().lexical_loaded


def test_close_stops_a_load_in_progress(db_path, clock):
    """Closing the store while its copy loads stops the loading thread before returning."""
    with FactStore(db_path, clock=clock, embedder=False) as store:
        _fill(store, 8000, seed=6)
    store = FactStore(db_path, clock=clock, embedder=False, lexical_cache=True)
    store.search("deploy", scope="a")
    assert store.cache_status().lexical_loading
    store.close()
    assert not store.cache_status().lexical_loading
    assert not store.cache_status().lexical_loaded


def test_load_needs_the_option_and_memory_stores_load_in_place(clock):
    """Asking a store without the option is a clear error; ':memory:' stores load on their connection."""
    from ctxslots import StoreError

    with FactStore(":memory:", clock=clock, embedder=False) as plain:
        with pytest.raises(StoreError, match="lexical_cache=True"):
            plain.load_lexical_cache()
    with FactStore(":memory:", clock=clock, embedder=False, lexical_cache=True) as store:
        fact = store.add("agent", "The staging VPN needs a fresh token.")
        assert [h.fact.id for h in store.search("staging vpn")] == [fact.id]
        assert store.cache_status().lexical_loaded and not store.cache_status().lexical_loading


def test_slots_searched_with_the_same_words_share_scores_until_a_write(db_path, clock):
    """The second slot reuses the first one's scores; a write in between is still seen."""
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as store:
        _fill(store, 600, seed=5)
        assert store.load_lexical_cache()
        for slots in (["user"], ["project"], ["agent"], ["user"]):
            fts, cached = _both_legs(store, "deploy flaky staging", "a", slots)
            assert set(fts) == set(cached)
            for fact_id, bm25 in fts.items():
                assert cached[fact_id] == pytest.approx(bm25, rel=1e-6)
        added = store.add("agent", "flaky staging deploy deploy", scope="a").id
        fts, cached = _both_legs(store, "deploy flaky staging", "a", ["agent"])
        assert added in cached and set(fts) == set(cached)
        assert cached[added] == pytest.approx(fts[added], rel=1e-6)
        store.forget(added)
        fts, cached = _both_legs(store, "deploy flaky staging", "a", ["agent"])
        assert added not in cached and set(fts) == set(cached)


def test_searches_from_several_threads_keep_the_copy_in_step(db_path, clock):
    """Searches running in threads (as asearch does) while another connection writes:
    afterwards the copy holds each live fact once and answers as FTS5 does."""
    import threading

    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as store, \
            FactStore(db_path, clock=clock, embedder=False) as writer:
        _fill(store, 300, seed=5)
        assert store.load_lexical_cache()
        stop = threading.Event()
        errors: list[BaseException] = []

        def search() -> None:
            rng = random.Random(threading.get_ident())
            while not stop.is_set():
                try:
                    store.search(" ".join(rng.sample(WORDS, 2)), scope="a", track_access=False)
                except BaseException as exc:
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=search) for _ in range(4)]
        for thread in threads:
            thread.start()
        try:
            rng = random.Random(6)
            for n in range(150):
                fact = writer.add("agent", f"Note {n} on the {rng.choice(WORDS)} queue.", scope="a")
                if n % 3 == 0:
                    writer.update(fact.id, value=f"Note {n} moved to the {rng.choice(WORDS)} cache.")
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
        assert [] == errors
        status = store.cache_status()
        store.search("queue", scope="a", track_access=False)  # applies what is left of the log
        assert status.lexical_loaded and store.cache_status().lexical_live == \
            store.stats()["facts"]
        for query in ("queue cache", "note moved", "deploy retry"):
            fts, cached = _both_legs(store, query, "a")
            assert set(fts) == set(cached)


#: Facts holding characters that decompose to capitals: bold letters of "fancy text"
#: bios, double-struck letters, a squared unit.
_DECOMPOSED_CAPITALS = ("The bio says \U0001d407\U0001d41e\U0001d425\U0001d425\U0001d428 in bold.",
                        "The lab works over \u210d and \u211d.", "The radio runs at 90 \u3392.")


def test_characters_that_decompose_to_capitals_are_found_by_lower_case_words(db_path, clock):
    """Bold ``𝐇𝐞𝐥𝐥𝐨``, ``ℍ`` and ``㎒`` are found by ``hello``, ``h`` and ``mhz`` (any case)
    through the in-memory copy as through FTS5, with the same BM25."""
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as store:
        ids = [store.add("agent", text).id for text in _DECOMPOSED_CAPITALS]
        store.add("agent", "An unrelated memory about the weather.")
        assert store.load_lexical_cache()
        for query, fact_id in (("hello", ids[0]), ("HELLO", ids[0]),
                               ("\U0001d407\U0001d41e\U0001d425\U0001d425\U0001d428", ids[0]),
                               ("mhz", ids[2]), ("MHz", ids[2])):
            fts, cached = _both_legs(store, query, None)
            assert [fact_id] == list(fts) == list(cached), query
            assert cached[fact_id] == pytest.approx(fts[fact_id], rel=1e-6)


def test_stems_written_with_capitals_are_found_through_the_copy(db_path, clock):
    """A row whose stems hold capitals (as releases that folded case before decomposing
    wrote ``Hello`` for bold ``𝐇𝐞𝐥𝐥𝐨``) is found by the copy as FTS5 finds it."""
    with FactStore(db_path, clock=clock, embedder=False, lexical_cache=True) as store:
        fact = store.add("agent", _DECOMPOSED_CAPITALS[0])
        conn = raw(store)
        try:
            conn.execute("UPDATE facts SET stems = 'the bio say Hello in bold' "
                         "WHERE id = ?", (fact.id,))
        finally:
            conn.close()
        assert store.load_lexical_cache()
        fts, cached = _both_legs(store, "hello", None)
        assert [fact.id] == list(fts) == list(cached)
        assert cached[fact.id] == pytest.approx(fts[fact.id], rel=1e-6)


def test_live_and_forgotten_memories_of_equal_score_tie_by_id_through_the_copy(db_path, clock):
    """The copy scores as FTS5 does, to the last digits: live memories (scored by the copy)
    and forgotten ones (by FTS5) of one text tie and go by id, as without the copy."""
    with FactStore(db_path, clock=clock, embedder=False) as store, store.batch():
        for n in range(150):
            fact = store.upsert("user", f"k{n:03d}", "The user likes green tea.")
            if n % 3 == 0:
                store.forget(fact.id)
    found = {}
    for copy in (False, True):
        with FactStore(db_path, clock=clock, embedder=False, lexical_cache=copy) as store:
            if copy:
                assert store.load_lexical_cache()
            hits = store.search("green tea", include_archive=True, limit=30,
                                track_access=False)
            found[copy] = [(h.fact.id, h.trace.bm25) for h in hits]
    assert found[True] == found[False]
    assert [fact_id for fact_id, _ in found[True]] == list(range(1, 31))
