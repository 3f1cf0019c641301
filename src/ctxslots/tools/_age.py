"""Ages in words for tool results (the function lives in :mod:`ctxslots.prompts.ages`, shared
with prompt dumps)."""

from __future__ import annotations

from ..prompts.ages import age_in_words

__all__ = ["age_in_words"]
