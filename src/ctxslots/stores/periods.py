"""The periods of time a query names: "on 25 February, 2022", "in July", "in 2023".

A question about something said on a given day, in a given month or year is
best answered by memories observed then. :func:`query_periods` finds such dates
in free text and returns them as ``(start, end)`` Unix-second intervals, each
widened after its end (a thing done in July is often told in early August);
ranking multiplies the relevance of memories observed inside one of them (see
:attr:`~ctxslots.stores.ranking.RankingPolicy.period_boost`).

Recognised, in English: ``25 February 2022``, ``February 25, 2022`` (with or
without the comma, ordinals, month abbreviations), ``July 2023``, a full month
name alone (``in July``: the last three Julys that began by the time of the
search) and a four-digit year from 1900 to 2099. Abbreviations count only with
a day or a year ("Jan" alone is a name), and "May" and "March" alone only when
capitalised, and "May" not as the first word ("May I ask..."). Relative
expressions ("last Friday") are left alone: they need the time the question
refers to, not the time it is asked.
"""

from __future__ import annotations

import datetime as dt
import re

from .._calendar import MONTH_ABBREVIATIONS, MONTH_NAMES

__all__ = ["query_periods"]

_DAY = 86400.0
#: How far after a named day, month or year a memory still counts as "then".
_AFTER = {"day": 8 * _DAY, "month": 31 * _DAY, "year": 31 * _DAY}
#: A named day also reaches one day back (the time zones of writer and reader).
_BEFORE_DAY = _DAY
#: A month named without a year means one of the last this-many years' months.
_YEARS_BACK = 3

_MONTHS = {name.lower(): n for n, name in enumerate(MONTH_NAMES) if name}
_MONTHS.update({name.lower(): n for n, name in enumerate(MONTH_ABBREVIATIONS) if name})
_MONTHS["sept"] = 9
_FULL_NAMES = frozenset(name.lower() for name in MONTH_NAMES if name)
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY_NUM = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY_NUM}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY_NUM},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}(?:,?\s+{_YEAR})?\b", re.IGNORECASE)
#: Month words that are also common verbs or nouns: alone, only capitalised.
_AMBIGUOUS = frozenset({"may", "march"})
_YEAR_ALONE = re.compile(rf"\b{_YEAR}\b")


def _timestamp(year: int, month: int, day: int = 1) -> float:
    return dt.datetime(year, month, day, tzinfo=dt.UTC).timestamp()


def _month_end(year: int, month: int) -> float:
    if (year, month) == (dt.MAXYEAR, 12):  # the next month is past what a datetime holds
        return _timestamp(year, month, 31) + _DAY
    return _timestamp(year + month // 12, month % 12 + 1)


def _is_month_word(match: re.Match[str], first_word: int) -> bool:
    """Whether a month matched alone names the month (``first_word``: where the text's
    first word starts, for "May I ask...")."""
    word = match.group("month")
    if match.group("year"):
        return True
    if word.lower() not in _FULL_NAMES:
        return False  # an abbreviation alone
    if word.lower() in _AMBIGUOUS:
        return word[0] == "M" and (word.lower() != "may" or match.start() > first_word)
    return True


def query_periods(text: str, now: float) -> list[tuple[float, float]]:
    """The ``(start, end)`` intervals, in Unix seconds, of the dates ``text`` names.

    :param text: Free text, usually the user's message.
    :param now: The time of the search: a month named without a year means one
        of the last few years' months up to it.
    """
    # Each period once, in the order first named: a long text (a pasted changelog) names
    # the same dates many times. ``taken`` marks the characters of the days found, so
    # that a month or year inside one is not counted again, in time linear in the text.
    periods: dict[tuple[float, float], None] = {}
    taken = bytearray(len(text))
    first_word = len(text) - len(text.lstrip())

    def free(span: tuple[int, int]) -> bool:
        return taken.find(1, *span) < 0

    for pattern in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR):
        for match in pattern.finditer(text):
            month = _MONTHS[match.group("month").lower()]
            try:
                day = _timestamp(int(match.group("year")), month, int(match.group("day")))
            except ValueError:  # 31 February
                continue
            periods[(day - _BEFORE_DAY, day + _DAY + _AFTER["day"])] = None
            taken[match.start():match.end()] = b"\x01" * (match.end() - match.start())
    this_year = dt.datetime.fromtimestamp(now, dt.UTC).year
    for match in _MONTH_YEAR.finditer(text):
        if not free(match.span()) or not _is_month_word(match, first_word):
            continue
        month = _MONTHS[match.group("month").lower()]
        year = match.group("year")
        if year:
            years = [int(year)]
        else:  # the last few of that month that began by now
            latest = this_year if _timestamp(this_year, month) <= now else this_year - 1
            years = list(range(latest - _YEARS_BACK + 1, latest + 1))
        periods.update(dict.fromkeys(
            (_timestamp(y, month), _month_end(y, month) + _AFTER["month"]) for y in years))
        taken[match.start():match.end()] = b"\x01" * (match.end() - match.start())
    for match in _YEAR_ALONE.finditer(text):
        if free(match.span()):
            y = int(match.group("year"))
            periods[(_timestamp(y, 1), _timestamp(y + 1, 1) + _AFTER["year"])] = None
    return list(periods)
