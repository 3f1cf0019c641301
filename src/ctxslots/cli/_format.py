"""How the commands show facts and hits to a person."""

from __future__ import annotations

import time

from .._readable import count, lifts, multiplier, share
from ..model import Fact, Hit
from ..prompts.ages import days_in_words
from ..stores import DEFAULT_AGENT, DEFAULT_USER

__all__ = ["count", "fact_line", "hit_line", "whose"]


def whose(slot: str, user: str | None, agent: str | None, scope: str | None) -> str:
    """``slot[owner]@scope``: ``user[alice]``, ``agent[builder]@shop``, ``project@shop``;
    the store's default user and agent go unnamed (``user``, ``agent``)."""
    owner = user if user not in (None, DEFAULT_USER) else (
        agent if agent not in (None, DEFAULT_AGENT) else None)
    return slot + (f"[{owner}]" if owner else "") + (f"@{scope}" if scope else "")


def fact_line(fact: Fact, now: float | None = None) -> str:
    """One line for a fact: id, slot[owner]@scope, key, value and its state (expired at
    ``now``, default the time of the call, archived, superseded)."""
    where = whose(fact.slot, fact.user, fact.agent, fact.scope)
    key = f" {fact.key}:" if fact.key else ""
    flags = " (archived)" if fact.archived else ""
    if fact.expires_at is not None and not fact.archived \
            and fact.expires_at.timestamp() <= (time.time() if now is None else now):
        flags += " (expired)"
    if fact.superseded_by is not None:
        flags += f" (superseded by {fact.superseded_by})"
    return f"[id:{fact.id}] {where}{key} {fact.value}{flags}"


def hit_line(hit: Hit, best: float | None) -> str:
    """Two lines for a search hit: the fact, then how it scored, in words a person reads
    (the multipliers beyond decay, reinforcement and confidence that moved it, the
    fact whose co-recall link pulled it in, and, for an archived fact, why it moved to
    the archive).

    :param best: The best relevance of the same search; the hit's relevance is
        shown as a share of it.
    """
    t = hit.trace
    lifted = lifts(t.extra)
    relevance = share(t.relevance / best) if best and best > 0 else "–"
    words = f"words #{t.bm25_rank}" if t.bm25_rank is not None else "words -"
    meaning = (f"meaning #{t.vector_rank} (cosine {t.cosine:.2f})"
               if t.vector_rank is not None and t.cosine is not None else "meaning -")
    return (
        f"{t.rank:>2}. {fact_line(hit.fact)}\n"
        f"    relevance {relevance} ({words}, {meaning}); "
        f"age {days_in_words(t.age_days)}; decay {multiplier(t.decay)}, "
        f"reinforcement {multiplier(t.reinforcement)}, confidence {multiplier(t.confidence)}"
        + (f"; {lifted}" if lifted else "")
        + (f"; pulled in by its co-recall link to fact {t.linked_from}"
           if t.linked_from is not None else "")
        + (f"; hides {t.hides} near-duplicate{'' if t.hides == 1 else 's'}" if t.hides else "")
        + (f"; moved here from #{int(t.extra['reranked_from'])} by a reranker"
           if "reranked_from" in t.extra else "")
        + (f"; archived: {hit.fact.archive_reason}" if hit.fact.archive_reason else "")
    )
