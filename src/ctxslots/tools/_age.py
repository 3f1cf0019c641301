"""Ages in words for tool results (the function lives in :mod:`ctxslots._age`, shared with dumps)."""

from __future__ import annotations

from .._age import age_in_words

__all__ = ["age_in_words"]
