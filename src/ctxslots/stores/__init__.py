"""Fact storage: :class:`FactStore` over SQLite or PostgreSQL, and its settings.

The rooms: :mod:`.fact_store` (the facade) over :mod:`.core` (what the helpers
share); :mod:`.query` and :mod:`.search` (a search, planned once and ranked by
:mod:`.ranking`); :mod:`.reads`; :mod:`.writes`; :mod:`.transfer`; :mod:`.upkeep`;
:mod:`.embedders`; :mod:`.backend` (the seam) with the engines :mod:`.sqlite` and
:mod:`.postgres`.
"""

from __future__ import annotations

from .fact_store import FactStore, default_db_path
from .owners import ANY, DEFAULT_AGENT, DEFAULT_USER, SlotOwners
from .ranking import DEFAULT_DECAY_DAYS, RankingPolicy
from .sanitize import QueryPolicy, query_tokens, sanitize_query
from .transfer.report import ImportIssue, ImportReport, InvalidImportError
from .upkeep.prune import PrunedFact, PrunePolicy, PruneReport
from .writes.erasure import ErasureReport
from .writes.limits import BUILTIN_SLOTS, KEY_PATTERN, Limits
from .writes.writer import Written

__all__ = [
    "ANY",
    "BUILTIN_SLOTS",
    "DEFAULT_AGENT",
    "DEFAULT_DECAY_DAYS",
    "DEFAULT_USER",
    "KEY_PATTERN",
    "ErasureReport",
    "FactStore",
    "ImportIssue",
    "ImportReport",
    "InvalidImportError",
    "Limits",
    "PrunePolicy",
    "PruneReport",
    "PrunedFact",
    "QueryPolicy",
    "RankingPolicy",
    "SlotOwners",
    "Written",
    "default_db_path",
    "query_tokens",
    "sanitize_query",
]
