"""After fusion: a caller's boost, then rerankers, then the limit.

A *boost* is ``boost(fact) -> float``: it multiplies a hit's final score (for
example to favour one feature area) and is recorded in the trace as
``extra["boost"]``. A *reranker* is ``rerank(query, hits) -> hits | None``: it
sees every fused candidate found within the candidate pool of either leg, best
first, and may reorder or drop them (never add new ones); ``None`` keeps the order.
Candidates a longer limit finds deeper follow them as ranked, so the first hits never
depend on the limit. A hit it moved carries the rank it had before in its trace, as
``extra["reranked_from"]``. Plugins provide rerankers through the ``rerank_hits`` hook
(see :func:`ctxslots.plugins.reranker_from_plugins`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs

from ..errors import InvalidFactError
from ..model import Fact, Hit
from .ranking import tie_steps
from .sanitize import QueryPolicy, query_tokens

__all__ = [
    "Boost",
    "Reranker",
    "apply_boost_and_rerank",
    "coverage_reranker",
]

Boost = Callable[[Fact], float]
Reranker = Callable[[str, list[Hit]], Sequence[Hit] | None]

_ALL_WORDS = QueryPolicy(stop_words=frozenset(), max_tokens=1000)


def coverage_reranker(query: str, hits: list[Hit]) -> list[Hit]:
    """A deterministic reranker: hits containing more of the query's words first.

    Words are the sanitized query tokens (stop words left out); ties keep the
    fused order. Useful when many facts match one common word of a long query.
    """
    wanted = set(query_tokens(query))
    if not wanted:
        return hits

    def covered(hit: Hit) -> int:
        text = " ".join([hit.fact.value, hit.fact.key or "", *hit.fact.tags])
        return len(wanted.intersection(query_tokens(text, _ALL_WORDS)))

    return sorted(hits, key=lambda h: -covered(h))


def apply_boost_and_rerank(
    query: str, hits: list[Hit], boost: Boost | None, rerank: Reranker | None
) -> list[Hit]:
    """Apply ``boost`` then ``rerank`` to fused hits; ranks are renumbered.

    :raises InvalidFactError: The boost returned something other than a finite
        number >= 0, or the reranker returned facts that were not candidates.
    """
    if boost is not None:
        boosted = []
        for hit in hits:
            factor = boost(hit.fact)
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) \
                    or not math.isfinite(factor) or factor < 0:
                raise InvalidFactError(f"boost must return a finite number >= 0, not {factor!r}",
                                       field="boost", value=factor)
            trace = attrs.evolve(hit.trace, final=hit.trace.final * factor,
                                 extra={**hit.trace.extra, "boost": float(factor)})
            boosted.append(Hit(fact=hit.fact, trace=trace))
        # Boosted finals equal but for rounding tie, as they do unboosted.
        step = tie_steps(h.trace.final for h in boosted)
        hits = sorted(boosted, key=lambda h: (-step(h.trace.final), h.fact.id))
    if rerank is not None:
        reordered = rerank(query, list(hits))
        if reordered is not None:
            known = {h.fact.id for h in hits}
            reordered = list(reordered)
            strangers = [h for h in reordered if not isinstance(h, Hit) or h.fact.id not in known]
            if strangers:
                raise InvalidFactError("a reranker may reorder or drop hits, not add new ones",
                                       field="rerank", value=strangers[0])
            hits = _marked(hits, reordered)
    return [Hit(fact=h.fact, trace=attrs.evolve(h.trace, rank=i)) for i, h in enumerate(hits, 1)]


def _marked(before: list[Hit], after: list[Hit]) -> list[Hit]:
    """``after`` with each hit the reranker moved marked in its trace:
    ``extra["reranked_from"]`` is the rank it had before (1-based)."""
    was = {h.fact.id: rank for rank, h in enumerate(before, 1)}
    out = []
    for rank, hit in enumerate(after, 1):
        if was[hit.fact.id] != rank:
            extra = {**hit.trace.extra, "reranked_from": float(was[hit.fact.id])}
            hit = Hit(fact=hit.fact, trace=attrs.evolve(hit.trace, extra=extra))
        out.append(hit)
    return out
