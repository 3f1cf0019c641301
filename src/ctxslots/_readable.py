"""Numbers for people: a relevance as a share of the best, short multipliers.

Raw retrieval values mean little on their own: on a small store FTS5's BM25 of
a good match can be ``-1.4e-06``, and a fused score only orders one search. The
trace text of ``ctxslots search`` and the markdown and HTML dumps show a share
of the best relevance, ranks, ages in words (:func:`ctxslots.prompts.ages.days_in_words`)
and multipliers with two decimals; the JSON dump and ``--json`` keep every raw value.
A count is shown with its noun in the right number (:func:`count`).
A time an entry point refuses is named as people write it (:func:`shown_moment`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping

__all__ = ["LIFTS", "TIME_RANGE", "count", "lifts", "multiplier", "share", "shown_moment"]


def count(n: int, one: str, many: str | None = None) -> str:
    """``n`` with the noun in the right number: "1 fact", "3 facts", "2 history entries"."""
    return f"{n} {one if n == 1 else many or one + 's'}"


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


#: The multipliers of a hit's ranking a trace's ``extra`` may hold, besides decay,
#: reinforcement and confidence (``docs/storage.md``, "Ranking"), in the order shown.
LIFTS = ("period", "common_word", "common_subject", "episode", "boost")


def lifts(extra: Mapping[str, float] | None) -> str:
    """The ranking multipliers of a trace's ``extra`` beyond decay, reinforcement and
    confidence ("episode ×1.30, boost ×2.00"); empty when it has none."""
    extra = extra or {}
    return ", ".join(f"{name.replace('_', ' ')} ×{multiplier(extra[name])}"
                     for name in LIFTS if name in extra)


#: The times a store keeps, to the second, as an error names them: a moment written in
#: the year 1970 or 9999 can still fall outside (in another time zone, or in the last
#: second of 9999, which a time in Unix seconds cannot hold to the microsecond).
TIME_RANGE = "from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z"


def shown_moment(value: object) -> str:
    """A refused time as people write it: a datetime in ISO 8601, with the UTC moment it
    names when written in another zone (``1970-01-01T00:30:00+01:00`` is before 1970);
    anything else as Python shows it."""
    if not isinstance(value, dt.datetime):
        return repr(value)
    shown = value.isoformat()
    if value.utcoffset():
        try:
            shown += f", which is {value.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%S}Z"
        except OverflowError:  # past what a datetime holds in UTC
            pass
    return shown
