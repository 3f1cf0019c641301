"""Numbers for people: a relevance as a share of the best, short multipliers.

Raw retrieval values mean little on their own: on a small store FTS5's BM25 of
a good match can be ``-1.4e-06``, and a fused score only orders one search. The
trace text of ``ctxslots search`` and the markdown and HTML dumps show a share
of the best relevance, ranks, ages in words (:func:`ctxslots.prompts.ages.days_in_words`)
and multipliers with two decimals; the JSON dump and ``--json`` keep every raw value.
"""

from __future__ import annotations

import math

__all__ = ["multiplier", "share"]


def share(value: float | None) -> str:
    """A fraction of the best (0 to 1) as a percentage: "100%", "62%", "<1%"; "–" when unknown."""
    if value is None or not math.isfinite(value):
        return "–"
    value = min(max(value, 0.0), 1.0)
    return "<1%" if 0 < value < 0.01 else f"{value:.0%}"


def multiplier(value: float | None) -> str:
    """A ranking multiplier (decay, reinforcement, confidence) with two decimals.

    A value too small to show reads "<0.01" rather than "0.00"; "–" when unknown.
    """
    if value is None or not math.isfinite(value):
        return "–"
    if 0 < value < 0.005:
        return "<0.01"
    return f"{value:.2f}"
