"""The two fusion rules of the ranking, on candidates as the legs report them."""

from __future__ import annotations

import pytest

from ctxslots import RankingPolicy
from ctxslots.stores.ranking import Candidate, rank_candidates

NOW = 1_800_000_000.0


def cand(fid, bm25=None, bm25_rank=None, cosine=None, vector_rank=None):
    return Candidate(fact_id=fid, slot="user", updated_at=NOW, score=0.0, confidence=1.0,
                     bm25=bm25, bm25_rank=bm25_rank, cosine=cosine, vector_rank=vector_rank)


CANDS = [cand(1, bm25=-8.0, bm25_rank=1, cosine=0.10, vector_rank=3),
         cand(2, bm25=-2.0, bm25_rank=2, cosine=0.90, vector_rank=1),
         cand(3, cosine=0.60, vector_rank=2)]


def test_rrf_uses_ranks_only():
    policy = RankingPolicy(vector_weight=1.0)
    ranked = rank_candidates(CANDS, now=NOW, policy=policy, limit=3, fused=True)
    rel = {c.fact_id: t.relevance for c, t in ranked}
    assert rel[1] == pytest.approx(1 / 61 + 1 / 63)
    assert rel[2] == pytest.approx(1 / 62 + 1 / 61)
    assert rel[3] == pytest.approx(1 / 62)
    assert [c.fact_id for c, _ in ranked] == [2, 1, 3]


def test_score_fusion_adds_normalised_bm25_and_cosine():
    policy = RankingPolicy(vector_weight=1.0, fusion="score")
    ranked = rank_candidates(CANDS, now=NOW, policy=policy, limit=3, fused=True)
    rel = {c.fact_id: t.relevance for c, t in ranked}
    assert rel[1] == pytest.approx(1.0 + 0.10)
    assert rel[2] == pytest.approx(0.25 + 0.90)
    assert rel[3] == pytest.approx(0.60)
    assert [c.fact_id for c, _ in ranked] == [2, 1, 3]
    heavier = RankingPolicy(vector_weight=0.1, fusion="score")
    assert [c.fact_id for c, _ in rank_candidates(CANDS, now=NOW, policy=heavier, limit=3,
                                                  fused=True)] == [1, 2, 3]


def test_negative_cosine_adds_nothing_and_unknown_fusion_is_refused():
    policy = RankingPolicy(vector_weight=1.0, fusion="score")
    ranked = rank_candidates([cand(1, cosine=-0.5, vector_rank=1)], now=NOW, policy=policy,
                             limit=1, fused=True)
    assert ranked[0][1].relevance == 0.0
    with pytest.raises(ValueError):
        RankingPolicy(fusion="max")
