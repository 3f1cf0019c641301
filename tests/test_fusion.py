"""The fusion rules of the ranking, on candidates as the legs report them."""

from __future__ import annotations

import math
import random
import statistics
from datetime import UTC, datetime

import pytest

from ctxslots import RankingPolicy
from ctxslots.stores.periods import query_periods
from ctxslots.stores.ranking import Candidate, rank_candidates, reinforcement_factor

NOW = 1_800_000_000.0


def cand(fid, bm25=None, bm25_rank=None, cosine=None, vector_rank=None):
    return Candidate(fact_id=fid, slot="user", updated_at=NOW, score=0.0, confidence=1.0,
                     bm25=bm25, bm25_rank=bm25_rank, cosine=cosine, vector_rank=vector_rank)


CANDS = [cand(1, bm25=-8.0, bm25_rank=1, cosine=0.10, vector_rank=3),
         cand(2, bm25=-2.0, bm25_rank=2, cosine=0.90, vector_rank=1),
         cand(3, cosine=0.60, vector_rank=2)]


def test_rrf_uses_ranks_only():
    policy = RankingPolicy(vector_weight=1.0, fusion="rrf")
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
    policy = RankingPolicy(vector_weight=1.0, fusion="score", vector_only_min_cosine=-1.0)
    ranked = rank_candidates([cand(1, cosine=-0.5, vector_rank=1)], now=NOW, policy=policy,
                             limit=1, fused=True)
    assert ranked[0][1].relevance == 0.0
    with pytest.raises(ValueError):
        RankingPolicy(fusion="max")


def test_adaptive_fusion_normalises_each_leg_and_weighs_it_by_its_clearest_winner():
    """Each leg is min-max scaled, times its weight and the z-score of its best score."""
    lexical = [8.0, 2.0]
    cosines = [0.10, 0.90, 0.60]
    z_lex = (8.0 - statistics.fmean(lexical)) / statistics.pstdev(lexical)
    z_vec = (0.90 - statistics.fmean(cosines)) / statistics.pstdev(cosines)
    ranked = rank_candidates(CANDS, now=NOW, policy=RankingPolicy(vector_weight=1.0), limit=3,
                             fused=True)
    rel = {c.fact_id: t.relevance for c, t in ranked}
    assert rel[1] == pytest.approx(z_lex * 1.0 + z_vec * 0.0)
    assert rel[2] == pytest.approx(z_lex * 0.0 + z_vec * 1.0)
    assert rel[3] == pytest.approx(z_vec * (0.60 - 0.10) / 0.80)
    assert [2, 1, 3] == [c.fact_id for c, _ in ranked]


def test_adaptive_fusion_trusts_the_leg_whose_best_stands_out():
    """A leg with one clear winner outweighs a leg whose scores are all alike."""
    flat_vectors = [cand(i, cosine=0.50 - i / 1000, vector_rank=i) for i in range(1, 21)]
    sharp_words = [cand(30, bm25=-12.0, bm25_rank=1)] + [
        cand(30 + i, bm25=-1.0, bm25_rank=1 + i) for i in range(1, 20)]
    ranked = rank_candidates(flat_vectors + sharp_words, now=NOW,
                             policy=RankingPolicy(vector_weight=1.0), limit=3, fused=True)
    assert 30 == ranked[0][0].fact_id


def test_weights_still_scale_each_leg():
    """A zero lexical weight leaves the vector order; a zero vector weight the BM25 order."""
    vec_only = RankingPolicy(vector_weight=1.0, lexical_weight=0.0)
    words = RankingPolicy(vector_weight=0.0)
    assert [2, 3, 1] == [c.fact_id for c, _ in rank_candidates(CANDS, now=NOW, policy=vec_only,
                                                                 limit=3, fused=True)]
    assert [1, 2] == [c.fact_id for c, _ in rank_candidates(CANDS, now=NOW, policy=words,
                                                              limit=2, fused=True)]


def test_vector_only_candidates_under_the_floor_are_left_out():
    """A candidate only the vector leg found, below the floor, never comes back."""
    cands = [cand(1, bm25=-3.0, bm25_rank=1, cosine=0.05, vector_rank=2),
             cand(2, cosine=0.19, vector_rank=3), cand(3, cosine=0.35, vector_rank=1)]
    ranked = rank_candidates(cands, now=NOW, policy=RankingPolicy(vector_weight=1.0), limit=3,
                             fused=True)
    assert [1, 3] == sorted(c.fact_id for c, _ in ranked)
    kept = rank_candidates(cands, now=NOW, limit=3, fused=True,
                           policy=RankingPolicy(vector_weight=1.0, vector_only_min_cosine=0.0))
    assert 3 == len(kept)


def test_the_first_hits_do_not_depend_on_how_deep_the_legs_went():
    """Fusing a leg cut at 100 or at 300 gives the same first 100 hits."""
    rng = random.Random(7)
    bm25 = sorted((rng.uniform(0.1, 20.0) for _ in range(300)), reverse=True)
    cosine = sorted((rng.uniform(0.0, 0.9) for _ in range(300)), reverse=True)
    lex_ids = rng.sample(range(1, 1000), 300)
    vec_ids = rng.sample(range(1, 1000), 300)

    def legs(pool: int) -> list[Candidate]:
        found: dict[int, Candidate] = {}
        for rank, (fid, value) in enumerate(zip(lex_ids[:pool], bm25, strict=False), 1):
            found[fid] = cand(fid, bm25=-value, bm25_rank=rank)
        for rank, (fid, value) in enumerate(zip(vec_ids[:pool], cosine, strict=False), 1):
            old = found.get(fid)
            found[fid] = cand(fid, bm25=old.bm25 if old else None,
                              bm25_rank=old.bm25_rank if old else None,
                              cosine=value, vector_rank=rank)
        return list(found.values())

    policy = RankingPolicy(vector_weight=1.0)
    for fusion in ("adaptive", "rrf", "score"):
        policy = RankingPolicy(vector_weight=1.0, fusion=fusion)
        shallow = rank_candidates(legs(100), now=NOW, policy=policy, limit=100, fused=True,
                                  depth=100)
        deep = rank_candidates(legs(300), now=NOW, policy=policy, limit=400, fused=True,
                               depth=100)
        assert [c.fact_id for c, _ in shallow] == [c.fact_id for c, _ in deep][:len(shallow)]
        assert len(deep) > len(shallow)


def test_a_period_the_query_names_lifts_memories_observed_then():
    """A memory observed in the month a query names outranks an equal one observed earlier."""
    july = datetime(2023, 7, 14, tzinfo=UTC).timestamp()
    march = datetime(2023, 3, 14, tzinfo=UTC).timestamp()
    now = datetime(2023, 12, 1, tzinfo=UTC).timestamp()
    cands = [Candidate(fact_id=1, slot="user", updated_at=now, observed_at=march, score=0.0,
                       confidence=1.0, bm25=-5.0, bm25_rank=1),
             Candidate(fact_id=2, slot="user", updated_at=now, observed_at=july, score=0.0,
                       confidence=1.0, bm25=-4.0, bm25_rank=2)]
    periods = query_periods("where did we go camping in July?", now)
    ranked = rank_candidates(cands, now=now, policy=RankingPolicy(), limit=2, periods=periods)
    assert [2, 1] == [c.fact_id for c, _ in ranked]
    assert {"period": 2.0} == dict(ranked[0][1].extra)
    plain = rank_candidates(cands, now=now, policy=RankingPolicy(period_boost=1.0), limit=2,
                            periods=periods)
    assert [1, 2] == [c.fact_id for c, _ in plain]


def _said(fact_id: int, bm25: float, observed_at: float) -> Candidate:
    return Candidate(fact_id=fact_id, slot="user", updated_at=observed_at,
                     observed_at=observed_at, score=0.0, confidence=1.0, bm25=bm25,
                     bm25_rank=fact_id)


def test_a_memory_of_the_same_episode_as_a_strong_match_moves_up():
    """A weak match observed at the same moment as the best match outranks a slightly
    better one from another moment; within one episode the order stays, and an episode
    holding most of the candidates lifts nothing."""
    one, two, three = 1_700_000_000.0, 1_700_100_000.0, 1_700_200_000.0
    others = [_said(10 + n, -1.0, 1_600_000_000.0 + n * 1000.0) for n in range(8)]
    cands = [_said(1, -10.0, one), _said(2, -3.0, one), _said(3, -4.0, two),
             _said(4, -2.0, three), *others]
    ranked = rank_candidates(cands, now=NOW, policy=RankingPolicy(), limit=4)
    assert [1, 2, 3, 4] == [c.fact_id for c, _ in ranked]
    assert {"episode": 1.0 + 0.3 * 10.0 / 3.0} == dict(ranked[1][1].extra)
    assert {"episode": 1.0 + 0.3 * 3.0 / 10.0} == dict(ranked[0][1].extra)
    assert {} == dict(ranked[2][1].extra)
    plain = rank_candidates(cands, now=NOW, policy=RankingPolicy(episode_weight=0.0), limit=4)
    assert [1, 3, 2, 4] == [c.fact_id for c, _ in plain]
    crowded = [_said(n, -float(n), one) for n in range(1, 6)] + [_said(9, -2.5, two)]
    flat = rank_candidates(crowded, now=NOW, policy=RankingPolicy(), limit=6)
    assert [5, 4, 3, 9, 2, 1] == [c.fact_id for c, _ in flat]
    assert all(not t.extra for _, t in flat)


def test_the_common_word_lift_multiplies_relevance_with_words_alone():
    """A candidate holding a common query word gains ``common_word_boost`` times its
    relevance when the lexical leg ranks alone, and nothing when a vector leg is fused."""
    import attrs

    plain = [cand(1, bm25=-3.0, bm25_rank=1), cand(2, bm25=-2.5, bm25_rank=2)]
    lifted = [plain[0], attrs.evolve(plain[1], holds_common=True)]
    policy = RankingPolicy()
    assert [1, 2] == [c.fact_id for c, _ in rank_candidates(plain, now=NOW, policy=policy,
                                                            limit=2)]
    ranked = rank_candidates(lifted, now=NOW, policy=policy, limit=2)
    assert [2, 1] == [c.fact_id for c, _ in ranked]
    assert ranked[0][1].final == pytest.approx(2.5 * 1.5)
    assert {"common_word": 1.5} == dict(ranked[0][1].extra)
    assert "common_word" not in ranked[1][1].extra
    off = rank_candidates(lifted, now=NOW, policy=RankingPolicy(common_word_boost=1.0), limit=2)
    assert [1, 2] == [c.fact_id for c, _ in off] and not off[1][1].extra
    fused = rank_candidates(
        [attrs.evolve(c, cosine=0.5, vector_rank=n) for n, c in enumerate(lifted, start=1)],
        now=NOW, policy=RankingPolicy(vector_weight=1.0), limit=2, fused=True)
    assert all("common_word" not in t.extra for _, t in fused)


def test_the_subject_lift_multiplies_again_with_words_alone():
    """A candidate whose first word is the common query word gains
    ``common_subject_boost`` on top of ``common_word_boost``, with words alone only."""
    import attrs

    holds = attrs.evolve(cand(1, bm25=-3.0, bm25_rank=1), holds_common=True)
    leads = attrs.evolve(cand(2, bm25=-2.0, bm25_rank=2), holds_common=True, leads_common=True)
    ranked = rank_candidates([holds, leads], now=NOW, policy=RankingPolicy(), limit=2)
    assert [2, 1] == [c.fact_id for c, _ in ranked]
    assert ranked[0][1].final == pytest.approx(2.0 * 1.5 * 2.0)
    assert {"common_word": 1.5, "common_subject": 2.0} == dict(ranked[0][1].extra)
    off = rank_candidates([holds, leads], now=NOW,
                          policy=RankingPolicy(common_subject_boost=1.0), limit=2)
    assert [1, 2] == [c.fact_id for c, _ in off]
    assert all("common_subject" not in t.extra for _, t in off)
    fused = rank_candidates(
        [attrs.evolve(c, cosine=0.5, vector_rank=n) for n, c in enumerate((holds, leads), 1)],
        now=NOW, policy=RankingPolicy(vector_weight=1.0), limit=2, fused=True)
    assert all("common_subject" not in t.extra for _, t in fused)


@pytest.mark.parametrize("bad", [{"common_word_boost": -0.5}, {"common_subject_boost": -1.0},
                                 {"common_word_share": 0.0},
                                 {"common_word_share": 1.5}, {"common_word_share": -0.1}])
def test_a_common_word_setting_out_of_range_is_refused(bad):
    with pytest.raises(ValueError):
        RankingPolicy(**bad)


def test_equal_finals_come_in_fact_id_order_whatever_order_they_arrive():
    """Ties are broken by fact id, not by the order the legs handed the candidates over."""
    arriving = [cand(fid, bm25=-5.0, bm25_rank=n) for n, fid in enumerate((9, 4, 7, 1), 1)]
    for order in (arriving, arriving[::-1]):
        ranked = rank_candidates(order, now=NOW, policy=RankingPolicy(), limit=4)
        assert [1, 4, 7, 9] == [c.fact_id for c, _ in ranked]


def _scored(fact_id: int, score: float) -> Candidate:
    return Candidate(fact_id=fact_id, slot="user", updated_at=NOW, score=score,
                     confidence=1.0, bm25=-5.0, bm25_rank=fact_id)


def test_the_policys_reinforcement_weight_is_the_one_applied():
    policy = RankingPolicy(reinforcement_weight=0.5)
    ranked = rank_candidates([_scored(1, 2.0)], now=NOW, policy=policy, limit=1)
    assert ranked[0][1].reinforcement == pytest.approx(math.exp(0.5 * 2.0))
    off = rank_candidates([_scored(1, 2.0), _scored(2, 0.0)], now=NOW,
                          policy=RankingPolicy(reinforcement_weight=0.0), limit=2)
    assert [1, 2] == [c.fact_id for c, _ in off]
    assert {1.0} == {t.reinforcement for _, t in off}


def test_a_runaway_score_is_clamped_and_never_overflows():
    assert reinforcement_factor(10_000.0) == pytest.approx(math.exp(0.2 * 25.0))
    assert reinforcement_factor(-10_000.0) == pytest.approx(math.exp(-0.2 * 25.0))
    ranked = rank_candidates([_scored(1, 1e6), _scored(2, -1e6)], now=NOW,
                             policy=RankingPolicy(), limit=2)
    assert [1, 2] == [c.fact_id for c, _ in ranked]
    assert all(math.isfinite(t.final) and t.final > 0 for _, t in ranked)



def test_a_candidate_at_exactly_the_depth_is_ranked_with_the_others():
    """depth is inclusive: the legs' candidates at that rank are fused and compete on their
    final score; one deeper comes after them whatever its score."""
    cands = [cand(1, bm25=-5.0, bm25_rank=1), cand(2, bm25=-4.0, bm25_rank=2),
             cand(3, bm25=-3.0, bm25_rank=3, cosine=0.9, vector_rank=3)]
    cands[1].score = 10.0
    policy = RankingPolicy(vector_weight=1.0, fusion="rrf")
    ranked = rank_candidates(cands, now=NOW, policy=policy, limit=3, fused=True, depth=2)
    assert [2, 1, 3] == [c.fact_id for c, _ in ranked]
    assert ranked[0][1].relevance == pytest.approx(1 / 62)



def test_an_episode_of_exactly_the_largest_share_still_lifts():
    """An episode holding up to EPISODE_MAX_SHARE of the candidates within depth gains;
    only a larger one does not."""
    moment = 1_700_000_000.0
    others = [_said(10 + n, -1.0, 1_600_000_000.0 + n * 1000.0) for n in range(6)]
    cands = [_said(1, -10.0, moment), _said(2, -3.0, moment), *others]  # 2 of 8
    ranked = {c.fact_id: t for c, t in rank_candidates(cands, now=NOW, policy=RankingPolicy(),
                                                      limit=8)}
    assert ranked[2].extra == {"episode": 1.0 + 0.3 * 10.0 / 3.0}
    crowded = rank_candidates([*cands, _said(3, -2.0, moment)], now=NOW,
                              policy=RankingPolicy(), limit=9)  # 3 of 9
    assert all(not t.extra for _, t in crowded)
