"""Writing memory back: the LLM client interface, its HTTP client, and the flusher."""

from __future__ import annotations

from ._progress import BROKEN_TEXT, broken_text
from .flusher import DEFAULT_SLOTS, MemoryFlusher
from .llm_client import ChatResult, LLMClient
from .openai_client import OpenAIChatClient
from .operations import (
    KEY_PATTERN,
    Forget,
    Operation,
    ReplyFormatError,
    Upsert,
    operations_schema,
    parse_reply,
)
from .report import Change, FlushPolicy, FlushReport, Rejection

__all__ = [
    "BROKEN_TEXT",
    "DEFAULT_SLOTS",
    "KEY_PATTERN",
    "Change",
    "ChatResult",
    "FlushPolicy",
    "FlushReport",
    "Forget",
    "LLMClient",
    "MemoryFlusher",
    "OpenAIChatClient",
    "Operation",
    "Rejection",
    "ReplyFormatError",
    "Upsert",
    "broken_text",
    "operations_schema",
    "parse_reply",
]
