"""One search, engine-free: gather both legs for a plan, rank, boost and rerank, add links.

The backend returns candidates with their per-leg scores; ranking happens here
and in :mod:`.ranking`, the same for every engine. A :class:`RankedSearch`
keeps what its legs gathered, so asking it for a longer list reads the legs
again only when they may hold more: a contributor that fills a larger room
extends the list instead of searching again.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from ..errors import InvalidArgumentError
from ..model import Fact, Hit
from .backend import FactFilter, FactRow, QueryPlan
from .backend.unit_vectors import settled_nearest
from .core import StoreCore
from .explain import Located, locate
from .links import pull_linked
from .ranking import Candidate, found_within, left_out, rank_candidates
from .rerank import Boost, Reranker, apply_boost_and_rerank
from .stemming import first_stem, stemmed_query

__all__ = ["MAX_LIMIT", "RankedSearch", "SearchRequest", "check_limit", "start_search"]

#: The most hits one search returns.
MAX_LIMIT = 1000


def check_limit(limit: object) -> int:
    """``limit`` if it is an integer from 1 to :data:`MAX_LIMIT`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(
            f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}", field="limit",
            value=limit)
    return limit


@attrs.frozen
class SearchRequest:
    """One checked search.

    Attributes:
        query: The text as given.
        flt: The facts it may see (scope, slots, expiry at ``now``, near-duplicates).
        include_archive: Also search the archive.
        boost: Optional factor per fact.
        rerank: Optional reranker of the fused candidates found within the pool.
        now: The moment ages and decay count to.
        relaxed: Also look for the words common to much of the store.
    """

    query: str
    flt: FactFilter
    include_archive: bool = False
    boost: Boost | None = None
    rerank: Reranker | None = None
    now: float = 0.0
    relaxed: bool = False


@attrs.frozen
class _Gathered:
    """What the legs found at one depth.

    Attributes:
        depth: How many candidates each leg was asked for.
        candidates: Each candidate's leg ranks and scores, lexical leg first.
        rows: Each candidate's row, and whether it is archived.
        exhausted: Whether every leg that ran returned fewer than ``depth``
            (asking deeper would find nothing more).
    """

    depth: int
    candidates: tuple[Candidate, ...]
    rows: dict[int, tuple[FactRow, bool]]
    exhausted: bool


@attrs.define
class RankedSearch:
    """The ranked hits of one search, as long a list as asked for (see the module docstring).

    Attributes:
        core: The store's shared parts.
        request: The checked search.
        plan: Its words and vector.
    """

    core: StoreCore
    request: SearchRequest
    plan: QueryPlan
    _gathered: _Gathered | None = None

    @property
    def runs(self) -> bool:
        """Whether any leg has something to look for."""
        return bool(self.plan.words) or self.plan.vector is not None

    def hits(self, limit: int) -> list[Hit]:
        """The best ``limit`` hits with their traces, as a search with that limit returns them.

        Each leg gathers ``max(pool, limit)`` candidates, but fusion reads only
        the first ``pool`` of each leg; candidates found deeper follow them. So
        the first hits never depend on ``limit``.
        """
        limit = check_limit(limit)
        if not self.runs:
            return []
        with self.core.backend.reading():
            return self._hits(limit)

    def _hits(self, limit: int) -> list[Hit]:
        gathered = self._gather(max(self.core.candidate_pool, limit))
        request, core = self.request, self.core
        adjust = request.boost is not None or request.rerank is not None
        fused = self.plan.vector is not None
        ranked = rank_candidates(
            gathered.candidates, now=request.now, policy=core.ranking,
            limit=len(gathered.candidates) if adjust else limit,
            fused=fused, depth=core.candidate_pool, periods=self.plan.periods)
        found = gathered.rows
        hits = [Hit(fact=Fact.from_row(found[c.fact_id][0], archived=found[c.fact_id][1]),
                    trace=trace) for c, trace in ranked]
        if adjust:
            # The boost and rerankers see the candidates found within the pool of either
            # leg, as fusion does; those a deeper limit found follow them unchanged, so the
            # first hits never depend on the limit, reranked or not.
            inside = _within(hits, core.candidate_pool)
            hits = [*apply_boost_and_rerank(request.query, hits[:inside], request.boost,
                                            request.rerank), *hits[inside:]][:limit]
        # One read for both: the links that may pull facts in, and what each hit hides.
        live = [h.fact.id for h in hits if not h.fact.archived]
        links, hidden = core.backend.links_and_hidden(live, core.ranking.link_min_strength) \
            if live else ([], {})
        hits = pull_linked(core.backend, core.ranking, hits, links, request.flt, limit,
                           request.now, _matched(gathered, core, fused) if links else ())
        hits = _count_hidden(core, hits, set(live), hidden)
        seen_by = (request.flt.users, request.flt.agents)
        core.recent.add(seen_by, (h.fact.id for h in hits if not h.fact.archived))
        return hits

    def locate(self, fact_id: int, depth: int = MAX_LIMIT) -> Located:
        """Where the fact ``fact_id`` stands in this search, each leg read ``depth``
        deep, whether or not its hits hold it (see :mod:`ctxslots.stores.explain`)."""
        depth = check_limit(depth)
        return locate(self.core, self.plan, self.request.flt,
                      lambda limit: self.hits(limit) if self.runs else [], fact_id, depth)

    def _gather(self, depth: int) -> _Gathered:
        known = self._gathered
        # Legs that returned less than they were asked for hold nothing deeper; a
        # shallower list is gathered again, as its own search would be.
        if known is not None and (known.depth == depth
                                  or (known.exhausted and depth > known.depth)):
            return known
        self._gathered = _gather(self.core, self.request, self.plan, depth)
        return self._gathered


def _within(hits: Sequence[Hit], depth: int) -> int:
    """How many of ``hits`` (ranked: those found within ``depth`` of a leg first) were
    found within ``depth`` of the lexical or the vector leg."""
    return next((n for n, hit in enumerate(hits)
                 if not found_within(hit.trace.bm25_rank, hit.trace.vector_rank, depth)),
                len(hits))


def _gather(core: StoreCore, request: SearchRequest, plan: QueryPlan, depth: int) -> _Gathered:
    backend, flt = core.backend, request.flt
    rows: dict[int, tuple[FactRow, bool]] = {}
    # What each leg said of a fact: its 1-based rank and its score.
    lexical: dict[int, tuple[int, float]] = {}
    vector: dict[int, tuple[int, float]] = {}
    exhausted = True
    if plan.words:
        for archived in (False, True) if request.include_archive else (False,):
            leg = backend.lexical(plan, flt, depth, archived=archived)
            exhausted = exhausted and len(leg) < depth
            for position, cand in enumerate(leg, start=1):
                fid = int(cand.row["id"])
                lexical[fid] = (position, cand.score)
                rows[fid] = (cand.row, archived)
    if plan.vector is not None and np.any(plan.vector):
        query = plan.vector
        nearest = settled_nearest(lambda n: backend.vector_knn(query, flt, n), depth)
        exhausted = exhausted and len(nearest) < depth
        nearest = [(fid, cos) for fid, cos in nearest if cos > core.ranking.min_cosine]
        missing = [fid for fid, _ in nearest if fid not in rows]
        for row in backend.rows_by_ids(missing, flt):
            rows[int(row["id"])] = (row, False)
        for position, (fid, cosine) in enumerate(nearest, start=1):
            if fid in rows and not rows[fid][1]:
                vector[fid] = (position, cosine)
    # Fact id -> whether its value opens with a common word, for those holding one.
    leads: dict[int, bool] = {}
    if plan.common and rows:
        common = set(stemmed_query(plan.common))  # the plan keeps the words, unstemmed
        for archived in (False, True) if request.include_archive else (False,):
            ids = [fid for fid, (_, moved) in rows.items() if moved == archived]
            for fid in backend.holding(plan.common, ids, archived=archived):
                leads[fid] = first_stem(rows[fid][0]["value"]) in common
    candidates = []
    for fid, (row, _) in rows.items():
        words, near = lexical.get(fid), vector.get(fid)
        candidates.append(Candidate(
            fact_id=fid, slot=row["slot"], updated_at=row["updated_at"], score=row["score"],
            confidence=row["confidence"], observed_at=row["observed_at"],
            bm25_rank=words[0] if words else None, bm25=words[1] if words else None,
            vector_rank=near[0] if near else None, cosine=near[1] if near else None,
            holds_common=fid in leads, leads_common=leads.get(fid, False)))
    return _Gathered(depth, tuple(candidates), rows, exhausted)


def _matched(gathered: _Gathered, core: StoreCore, fused: bool) -> set[int]:
    """The ids of the candidates the search ranks on their own match (a link pulls none
    of them in)."""
    return {c.fact_id for c in gathered.candidates
            if left_out(c, core.ranking, fused=fused) is None}


def _count_hidden(core: StoreCore, hits: list[Hit], asked: set[int], known: dict[int, int]
                  ) -> list[Hit]:
    """``hits`` with the number of facts each hides in its trace; ``known`` holds the counts
    of the ``asked`` ids (none for a fact that hides nothing), and the rest (facts links
    pulled in) are read now."""
    late = [h.fact.id for h in hits if not h.fact.archived and h.fact.id not in asked]
    counts = {**known, **core.backend.hidden_counts(late)} if late else known
    if not counts:
        return hits
    return [attrs.evolve(h, trace=attrs.evolve(h.trace, hides=int(counts[h.fact.id])))
            if h.fact.id in counts and not h.fact.archived else h for h in hits]


def start_search(core: StoreCore, request: SearchRequest) -> RankedSearch:
    """Plan a search (its words and vector, once) and return it ready to rank."""
    ranking = core.ranking
    lexical = ranking.lexical_weight > 0
    vector = bool(ranking.vector_weight) and core.vector_leg_ready \
        and bool(request.query.strip())
    if vector and core.vector_writer is not None:
        core.vector_writer.wait()  # the vectors this store's own writes are owed
    # The common words are looked for only where a lift uses them (words alone).
    lifts = not vector and (ranking.common_word_boost != 1.0
                            or ranking.common_subject_boost != 1.0)
    plan = core.planner.plan(request.query, now=request.now, lexical=lexical, vector=vector,
                             periods=ranking.period_boost != 1.0, relaxed=request.relaxed,
                             common_share=ranking.common_word_share if lifts else None)
    return RankedSearch(core, request, plan)

