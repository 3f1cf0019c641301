"""ctxslots: decide what an LLM agent sees on each turn.

Memory slots (user, project, agent) live in a local SQLite fact store, are
searched with BM25 and ranked with decay and reinforcement. This module
re-exports the public API; everything else may change.
"""

from __future__ import annotations

from .errors import (
    BudgetExceededError,
    CtxslotsError,
    FactNotFoundError,
    FlushError,
    InvalidFactError,
    LLMClientError,
    StoreError,
    TemplateError,
)
from .hookspecs import hookimpl
from .model import Fact, Hit, HitTrace, Message
from .stores import FactStore, Limits, QueryPolicy, RankingPolicy, sanitize_query

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "CtxslotsError",
    "Fact",
    "FactNotFoundError",
    "FactStore",
    "FlushError",
    "Hit",
    "HitTrace",
    "InvalidFactError",
    "LLMClientError",
    "Limits",
    "Message",
    "QueryPolicy",
    "RankingPolicy",
    "StoreError",
    "TemplateError",
    "__version__",
    "hookimpl",
    "sanitize_query",
]
