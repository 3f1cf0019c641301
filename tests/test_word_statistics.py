"""BM25's statistics follow every change of the facts, whoever makes it: after facts are
removed or their words change, a store scores as one opened afresh on the same data."""

from __future__ import annotations

import itertools

import pytest

from ctxslots import FactStore

FACTS = [
    ("bob", "zebra notes from the okapi trip to the zoo"),
    ("bob", "okapi okapi stripes and more okapi talk"),
    ("bob", "the okapi was seen near the river bank"),
    ("ann", "okapi okapi"),
    ("ann", "okapi seen"),
    ("ann", "zebra notes"),
]


def _scores(store: FactStore, user: str) -> list[tuple[str, float]]:
    return [(h.fact.value, h.trace.bm25) for h in
            store.search("okapi zebra notes", user=user, limit=10, track_access=False)]


def _fresh(location: str, clock) -> list[tuple[str, float]]:
    with FactStore(location, clock=clock) as fresh:
        return _scores(fresh, "ann")


@pytest.mark.parametrize("change", ["erase", "forget", "delete", "new value", "another store"])
def test_scores_after_a_change_equal_a_fresh_stores(store, location, clock, change, tmp_path):
    ids = {value: store.add("user", value, user=user).id for user, value in FACTS}
    before = _scores(store, "ann")  # the statistics of six facts, read and kept
    assert before == _fresh(location, clock)
    if change == "erase":
        store.erase(user="bob")
    elif change == "forget":
        for user, value in FACTS[:3]:
            store.forget(ids[value], reason="moved", user=user)
    elif change == "delete":
        store.delete(ids[FACTS[1][1]], user="bob")
    elif change == "new value":
        store.update(ids[FACTS[1][1]], value="a short one", user="bob")
    else:
        # Another store (another process's connection) removes them.
        with FactStore(location, clock=clock) as other:
            other.erase(user="bob")
    after = _scores(store, "ann")
    assert after == _fresh(location, clock)
    assert after != before


def test_scores_after_an_import_keeping_ids_equal_a_fresh_stores(store, location, clock):
    """Facts imported with their own ids (below the id sequence) count at once."""
    import io

    for user, value in FACTS:
        store.add("user", value, user=user)
    exported = io.StringIO()
    store.export_jsonl(exported, user="bob")
    store.erase(user="bob")
    before = _scores(store, "ann")  # the statistics without bob's facts, read and kept
    with FactStore(location, clock=clock) as other:
        other.import_jsonl(io.StringIO(exported.getvalue()))
    after = _scores(store, "ann")
    assert after == _fresh(location, clock)
    assert after != before


def test_word_counts_kept_by_a_long_lived_sqlite_store_stay_bounded(db_path, monkeypatch):
    """A store searched on every turn for words it has never seen (ids, hashes) keeps
    at most ``COUNTS_KEPT`` word counts (and one search's), then starts them over, as
    the PostgreSQL engine does; searches find the same facts after the start over."""
    from ctxslots.stores.sqlite import _terms

    monkeypatch.setattr(_terms, "COUNTS_KEPT", 200, raising=False)
    with FactStore(db_path) as store:
        with store.batch():
            for n in range(60):
                store.add("agent", f"Deploy note {n}: the okapi build runs at night.")
        counts = store._core.backend._lexical._terms  # the counts the query planner reads
        first = [(h.fact.id, h.trace.bm25) for h in
                 store.search("okapi build", limit=5, track_access=False)]
        per_search, sizes = 10, []
        for turn in range(80):
            fresh = " ".join(f"zq{turn}x{k}" for k in range(per_search))
            store.search(f"okapi build {fresh}", limit=5, track_access=False)
            sizes.append(len(counts._df) + len(counts._by_word))
        again = [(h.fact.id, h.trace.bm25) for h in
                 store.search("okapi build", limit=5, track_access=False)]
    # Each search adds its words and their stems (two counts per new word) to what is kept.
    assert max(sizes) <= 200 + 2 * (per_search + 2), sizes
    assert any(later < earlier for earlier, later in itertools.pairwise(sizes)), sizes  # over
    assert first == again and len(first) == 5


@pytest.mark.parametrize("eraser", ["this store", "another store"])
def test_words_left_out_as_common_follow_an_erasure(location, clock, eraser):
    """Which query words are too common to search for is decided on counts that include
    no erased fact: after a user holding most of a word's facts is erased, by this store
    or another process's, a long-lived store searches as one opened afresh (its counts
    were kept until the store had grown by a fifth, or for ten minutes)."""
    from ctxslots import QueryPolicy

    policy = QueryPolicy(common_min_facts=50)
    with FactStore(location, clock=clock, query_policy=policy) as store:
        with store.batch():
            for n in range(60):
                store.add("user", f"coffee note {n}", user="ann")
            for n in range(40):
                store.add("user", f"coffee at the corner {n}" if n < 2 else
                          f"lisbon tram {n}" if n < 17 else f"misc {n}", user="bob")
        before = store.query_words("coffee lisbon")
        found = {h.fact.value.split()[0] for h in store.search("coffee lisbon", user="bob")}
        assert (before, found) == (["lisbon"], {"lisbon"})  # coffee: in 62 of 100 facts
        if eraser == "this store":
            store.erase(user="ann")
        else:
            with FactStore(location, clock=clock) as other:
                other.erase(user="ann")
        with FactStore(location, clock=clock, query_policy=policy) as fresh:
            expected = fresh.query_words("coffee lisbon")
            expected_hits = [h.fact.id for h in fresh.search("coffee lisbon", user="bob")]
        assert "coffee" in expected  # in 2 of 40 facts now
        assert store.query_words("coffee lisbon") == expected
        assert [h.fact.id for h in store.search("coffee lisbon", user="bob")] == expected_hits
