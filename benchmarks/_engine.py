"""What a search asks of the storage engine, for the benchmarks that time the engine itself.

The store's ``backend`` property is not public API: a benchmark that times the
engine on its own opens it with ``open_backend`` on the store's file or URL
and asks what a search of a default store (the store's default user and
agent) asks of it:

    engine = open_engine(path)
    words = common_words(engine, query_tokens(message, DEFAULT_POLICY), DEFAULT_POLICY)
    found = engine.lexical(plan_of(words), search_filter("repo-alpha", now=time.time()), 100)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ctxslots.stores.backend import (
    Backend,
    FactFilter,
    LexicalCandidate,
    QueryPlan,
    visible_scopes,
    visible_to,
)
from ctxslots.stores.engines import open_backend
from ctxslots.stores.owners import DEFAULT_AGENT, DEFAULT_USER
from ctxslots.stores.sanitize import QueryPolicy, keep_words, to_match

__all__ = ["common_words", "engine_search", "open_engine", "plan_of", "search_filter"]


def open_engine(location: str | Path, *, vector_cache: bool = True) -> Backend:
    """The engine of the store at ``location``, opened on its own."""
    return open_backend(str(location), vector_cache=vector_cache)


def search_filter(scope: str | None, *, now: float | None,
                  slot: str | None = None) -> FactFilter:
    """The filter of a default store's search in ``scope``: its default user's and agent's
    facts and the shared ones, that scope and the global one, live at ``now``."""
    return FactFilter(scopes=visible_scopes(scope or ""), slots=(slot,) if slot else None,
                      live_at=now, include_superseded=False, users=visible_to(DEFAULT_USER),
                      agents=visible_to(DEFAULT_AGENT))


def plan_of(words: Sequence[str]) -> QueryPlan:
    """The query plan of a words-only search for ``words``."""
    return QueryPlan(text=" ".join(words), words=tuple(words), match=to_match(list(words)))


def common_words(engine: Backend, tokens: list[str], policy: QueryPolicy) -> list[str]:
    """``tokens`` without the words common to much of the store (the engine's counts)."""
    if not tokens or (policy.max_doc_share >= 1.0 and policy.max_query_share >= 1.0):
        return tokens
    counts = engine.document_counts(tokens, min_rows=policy.common_min_facts)
    if counts is None:
        return tokens
    return keep_words(tokens, counts.docs, counts.rows, share=policy.max_doc_share,
                      total_share=policy.max_query_share)


def engine_search(engine: Backend, tokens: list[str], flt: FactFilter, pool: int,
                  policy: QueryPolicy) -> list[LexicalCandidate]:
    """What a words-only search asks of the engine: the word counts, then the BM25 candidates."""
    return engine.lexical(plan_of(common_words(engine, tokens, policy)), flt, pool)
