"""Ages in words, as tool results and prompt dumps show them ("today", "3 days ago")."""

from __future__ import annotations

__all__ = ["age_in_words", "days_in_words"]

_DAY = 86400.0


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
