"""Ranking math, apart from the SQL that gathers candidates.

A candidate arrives with what each retrieval leg said of it (BM25 rank and
value; vector rank and cosine). :func:`rank_candidates` turns those into one
relevance, multiplies by time decay, reinforcement and confidence, and returns
the candidates best first with a full :class:`~ctxslots.model.HitTrace`.

    final = relevance * exp(-age / tau[slot]) * exp(0.2 * score) * confidence

With the lexical leg alone, relevance is ``-bm25`` (FTS5's bm25 is more
negative for better matches). When both legs run, the default fusion
(``"adaptive"``) puts each leg's scores on one scale per query (min-max over
that leg's candidates: its best is 1, its last 0) and weighs each leg by how
far its best candidate stands above the leg's other candidates (the z-score of
the best score), times the leg's weight:

    relevance = w_lex * z_lex * norm(-bm25) + w_vec * z_vec * norm(cosine)

so a leg whose list has a clear winner speaks louder than a leg whose scores
are all alike, query by query. The older rules remain: ``"rrf"``
(``sum(weight / (k + rank))``) and ``"score"`` (BM25 relative to the best plus
the raw cosine). A relevance only orders hits within one search.

Only candidates within ``depth`` of the top of a leg take part in fusion and
its statistics, so the first hits do not depend on how many were asked for; a
search asking for more than ``depth`` gets the deeper candidates after them. A
memory observed in a period the query names ("in July 2023") has its relevance
multiplied by :attr:`RankingPolicy.period_boost`; with the lexical leg alone, a
memory holding a query word common to much of the store (a name) by
:attr:`RankingPolicy.common_word_boost`, and one whose first word is that word
(its subject) by :attr:`RankingPolicy.common_subject_boost` too. A candidate observed at the
same moment as other candidates (the facts one flush wrote, the turns of one
session) gains :attr:`RankingPolicy.episode_weight` times the best of those
others' relevance: a question about one part of an episode is often answered by
another part, and within one episode the order stays as it was. Ties are broken
by fact id, so the same store and query always give the same order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import cast

import attrs

from .._checks import decay_map, number, one_of
from ..model import HitTrace

__all__ = [
    "COMMON_WORD_BOOST",
    "COMMON_WORD_SHARE",
    "DEFAULT_DECAY_DAYS",
    "MODEL_VECTOR_WEIGHT",
    "Candidate",
    "RankingPolicy",
    "decay_factor",
    "found_within",
    "left_out",
    "rank_candidates",
    "reinforcement_factor",
    "tie_steps",
]

_DAY = 86400.0

#: Decay time constant (tau, in days) per slot; ``None`` means no decay.
#: User facts (who the user is) and project facts (how the workspace works) stay
#: true until replaced by key, so they do not fade; agent observations do, slowly:
#: every amount of decay cost recall, so this is the mildest that still lets a
#: newer note win a near-tie (BENCHMARKS.md, "Retrieval quality on the labelled set").
DEFAULT_DECAY_DAYS: Mapping[str, float | None] = {"user": None, "project": None, "agent": 365.0}

#: Vector-leg weight used when the policy leaves it to the embedder (``None``)
#: and the embedder is a real model: equal to the lexical leg's, since adaptive
#: fusion already weighs each leg by how clearly it picks a best candidate
#: (BENCHMARKS.md, "What moved which default, and why").
MODEL_VECTOR_WEIGHT = 1.0

#: A candidate only the vector leg found is left out below this cosine: on
#: all-MiniLM-L6-v2's scale it removes noise and no memory a top-10 needed
#: (BENCHMARKS.md, "What moved which default, and why").
VECTOR_ONLY_MIN_COSINE = 0.2

#: Relevance multiplier for a memory observed in a period the query names.
PERIOD_BOOST = 2.0

#: Relevance multiplier for a candidate holding a query word common to much of the
#: store (a name said in most facts): BM25 gives such a word nearly no weight, so a
#: fact about the person a question names would rank level with one about another
#: (BENCHMARKS.md, "A name the question says: the common-word lift").
COMMON_WORD_BOOST = 1.5

#: A further relevance multiplier for a candidate whose first word is such a common
#: query word: its subject is the person the question names ("Otto likes..."), or a
#: turn's speaker, where the others only mention them (BENCHMARKS.md, "The subject a
#: question names").
COMMON_SUBJECT_BOOST = 2.0

#: A query word held by at least this share of the store's facts is common: BM25's
#: idf gives it under 0.9 (a word in one fact of a thousand gets 6.5), and nothing
#: once over half the facts hold it.
COMMON_WORD_SHARE = 0.3

#: Share of the best relevance among the other candidates observed at the same
#: moment (one flush, one session) that a candidate gains: facts said together are
#: asked about together; any weight under 1 keeps the order within an episode
#: (BENCHMARKS.md, "Extracted facts, the budget filled, dates in the prompt").
EPISODE_WEIGHT = 0.3

#: An episode holding more than this share of the candidates within depth gains
#: nothing: when most candidates were observed at one moment (a bulk import, a
#: fixed clock) the moment tells them apart from nothing.
EPISODE_MAX_SHARE = 0.25

#: Reinforcement scores are clamped to this range before ``exp`` so a runaway
#: score cannot overflow or swamp relevance entirely.
SCORE_LIMIT = 25.0

FUSIONS = ("adaptive", "rrf", "score")

#: The largest reinforcement weight: ``exp(weight * SCORE_LIMIT)`` stays a float (it
#: overflows past about 28).
MAX_REINFORCEMENT_WEIGHT = 20.0



# Not frozen: a search makes one per candidate (a hundred or more), and a frozen class's
# __init__ took more than twice as long (BENCHMARKS.md, "Ranking a hundred candidates").
@attrs.define
class Candidate:
    """What the retrieval legs found about one fact (read, never changed, by ranking).

    Attributes:
        fact_id: The fact's id.
        slot: Its slot (selects the decay constant).
        updated_at: Unix seconds of its last value change.
        score: Its reinforcement score.
        confidence: Its confidence, 0 to 1.
        bm25_rank: 1-based rank in the lexical leg, or ``None``.
        bm25: Raw FTS5 bm25 value, or ``None``.
        vector_rank: 1-based rank in the vector leg, or ``None``.
        cosine: Cosine similarity in the vector leg, or ``None``.
        observed_at: Unix seconds of when it was said or observed (``None``:
            ``updated_at``); its age and the periods a query names use it.
        holds_common: It holds one of the query's words that a large share of
            the store holds (:attr:`RankingPolicy.common_word_share`).
        leads_common: Its value's first word is one of those words.
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
    observed_at: float | None = None
    holds_common: bool = False
    leads_common: bool = False

    @property
    def time(self) -> float:
        """When the fact was observed: ``observed_at``, else ``updated_at``."""
        return self.updated_at if self.observed_at is None else self.observed_at


@attrs.frozen
class RankingPolicy:
    """The knobs of ranking. A value out of its range is an
    :class:`~ctxslots.errors.InvalidArgumentError` when the policy is made.

    Attributes:
        decay_days: Tau in days per slot (above 0); ``None`` for no decay.
        default_decay_days: Tau for slots not in ``decay_days`` (slots that
            plugins add decay like agent notes).
        reinforcement_weight: The 0.2 in ``exp(0.2 * score)``, from 0 (off) to
            :data:`MAX_REINFORCEMENT_WEIGHT`.
        lexical_weight: Weight of the BM25 leg in fusion (0 switches it off).
        vector_weight: Weight of the vector leg in fusion (0 switches it off);
            ``None`` lets the store choose by embedder: 0 for the hashing
            embedder (it never beat words alone on the labelled set),
            :data:`MODEL_VECTOR_WEIGHT` for a real model.
        rrf_k: The k of reciprocal-rank fusion.
        min_cosine: Vector candidates at or below this cosine are left out
            (with no similarity at all, a nearest neighbour is noise).
        vector_only_min_cosine: A candidate found by the vector leg alone
            (no word of the query in it) is left out below this cosine
            (:data:`VECTOR_ONLY_MIN_COSINE`; 0 keeps them all).
        fusion: How the two legs combine: ``"adaptive"`` (each leg min-max
            normalised over its candidates and weighted by its weight times the
            z-score of its best candidate), ``"rrf"`` (reciprocal-rank fusion,
            ``weight / (rrf_k + rank)`` per leg) or ``"score"`` (the BM25
            relevance divided by the best candidate's, times ``lexical_weight``,
            plus the cosine times ``vector_weight``).
        period_boost: Relevance multiplier for a memory observed in a period
            the query names (a day, a month, a year; see
            :mod:`ctxslots.stores.periods`); 1 switches it off.
        common_word_boost: With the lexical leg alone, relevance multiplier for
            a candidate holding one of the query's words that at least
            ``common_word_share`` of the store's facts hold (in a store of 50
            facts or more; see :data:`COMMON_WORD_BOOST`), whether or not the
            lexical leg matched that word; 1 switches it off. A vector leg reads
            names as meaning already: fused, the boost gained nothing.
        common_word_share: The share of the store's facts from which a query
            word is common (:data:`COMMON_WORD_SHARE`).
        common_subject_boost: With the lexical leg alone, a further relevance
            multiplier for a candidate whose value's first word is such a common
            query word (its subject; :data:`COMMON_SUBJECT_BOOST`); 1 switches it off.
        episode_weight: A candidate observed at the same moment as other
            candidates within depth (its episode: the facts one flush wrote)
            gains this share of the best of those others' relevance (after the
            period boost), unless the episode holds more than
            :data:`EPISODE_MAX_SHARE` of those candidates; 0 switches it off.
            Under 1, the order within an episode never changes.
        link_min_strength: A fact linked to a hit this strongly (returned
            together and then reinforced this many times) is pulled into the
            results; ``None`` never pulls linked facts.
        link_weight: A pulled fact's relevance is its hit's relevance times this.
    """

    # Compared, not hashed (a dict has no hash): equal policies still hash alike.
    decay_days: Mapping[str, float | None] = attrs.field(
        factory=lambda: dict(DEFAULT_DECAY_DAYS), validator=decay_map, hash=False)
    default_decay_days: float | None = attrs.field(
        default=365.0, validator=number(0.0, above=True, optional=True))
    reinforcement_weight: float = attrs.field(
        default=0.2, validator=number(0.0, MAX_REINFORCEMENT_WEIGHT))
    lexical_weight: float = attrs.field(default=1.0, validator=number(0.0))
    vector_weight: float | None = attrs.field(default=None, validator=number(0.0, optional=True))
    rrf_k: float = attrs.field(default=60.0, validator=number(0.0, above=True))
    min_cosine: float = attrs.field(default=0.0, validator=number(-1.0, 1.0))
    vector_only_min_cosine: float = attrs.field(default=VECTOR_ONLY_MIN_COSINE,
                                                validator=number(-1.0, 1.0))
    fusion: str = attrs.field(default="adaptive", validator=one_of(FUSIONS))
    period_boost: float = attrs.field(default=PERIOD_BOOST, validator=number(0.0))
    common_word_boost: float = attrs.field(default=COMMON_WORD_BOOST, validator=number(0.0))
    common_word_share: float = attrs.field(default=COMMON_WORD_SHARE,
                                           validator=number(0.0, 1.0, above=True))
    common_subject_boost: float = attrs.field(default=COMMON_SUBJECT_BOOST,
                                              validator=number(0.0))
    episode_weight: float = attrs.field(default=EPISODE_WEIGHT, validator=number(0.0, 1.0, below=True))
    # The cast keeps type checkers from narrowing the field to float by its default.
    link_min_strength: float | None = attrs.field(
        default=cast("float | None", 3.0), validator=number(0.0, above=True, optional=True))
    link_weight: float = attrs.field(default=0.5, validator=number(0.0))

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


@attrs.frozen
class _Leg:
    """One leg's scores over the candidates within depth: its scale and its weight."""

    low: float
    high: float
    weight: float

    @classmethod
    def of(cls, values: Sequence[float], weight: float) -> _Leg:
        if not values:
            return cls(0.0, 0.0, 0.0)
        low, high = min(values), max(values)
        if len(values) < 2 or high == low:
            # No spread to judge by: a lone candidate (or a tie) counts once.
            return cls(low, high, weight)
        # Float sums: ``statistics.pstdev`` works in exact fractions, many times slower
        # for the same figure to the last few bits.
        mean = math.fsum(values) / len(values)
        deviation = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
        return cls(low, high, weight * (high - mean) / deviation)

    def norm(self, value: float) -> float:
        """``value`` on the leg's 0..1 scale (outside it for candidates beyond depth)."""
        return 1.0 if self.high == self.low else (value - self.low) / (self.high - self.low)


@attrs.frozen
class _Fusion:
    """What fusing one search's candidates needs to know about all of them."""

    policy: RankingPolicy
    fused: bool
    depth: int | None
    lexical: _Leg
    vector: _Leg
    best_bm25: float

    @classmethod
    def of(cls, candidates: Sequence[Candidate], policy: RankingPolicy, fused: bool,
           depth: int | None) -> _Fusion:
        if not fused:  # relevance is -bm25: no scale or weight to find
            return cls(policy, fused, depth, _Leg(0.0, 0.0, 0.0), _Leg(0.0, 0.0, 0.0), 0.0)
        bm25 = [-c.bm25 for c in candidates
                if c.bm25 is not None and _within(c.bm25_rank, depth)]
        cosines = [c.cosine for c in candidates
                   if c.cosine is not None and _within(c.vector_rank, depth)]
        return cls(policy, fused, depth, _Leg.of(bm25, policy.lexical_weight),
                   _Leg.of(cosines, policy.vector_weight or 0.0), max(bm25, default=0.0))

    def relevance(self, c: Candidate, inside: bool) -> float:
        """The candidate's relevance, from the legs that found it within depth
        (from every leg that found it, for a candidate beyond depth); ``inside``
        is :meth:`within`'s answer for it."""
        if not self.fused and c.vector_rank is None:  # the lexical leg alone found it
            return -c.bm25 if c.bm25 is not None else 0.0
        deep = not inside
        lexical = c.bm25 is not None and (deep or _within(c.bm25_rank, self.depth))
        vector = (c.cosine is not None and bool(self.policy.vector_weight)
                  and (deep or _within(c.vector_rank, self.depth)))
        if not self.fused:
            return -c.bm25 if lexical and c.bm25 is not None else 0.0
        policy, total = self.policy, 0.0
        if policy.fusion == "adaptive":
            if lexical and c.bm25 is not None:
                total += self.lexical.weight * self.lexical.norm(-c.bm25)
            if vector and c.cosine is not None:
                total += self.vector.weight * self.vector.norm(c.cosine)
        elif policy.fusion == "score":
            if lexical and c.bm25 is not None and self.best_bm25 > 0:
                total += policy.lexical_weight * (-c.bm25) / self.best_bm25
            if vector and c.cosine is not None:
                total += (policy.vector_weight or 0.0) * max(0.0, c.cosine)
        else:
            if lexical and c.bm25_rank is not None:
                total += policy.lexical_weight / (policy.rrf_k + c.bm25_rank)
            if vector and c.vector_rank is not None:
                total += (policy.vector_weight or 0.0) / (policy.rrf_k + c.vector_rank)
        return total

    def within(self, c: Candidate) -> bool:
        """Whether a leg found the candidate within depth."""
        return _within(c.bm25_rank, self.depth) or _within(c.vector_rank, self.depth)

    def too_far(self, c: Candidate) -> bool:
        """Found by the vector leg alone, with too little similarity to show."""
        return left_out(c, self.policy, fused=self.fused) == "vector_only"


def left_out(c: Candidate, policy: RankingPolicy, *, fused: bool) -> str | None:
    """Why a candidate a leg found is never ranked, or ``None``: ``"min_cosine"`` (its
    cosine is at or under :attr:`RankingPolicy.min_cosine`: the vector leg drops it) or
    ``"vector_only"`` (found by the vector leg alone, under
    :attr:`RankingPolicy.vector_only_min_cosine`, with both legs fused)."""
    if c.cosine is not None and c.bm25 is None and c.cosine <= policy.min_cosine:
        return "min_cosine"
    if fused and c.bm25 is None and c.cosine is not None \
            and c.cosine < policy.vector_only_min_cosine:
        return "vector_only"
    return None


#: Steps between no score and the largest final in which finals are told apart: finer
#: differences are float rounding, and such finals tie (broken by fact id).
_TIE_STEPS = 1e12


def tie_steps(finals: Iterable[float]) -> Callable[[float], int]:
    """The sort key that compares one search's ``finals`` as ties when they are equal but
    for float rounding (a sum of two legs, an engine's last digits), so that they go by
    fact id like any other tie: each final in steps of a trillionth of the largest."""
    largest = max((abs(final) for final in finals), default=0.0)
    scale = _TIE_STEPS / largest if largest > 0.0 else 0.0
    return lambda final: round(final * scale)


def _within(rank: int | None, depth: int | None) -> bool:
    return rank is not None and (depth is None or rank <= depth)


def _in_period(when: float, periods: Sequence[tuple[float, float]]) -> bool:
    return any(start <= when < end for start, end in periods)


def _episode_gains(boosted: Iterable[tuple[int, float, float]], weight: float
                   ) -> dict[int, float]:
    """Fact id -> the factor by which its episode lifts a candidate's relevance
    (after the period boost): ``1 + weight * best_other / own`` for the ``boosted``
    candidates (those within depth: fact id, when observed, that relevance) observed at
    the same moment as another of them, in an episode holding at most
    :data:`EPISODE_MAX_SHARE` of them."""
    if not weight:
        return {}
    episodes: dict[float, list[tuple[int, float]]] = {}
    for fact_id, when, value in boosted:
        episodes.setdefault(when, []).append((fact_id, value))
    most = EPISODE_MAX_SHARE * sum(len(m) for m in episodes.values())
    gains: dict[int, float] = {}
    for members in episodes.values():
        if len(members) < 2 or len(members) > most:
            continue
        ranked = sorted(value for _, value in members)
        best, second = ranked[-1], ranked[-2]
        for fact_id, value in members:
            other = second if value == best else best
            if value > 0 and other > 0:
                gains[fact_id] = 1.0 + weight * other / value
    return gains


def found_within(lexical_rank: int | None, vector_rank: int | None, depth: int | None
                 ) -> bool:
    """Whether either leg found a candidate within ``depth`` (any depth when ``None``):
    fusion reads those, and ranks them before the ones found deeper."""
    return (lexical_rank is not None and (depth is None or lexical_rank <= depth)) \
        or (vector_rank is not None and (depth is None or vector_rank <= depth))


def rank_candidates(
    candidates: Iterable[Candidate],
    *,
    now: float,
    policy: RankingPolicy,
    limit: int,
    fused: bool = False,
    depth: int | None = None,
    periods: Sequence[tuple[float, float]] = (),
) -> list[tuple[Candidate, HitTrace]]:
    """Score candidates and return the best ``limit`` of them with their traces
    (ranked at ``now``).

    :param fused: Both legs ran: relevance is the policy's fusion rather than
        ``-bm25``.
    :param depth: How deep in each leg fusion looks (the store's candidate
        pool): candidates found deeper by every leg that found them come after
        the others, and leg ranks below it are not used, so the first hits are
        the same whatever ``limit`` the legs were asked for. ``None``: no limit.
    :param periods: ``(start, end)`` of the periods the query names: a memory
        observed in one has its relevance multiplied by ``policy.period_boost``.
    """
    pool = list(candidates)
    fusion = _Fusion.of(pool, policy, fused, depth)
    if policy.period_boost == 1.0:
        periods = ()
    # A fused search lifts no common word.
    lift, subject = (1.0, 1.0) if fused else (policy.common_word_boost,
                                              policy.common_subject_boost)
    relevance_of = fusion.relevance
    # Each candidate with when it was observed, its relevance, its boosts' product,
    # whether a leg found it within depth, and the boosts it got as its trace shows
    # them (``None``: none).
    rated: list[tuple[Candidate, float, float, float, bool, dict[str, float] | None]] = []
    for cand in pool:
        if fused and fusion.too_far(cand):
            continue
        when = cand.updated_at if cand.observed_at is None else cand.observed_at
        parts: dict[str, float] | None = None
        if periods and _in_period(when, periods):
            parts = {"period": policy.period_boost}
        if cand.holds_common and lift != 1.0:
            parts = parts or {}
            parts["common_word"] = lift
        if cand.leads_common and subject != 1.0:
            parts = parts or {}
            parts["common_subject"] = subject
        inside = found_within(cand.bm25_rank, cand.vector_rank, depth)
        rated.append((cand, when, relevance_of(cand, inside),
                      math.prod(parts.values()) if parts else 1.0, inside, parts))
    gains = _episode_gains(((cand.fact_id, when, relevance * boost)
                            for cand, when, relevance, boost, inside, _ in rated if inside),
                           policy.episode_weight)
    taus: dict[str, float | None] = {}
    weight = policy.reinforcement_weight
    # Sorted by the first three: found beyond depth, minus the final score, fact id.
    scored: list[tuple[bool, float, int, Candidate, float, float, float, float,
                       dict[str, float] | None]] = []
    for cand, when, relevance, boost, inside, parts in rated:
        age = max(0.0, now - when)
        slot = cand.slot
        tau = taus[slot] if slot in taus else taus.setdefault(slot, policy.tau_days(slot))
        decay = 1.0 if tau is None else decay_factor(age, tau)
        reinforcement = 1.0 if cand.score == 0.0 else reinforcement_factor(cand.score, weight)
        episode = gains.get(cand.fact_id, 1.0) if gains else 1.0
        final = relevance * boost * episode * decay * reinforcement * cand.confidence
        if episode != 1.0:
            parts = {**parts, "episode": episode} if parts else {"episode": episode}
        scored.append((not inside, -final, cand.fact_id, cand, relevance, decay,
                       reinforcement, age, parts))
    step = tie_steps(entry[1] for entry in scored)
    scored.sort(key=lambda entry: (entry[0], step(entry[1]), entry[2]))
    out: list[tuple[Candidate, HitTrace]] = []
    for position, (_, minus_final, _, cand, relevance, decay, reinforcement, age, extra) \
            in enumerate(scored[:limit], start=1):
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
            final=-minus_final,
            rank=position,
            extra=extra or {},
            ranked_at=now,
        )
        out.append((cand, trace))
    return out
