"""One search, engine-free: sanitize, gather both legs from the backend, rank, add links.

The backend returns candidates with their per-leg scores; ranking happens
here and in :mod:`.ranking`, the same for every engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from ..errors import InvalidArgumentError
from ..model import Fact, Hit
from .backend.types import Backend, FactFilter, Row
from .links import pull_linked
from .ranking import Candidate, RankingPolicy, rank_candidates
from .rerank import Boost, Reranker, apply_boost_and_rerank
from .sanitize import QueryPolicy, query_tokens

__all__ = ["SearchRequest", "query_words", "run_search"]

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
        limit: Most hits.
        include_archive: Also search the archive.
        boost: Optional factor per fact.
        now: The moment ages and decay count to.
    """

    query: str
    flt: FactFilter
    limit: int = attrs.field(converter=check_limit)
    include_archive: bool = False
    boost: Boost | None = None
    now: float = 0.0


#: Fact id -> (row, archived) for every candidate a search has seen.
_Found = dict[int, tuple[Row, bool]]


def _candidate(row: Row, **legs: Any) -> Candidate:
    return Candidate(fact_id=int(row["id"]), slot=row["slot"], updated_at=row["updated_at"],
                     score=row["score"], confidence=row["confidence"],
                     observed_at=row["observed_at"], **legs)


def query_words(backend: Backend, query: str, policy: QueryPolicy) -> list[str]:
    """The words a search looks for (see :meth:`~ctxslots.FactStore.query_words`)."""
    tokens = query_tokens(query, policy)
    if tokens and (policy.max_doc_share < 1.0 or policy.max_query_share < 1.0):
        tokens = backend.drop_common(tokens, share=policy.max_doc_share,
                                     min_rows=policy.common_min_facts,
                                     total_share=policy.max_query_share)
    return tokens


def run_search(
    backend: Backend, request: SearchRequest, *, ranking: RankingPolicy, query_policy: QueryPolicy,
    pool: int, query_vector: Callable[[str], np.ndarray] | None, rerank: Reranker | None,
) -> list[Hit]:
    """The hits of one search, best first, with their traces (access not counted here).

    Each leg gathers ``max(pool, limit)`` candidates, but fusion reads only
    the first ``pool`` of each leg; candidates found deeper follow them. So the
    first hits never depend on ``limit``.
    """
    flt, limit = request.flt, request.limit
    tokens = query_words(backend, request.query, query_policy)
    use_lexical = bool(tokens) and ranking.lexical_weight > 0
    use_vector = bool(ranking.vector_weight) and query_vector is not None \
        and bool(request.query.strip())
    if not use_lexical and not use_vector:
        return []
    depth = max(pool, limit)
    found: _Found = {}
    by_id: dict[int, Candidate] = {}
    if use_lexical:
        for archived in (False, True) if request.include_archive else (False,):
            leg = backend.lexical(tokens, flt, depth, archived=archived)
            for position, cand in enumerate(leg, start=1):
                fid = int(cand.row["id"])
                by_id[fid] = _candidate(cand.row, bm25_rank=position, bm25=cand.score)
                found[fid] = (cand.row, archived)
    if use_vector:
        assert query_vector is not None
        _add_vector_leg(backend, query_vector(request.query), flt, depth, ranking, by_id, found)
    ranked = _rank(list(by_id.values()), request, ranking, pool, fused=use_vector,
                   adjust=request.boost is not None or rerank is not None)
    hits = [Hit(fact=Fact.from_row(found[c.fact_id][0], archived=found[c.fact_id][1]),
                trace=trace) for c, trace in ranked]
    if request.boost is not None or rerank is not None:
        hits = apply_boost_and_rerank(request.query, hits, request.boost, rerank)[:limit]
    hits = pull_linked(backend, ranking, hits, flt, limit, request.now)
    return _count_hidden(backend, hits)


def _add_vector_leg(backend: Backend, vector: np.ndarray, flt: FactFilter, depth: int,
                    ranking: RankingPolicy, by_id: dict[int, Candidate], found: _Found) -> None:
    if not np.any(vector):
        return
    nearest = [(fid, cos) for fid, cos in backend.vector_knn(vector, flt, depth)
               if cos > ranking.min_cosine]
    missing = [fid for fid, _ in nearest if fid not in found]
    for row in backend.rows_by_ids(missing, flt):
        found[int(row["id"])] = (row, False)
        by_id[int(row["id"])] = _candidate(row)
    for position, (fid, cosine) in enumerate(nearest, start=1):
        if fid in by_id and not found[fid][1]:
            by_id[fid] = attrs.evolve(by_id[fid], vector_rank=position, cosine=cosine)


def _rank(candidates: list[Candidate], request: SearchRequest, ranking: RankingPolicy, pool: int,
          *, fused: bool, adjust: bool) -> list[tuple[Candidate, Any]]:
    return rank_candidates(candidates, now=request.now, policy=ranking,
                           limit=len(candidates) if adjust else request.limit, fused=fused,
                           depth=pool, query=request.query)


def _count_hidden(backend: Backend, hits: list[Hit]) -> list[Hit]:
    ids = [h.fact.id for h in hits if not h.fact.archived]
    counts = backend.hidden_counts(ids) if ids else {}
    if not counts:
        return hits
    return [attrs.evolve(h, trace=attrs.evolve(h.trace, hides=int(counts[h.fact.id])))
            if h.fact.id in counts and not h.fact.archived else h for h in hits]
