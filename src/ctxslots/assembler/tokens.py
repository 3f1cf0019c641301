"""Token counting, kept importable from here; it lives in :mod:`ctxslots.tokens`."""

from __future__ import annotations

from ..tokens import (
    DEFAULT_ENCODING,
    ENCODINGS,
    TokenCounter,
    count_tokens,
    get_encoding,
)

__all__ = ["DEFAULT_ENCODING", "ENCODINGS", "TokenCounter", "count_tokens", "get_encoding"]
