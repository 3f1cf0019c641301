"""Fact storage: the SQLite fact store, query sanitizing and ranking."""

from __future__ import annotations

from ._validate import BUILTIN_SLOTS, Limits
from .fact_store import FactStore, default_db_path
from .prune import PrunePolicy, PruneReport, PrunedFact
from .ranking import DEFAULT_DECAY_DAYS, RankingPolicy
from .sanitize import QueryPolicy, query_tokens, sanitize_query

__all__ = [
    "BUILTIN_SLOTS",
    "DEFAULT_DECAY_DAYS",
    "FactStore",
    "Limits",
    "PrunePolicy",
    "PruneReport",
    "PrunedFact",
    "QueryPolicy",
    "RankingPolicy",
    "default_db_path",
    "query_tokens",
    "sanitize_query",
]
