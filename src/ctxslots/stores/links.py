"""Co-recall links: facts that were useful together come back together.

When a search returns several facts and the agent then reinforces one of them,
each other fact of that result gets a link to it whose strength grows by one.
A later search that finds one end of a strong link (``RankingPolicy.
link_min_strength``, 3 by default) may pull the other end in even when it does
not match the query; its trace names the hit that pulled it
(``HitTrace.linked_from``) and its relevance is that hit's times
``RankingPolicy.link_weight``.

The results a reinforcement refers to are the last searches of this
``FactStore`` object (kept in memory) made for the same user and agent, so links
grow inside one agent process, as when an agent searches and reinforces through
the memory tools, and one user's reinforcements never link facts another user's
searches returned. An erasure forgets them all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Collection, Iterable

import attrs

from ..model import Fact, Hit, HitTrace
from .backend import Backend, FactFilter, Row
from .ranking import RankingPolicy, decay_factor, reinforcement_factor

__all__ = ["OwnerKey", "RecentResults", "pull_linked", "strengthen"]

#: How many recent search results of one user and agent a reinforcement can refer to.
RECENT_RESULTS = 20
#: Most users and agents whose recent results are kept (the least recently searched
#: are forgotten first), so a store serving many users keeps a bounded memory.
RECENT_OWNERS = 256

#: Whose searches a recent result belongs to: the stored users and agents it saw.
OwnerKey = tuple[tuple[str, ...] | None, tuple[str, ...] | None]


@attrs.define
class RecentResults:
    """The fact ids of the last searches' results of each user and agent, newest last."""

    _by_owner: OrderedDict[OwnerKey, deque[tuple[int, ...]]] = attrs.Factory(OrderedDict)
    # Searches and reinforcements may run on several threads of one store.
    _lock: threading.Lock = attrs.Factory(threading.Lock)

    def add(self, owner: OwnerKey, ids: Iterable[int]) -> None:
        """Remember one search's returned ids for ``owner`` (results of fewer than two
        are not kept)."""
        kept = tuple(dict.fromkeys(ids))
        if len(kept) < 2:
            return
        with self._lock:
            results = self._by_owner.pop(owner, None)
            if results is None:
                results = deque(maxlen=RECENT_RESULTS)
            results.append(kept)
            self._by_owner[owner] = results
            while len(self._by_owner) > RECENT_OWNERS:
                self._by_owner.popitem(last=False)

    def partners(self, owner: OwnerKey, fact_id: int) -> set[int]:
        """Every fact returned together with ``fact_id`` in a result ``owner`` saw."""
        with self._lock:
            return {other for result in self._by_owner.get(owner, ()) if fact_id in result
                    for other in result if other != fact_id}

    def clear(self) -> None:
        """Forget every result (after an erasure: none may name a removed fact)."""
        with self._lock:
            self._by_owner.clear()


def strengthen(backend: Backend, fact_id: int, partners: Iterable[int], now: float) -> int:
    """Add one to the link between ``fact_id`` and each partner (inside a write); return how many."""
    pairs = [(min(fact_id, p), max(fact_id, p)) for p in sorted(set(partners)) if p != fact_id]
    backend.strengthen_links(pairs, now)
    return len(pairs)


def pull_linked(
    backend: Backend, policy: RankingPolicy, hits: list[Hit],
    links: Iterable[tuple[int, int, float]], flt: FactFilter, limit: int, now: float,
    found: Collection[int] = (),
) -> list[Hit]:
    """Add the strongly linked neighbours of ``hits`` that pass ``flt``, then re-rank to
    ``limit``; ``links`` are the live hits' links at least ``policy.link_min_strength``
    (:meth:`~ctxslots.stores.backend.Backend.links_among`). A fact in ``found`` (the
    search's own candidates, returned or not) is never pulled: its match places it, and
    a trace saying a link pulled it would hide that it matched (and let the limit asked
    decide the first hits)."""
    live = [h for h in hits if not h.fact.archived]
    if policy.link_min_strength is None or not live:
        return hits
    source = {h.fact.id: h for h in live}
    best: dict[int, tuple[Hit, float]] = {}
    for a, b, strength in links:
        for here, there in ((a, b), (b, a)):
            if here in source and there not in source and there not in found:
                hit = source[here]
                if there not in best or hit.trace.final > best[there][0].trace.final:
                    best[there] = (hit, float(strength))
    if not best:
        return hits
    pulled = []
    for row in backend.rows_by_ids(list(best), flt):
        fact = Fact.from_row(row)
        hit, strength = best[fact.id]
        pulled.append(Hit(fact=fact, trace=_trace(row, hit, strength, now, policy)))
    merged = _merge(hits, sorted(pulled, key=_order))[:limit]
    return [attrs.evolve(h, trace=attrs.evolve(h.trace, rank=i))
            for i, h in enumerate(merged, start=1)]


def _order(hit: Hit) -> tuple[float, int]:
    return -hit.trace.final, hit.fact.id


def _merge(hits: list[Hit], pulled: list[Hit]) -> list[Hit]:
    """``hits`` in their own order (a reranker's, or the search's), with each ``pulled``
    hit placed before the first hit it outscores."""
    out: list[Hit] = []
    rest = iter(pulled)
    waiting = next(rest, None)
    for hit in hits:
        while waiting is not None and _order(waiting) < _order(hit):
            out.append(waiting)
            waiting = next(rest, None)
        out.append(hit)
    if waiting is not None:
        out.append(waiting)
        out.extend(rest)
    return out


def _trace(row: Row, hit: Hit, strength: float, now: float, policy: RankingPolicy) -> HitTrace:
    relevance = hit.trace.relevance * policy.link_weight
    decay = decay_factor(now - row["observed_at"], policy.tau_days(row["slot"]))
    reinforcement = reinforcement_factor(row["score"], policy.reinforcement_weight)
    confidence = float(row["confidence"])
    return HitTrace(
        bm25_rank=None, bm25=None, relevance=relevance, decay=decay,
        age_days=max(0.0, now - row["observed_at"]) / 86400.0, reinforcement=reinforcement,
        confidence=confidence, final=relevance * decay * reinforcement * confidence, rank=0,
        extra={"link_strength": strength}, linked_from=hit.fact.id, ranked_at=now,
    )
