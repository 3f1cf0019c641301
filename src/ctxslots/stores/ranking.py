"""Ranking math, apart from the SQL that gathers candidates.

A candidate arrives with what each retrieval leg said of it (BM25 rank and
value; later vector rank and cosine). :func:`rank_candidates` turns those into
one relevance, multiplies by time decay, reinforcement and confidence, and
returns the candidates best first with a full :class:`~ctxslots.model.HitTrace`.

    final = relevance * exp(-age / tau[slot]) * exp(0.2 * score) * confidence

With the lexical leg alone, relevance is ``-bm25`` (FTS5's bm25 is more
negative for better matches). When both legs run, relevance is reciprocal-rank
fusion, ``sum(weight / (k + rank))`` over the legs that found the fact: a value
that only orders hits within one search, never a measure of relevance by itself.
Ties are broken by fact id, so the same store and query always give the same
order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import cast

import attrs

from ..model import HitTrace

__all__ = [
    "DEFAULT_DECAY_DAYS",
    "MODEL_VECTOR_WEIGHT",
    "Candidate",
    "RankingPolicy",
    "decay_factor",
    "rank_candidates",
    "reinforcement_factor",
]

_DAY = 86400.0

#: Decay time constant (tau, in days) per slot; ``None`` means no decay.
#: User facts (who the user is) and project facts (how the workspace works) stay
#: true until replaced by key, so they do not fade; agent observations do, slowly.
#: On the labelled set in benchmarks/data/ every amount of decay cost recall
#: (R@10: none 0.594, tau 365 d 0.592, 180 d 0.581, 90 d 0.560, 30 d 0.524), so
#: the default is the mildest that still lets a newer note win a near-tie: a
#: year-old agent note keeps 37% of its weight. See BENCHMARKS.md.
DEFAULT_DECAY_DAYS: Mapping[str, float | None] = {"user": None, "project": None, "agent": 365.0}

#: Vector-leg weight used when the policy leaves it to the embedder (``None``)
#: and the embedder is a real model. With all-MiniLM-L6-v2 on the labelled set,
#: R@10 was 0.655 at weight 0.5, 0.732 at 1, 0.740 at 2 and 0.774 at 4 (words
#: alone 0.594, vectors alone 0.810). See BENCHMARKS.md.
MODEL_VECTOR_WEIGHT = 4.0

#: Reinforcement scores are clamped to this range before ``exp`` so a runaway
#: score cannot overflow or swamp relevance entirely.
SCORE_LIMIT = 25.0


@attrs.frozen
class Candidate:
    """What the retrieval legs found about one fact.

    Attributes:
        fact_id: The fact's id.
        slot: Its slot (selects the decay constant).
        updated_at: Unix seconds of its last value change (its age starts there).
        score: Its reinforcement score.
        confidence: Its confidence, 0 to 1.
        bm25_rank: 1-based rank in the lexical leg, or ``None``.
        bm25: Raw FTS5 bm25 value, or ``None``.
        vector_rank: 1-based rank in the vector leg, or ``None``.
        cosine: Cosine similarity in the vector leg, or ``None``.
    """

    fact_id: int
    slot: str
    updated_at: float
    score: float
    confidence: float
    bm25_rank: int | None = None
    bm25: float | None = None
    vector_rank: int | None = None
    cosine: float | None = None


@attrs.frozen
class RankingPolicy:
    """The knobs of ranking.

    Attributes:
        decay_days: Tau in days per slot; ``None`` for no decay.
        default_decay_days: Tau for slots not in ``decay_days`` (slots that
            plugins add decay like agent notes).
        reinforcement_weight: The 0.2 in ``exp(0.2 * score)``.
        lexical_weight: Weight of the BM25 leg in fusion (0 switches it off).
        vector_weight: Weight of the vector leg in fusion (0 switches it off);
            ``None`` lets the store choose by embedder: 0 for the hashing
            embedder (it never beat words alone on the labelled set),
            :data:`MODEL_VECTOR_WEIGHT` for a real model.
        rrf_k: The k of reciprocal-rank fusion.
        min_cosine: Vector candidates at or below this cosine are left out
            (with no similarity at all, a nearest neighbour is noise).
        fusion: How the two legs combine: ``"rrf"`` (reciprocal-rank fusion,
            ``weight / (rrf_k + rank)`` per leg) or ``"score"`` (the BM25
            relevance divided by the best candidate's, times ``lexical_weight``,
            plus the cosine times ``vector_weight``).
        link_min_strength: A fact linked to a hit this strongly (returned
            together and then reinforced this many times) is pulled into the
            results; ``None`` never pulls linked facts.
        link_weight: A pulled fact's relevance is its hit's relevance times this.
    """

    decay_days: Mapping[str, float | None] = attrs.field(
        factory=lambda: dict(DEFAULT_DECAY_DAYS)
    )
    default_decay_days: float | None = 365.0
    reinforcement_weight: float = 0.2
    lexical_weight: float = attrs.field(default=1.0, validator=attrs.validators.ge(0.0))
    vector_weight: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(0.0)))
    rrf_k: float = attrs.field(default=60.0, validator=attrs.validators.gt(0.0))
    min_cosine: float = 0.0
    fusion: str = attrs.field(default="rrf", validator=attrs.validators.in_(("rrf", "score")))
    # The cast keeps type checkers from narrowing the field to float by its default.
    link_min_strength: float | None = attrs.field(
        default=cast("float | None", 3.0),
        validator=attrs.validators.optional(attrs.validators.gt(0.0)))
    link_weight: float = attrs.field(default=0.5, validator=attrs.validators.ge(0.0))

    def tau_days(self, slot: str) -> float | None:
        """The decay constant for ``slot``, in days (``None``: no decay)."""
        if slot in self.decay_days:
            return self.decay_days[slot]
        return self.default_decay_days


def decay_factor(age_seconds: float, tau_days: float | None) -> float:
    """``exp(-age / tau)``; 1.0 when ``tau_days`` is ``None`` or the age is negative."""
    if tau_days is None or age_seconds <= 0:
        return 1.0
    return math.exp(-age_seconds / (tau_days * _DAY))


def reinforcement_factor(score: float, weight: float = 0.2) -> float:
    """``exp(weight * score)`` with the score clamped to +/- :data:`SCORE_LIMIT`."""
    return math.exp(weight * max(-SCORE_LIMIT, min(SCORE_LIMIT, score)))


def _relevance(candidate: Candidate, policy: RankingPolicy, fused: bool, best_bm25: float) -> float:
    if not fused:
        return -candidate.bm25 if candidate.bm25 is not None else 0.0
    total = 0.0
    if policy.fusion == "score":
        if candidate.bm25 is not None and best_bm25 > 0:
            total += policy.lexical_weight * (-candidate.bm25) / best_bm25
        if candidate.cosine is not None and policy.vector_weight:
            total += policy.vector_weight * max(0.0, candidate.cosine)
        return total
    if candidate.bm25_rank is not None:
        total += policy.lexical_weight / (policy.rrf_k + candidate.bm25_rank)
    if candidate.vector_rank is not None and policy.vector_weight:
        total += policy.vector_weight / (policy.rrf_k + candidate.vector_rank)
    return total


def rank_candidates(
    candidates: Iterable[Candidate],
    *,
    now: float,
    policy: RankingPolicy,
    limit: int,
    fused: bool = False,
) -> list[tuple[Candidate, HitTrace]]:
    """Score candidates and return the best ``limit`` of them with their traces.

    :param fused: Both legs ran: relevance is reciprocal-rank fusion rather
        than ``-bm25``.
    """
    scored: list[tuple[float, int, Candidate, float, float, float, float]] = []
    candidates = list(candidates)
    best_bm25 = max((-c.bm25 for c in candidates if c.bm25 is not None), default=0.0)
    for cand in candidates:
        relevance = _relevance(cand, policy, fused, best_bm25)
        age = max(0.0, now - cand.updated_at)
        decay = decay_factor(age, policy.tau_days(cand.slot))
        reinforcement = reinforcement_factor(cand.score, policy.reinforcement_weight)
        final = relevance * decay * reinforcement * cand.confidence
        scored.append((final, cand.fact_id, cand, relevance, decay, reinforcement, age))
    scored.sort(key=lambda item: (-item[0], item[1]))
    out: list[tuple[Candidate, HitTrace]] = []
    for position, (final, _, cand, relevance, decay, reinforcement, age) in enumerate(
        scored[:limit], start=1
    ):
        trace = HitTrace(
            bm25_rank=cand.bm25_rank,
            bm25=cand.bm25,
            vector_rank=cand.vector_rank,
            cosine=cand.cosine,
            relevance=relevance,
            decay=decay,
            age_days=age / _DAY,
            reinforcement=reinforcement,
            confidence=cand.confidence,
            final=final,
            rank=position,
        )
        out.append((cand, trace))
    return out
