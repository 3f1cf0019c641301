"""The same facts and question rank the same on SQLite and PostgreSQL with both legs on:
cosines that differ in an engine's last float32 digits, and fused scores equal but for
rounding, no longer decide the order (ties go by fact id)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ctxslots import FactStore, RankingPolicy

FUSED = RankingPolicy(vector_weight=1.0)
NOW = 1_800_000_000.0

CASES = {
    # Three facts match the word equally, and two of them have cosines equal in exact
    # arithmetic (0.5): float noise stretched to the leg's whole scale ranked them.
    "equal cosines": ([("agent", "hotel bravo charlie lima", {}),
                       ("agent", "india echo charlie golf", {}),
                       ("agent", "lima golf foxtrot", {}),
                       ("agent", "delta charlie bravo kilo", {}),
                       ("agent", "delta kilo", {}),
                       ("agent", "alpha hotel", {})], "charlie"),
    # Each of two hits is best on one leg: their fused scores are equal but for rounding.
    "fused tie": ([("agent", "cold C++ deployment server retry monday.",
                    {"agent": "Bot", "scope": "w%", "tags": ["t_"], "context": "port"}),
                   ("user", "NEAR retry  ", {"context": "東京 !"}),
                   ("project", "Cafe it's deployment Straße helix C++  ",
                    {"scope": "w%", "tags": ["e", "t%"], "source": "a_b"}),
                   ("agent", "friday the friday the it's under_score.",
                    {"tags": ["tag one", "t%", "t_"]})], "monday under_score 東京 *."),
}


def _ranked(location: str, facts, question: str) -> list[tuple[str, float]]:
    with FactStore(location, clock=lambda: NOW, ranking=FUSED) as store:
        for slot, value, options in facts:
            store.add(slot, value, **options)
        return [(h.fact.value, h.trace.final) for h in
                store.search(question, include_archive=True, track_access=False)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_both_engines_rank_alike(case, tmp_path, pg_url):
    facts, question = CASES[case]
    on_sqlite = _ranked(str(tmp_path / "memory.db"), facts, question)
    on_postgres = _ranked(pg_url, facts, question)
    assert [v for v, _ in on_sqlite] == [v for v, _ in on_postgres]
    assert [f for _, f in on_sqlite] == pytest.approx([f for _, f in on_postgres], rel=1e-6)
    assert len(on_sqlite) >= 2


class _Tilted:
    """Every memory at cosine 1/2 from the query in exact arithmetic, each vector rounded
    its own way in float32."""

    model_id = "test:tilted-16"
    dimension = 16

    def embed(self, texts):
        rows = []
        for text in texts:
            row = np.zeros(self.dimension)
            row[0] = 1.0
            if text != "query":
                rest = np.random.default_rng(
                    int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)).standard_normal(
                    self.dimension - 1)
                row[1:] = rest * (np.sqrt(3.0) / np.linalg.norm(rest))
                row /= 2.0
            rows.append(row)
        return np.array(rows, dtype=np.float32)


@pytest.mark.parametrize("vector_cache", [False, True], ids=["table", "copy"])
def test_cosines_equal_once_settled_tie_at_the_pool_cut_by_id(location, vector_cache):
    """More memories than the candidate pool at one settled cosine: the first hits are the
    lowest ids on every engine, not the ones an engine's float32 rounding put first."""
    policy = RankingPolicy(vector_weight=1.0, lexical_weight=0.0, vector_only_min_cosine=0.1)
    with FactStore(location, clock=lambda: NOW, ranking=policy, embedder=_Tilted(),
                   vector_writes="inline", vector_cache=vector_cache) as store:
        with store.batch():
            ids = [store.upsert("user", f"k{n:03d}", f"memory number {n}").id
                   for n in range(400)]
        if vector_cache and store.engine == "sqlite":
            assert store.load_vector_cache()
        hits = store.search("query", track_access=False, limit=10)
    assert {h.trace.cosine for h in hits} == {0.5}
    assert [h.fact.id for h in hits] == sorted(ids)[:10]


@pytest.mark.parametrize("factor", [1.0, 3.0])
def test_a_boost_keeps_ties_by_fact_id(tmp_path, pg_url, factor):
    """A boost of every fact by one factor changes no order: finals equal but for rounding
    still tie and go by fact id, on both engines."""
    facts, question = CASES["fused tie"]
    orders = []
    for location in (str(tmp_path / "memory.db"), pg_url):
        for boost in (None, lambda fact: factor):
            with FactStore(location, clock=lambda: NOW, ranking=FUSED) as store:
                if boost is None:  # the first time on this engine
                    for slot, value, options in facts:
                        store.add(slot, value, **options)
                hits = store.search(question, include_archive=True, track_access=False,
                                    boost=boost)
            orders.append([h.fact.id for h in hits])
    assert len(orders[0]) >= 2
    assert orders == [orders[0]] * 4
    assert orders[0] == sorted(orders[0])  # the two hits tie: by id


def test_a_tie_at_the_pool_cut_is_read_at_most_three_times():
    """A vector leg tied at its cut is read deeper, four times as deep each time, at most
    three times in all: a tie of a few hundred settles by id in two reads, and one of
    20,000 facts of one text costs three reads, not a doubling per read (nine scans)."""
    from ctxslots.stores.backend.unit_vectors import TIE_READS, settled_nearest

    def engine(tied: int) -> tuple[list[int], object]:
        asked: list[int] = []

        def knn(n: int) -> list[tuple[int, float]]:
            asked.append(n)
            # Equal once settled; the engine's last digits put the highest ids first.
            rows = [(fid, 0.5 + 1e-12 * fid) for fid in range(tied, 0, -1)]
            return rows[:n]
        return asked, knn

    asked, knn = engine(300)
    assert list(range(1, 101)) == [fid for fid, _ in settled_nearest(knn, 100)]
    assert [101, 404] == asked
    asked, knn = engine(20_000)
    nearest = settled_nearest(knn, 100)
    assert TIE_READS == len(asked) == 3 and [101, 404, 1616] == asked
    # Past that depth the engine's order stands: the lowest ids of the 1,616 it gave.
    assert list(range(18_385, 18_485)) == [fid for fid, _ in nearest]
