"""Plain data shared by every part of ctxslots: facts, hits, messages and prompts.

These classes know nothing about SQLite, pluggy or jinja2. Timestamps are
timezone-aware UTC :class:`datetime.datetime` values. :class:`AssemblyRequest`
and :class:`ContextBlock` (what the assembler and every contributor read) are
defined in :mod:`ctxslots.request` and importable from here.
"""

from __future__ import annotations

from ..request import AssemblyRequest, ContextBlock
from .facts import (
    MESSAGE_ROLES,
    RELAXED_FILL,
    Fact,
    Hit,
    HitTrace,
    Message,
    from_timestamp,
    to_timestamp,
)
from .prompt import (
    DEFAULT_PRIORITY,
    AssembledPrompt,
    DropReason,
    Item,
    ItemDecision,
    Section,
    SectionReport,
)

__all__ = [
    "DEFAULT_PRIORITY",
    "MESSAGE_ROLES",
    "RELAXED_FILL",
    "AssembledPrompt",
    "AssemblyRequest",
    "ContextBlock",
    "DropReason",
    "Fact",
    "Hit",
    "HitTrace",
    "Item",
    "ItemDecision",
    "Message",
    "Section",
    "SectionReport",
    "from_timestamp",
    "to_timestamp",
]
