"""When something was said, in words: ages ("today", "3 days ago") and calendar dates.

Tool results and prompt dumps show ages; a memory's bullet in a prompt says when
it was said with :func:`when_said`, as a date or as an age.
"""

from __future__ import annotations

import datetime as dt

from .._calendar import MONTH_NAMES

__all__ = ["DATE_STYLES", "age_in_words", "calendar_date", "days_in_words", "when_said"]

_DAY = 86400.0

#: The ways a prompt can say when a memory was said: ``"date"`` ("8 May 2023")
#: or ``"age"`` ("3 months ago").
DATE_STYLES = ("date", "age")


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'} ago"


def age_in_words(then: float, now: float) -> str:
    """How long ago ``then`` was, seen from ``now`` (both Unix seconds), in words.

    Calendar-free and stable: whole days since ``then`` decide the wording.
    0 days: "today"; 1: "yesterday"; 2-13: "N days ago"; 14-59: "N weeks ago";
    60-729: "N months ago" (30-day months); then "N years ago" (365-day years).
    A moment in the future (a clock skew between writers) reads "today".
    """
    days = int(max(0.0, now - then) // _DAY)
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days < 14:
        return _plural(days, "day")
    if days < 60:
        return _plural(days // 7, "week")
    if days < 730:
        return _plural(days // 30, "month")
    return _plural(days // 365, "year")


def days_in_words(days: float) -> str:
    """An age given in days (as a retrieval trace holds it), in the words of :func:`age_in_words`."""
    return age_in_words(0.0, max(0.0, days) * _DAY)


def calendar_date(when: float) -> str:
    """The UTC calendar day of ``when`` (Unix seconds), as "8 May 2023"."""
    day = dt.datetime.fromtimestamp(when, dt.UTC)
    return f"{day.day} {MONTH_NAMES[day.month]} {day.year}"


def when_said(then: float, now: float, style: str = "date") -> str | None:
    """When ``then`` was, seen from ``now`` (Unix seconds), in ``style``
    (:data:`DATE_STYLES`); ``None`` when that is today (the same UTC day for a
    date, under a day ago for an age, or later than ``now``: a clock skew
    between writers), since "today" tells a model nothing.

    >>> when_said(1683504000.0, 1700000000.0)
    '8 May 2023'
    >>> when_said(1683504000.0, 1700000000.0, "age")
    '6 months ago'
    """
    if style not in DATE_STYLES:
        raise ValueError(f"style must be one of {', '.join(DATE_STYLES)}, not {style!r}")
    if style == "age":
        words = age_in_words(then, now)
        return None if words == "today" else words
    return None if int(then // _DAY) >= int(now // _DAY) else calendar_date(then)
