"""Fact storage: the SQLite fact store, query sanitizing and ranking."""

from __future__ import annotations

from .fact_store import FactStore, default_db_path
from .ranking import DEFAULT_DECAY_DAYS, RankingPolicy
from .sanitize import QueryPolicy, query_tokens, sanitize_query
from .transfer.formats import export_jsonl, export_markdown, import_jsonl, import_markdown
from .transfer.report import ImportIssue, ImportReport, InvalidImportError
from .upkeep.prune import PrunedFact, PrunePolicy, PruneReport
from .writes.limits import BUILTIN_SLOTS, KEY_PATTERN, Limits

__all__ = [
    "BUILTIN_SLOTS",
    "DEFAULT_DECAY_DAYS",
    "KEY_PATTERN",
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
    "default_db_path",
    "export_jsonl",
    "export_markdown",
    "import_jsonl",
    "import_markdown",
    "query_tokens",
    "sanitize_query",
]
