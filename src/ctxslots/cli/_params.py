"""Option types of the command that check their input themselves, in words a person reads."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import click

__all__ = ["ID", "MAX_WHOLE", "Moment", "WholeNumber", "whole_number"]

#: The largest whole number an option takes: a fact id is a signed 64-bit integer.
MAX_WHOLE = 2**63 - 1

# Digits only (a sign allowed), and no more of them than MAX_WHOLE has: Python itself
# refuses to read over 4,300 digits, with advice about sys.set_int_max_str_digits.
_WHOLE = re.compile(r"[+-]?\d{1,19}")


def _shown(text: str) -> str:
    """``text`` quoted, cut short when long (a 5,000-digit value is not repeated whole)."""
    if len(text) <= 40:
        return repr(text)
    return f"{text[:20]!r}... ({len(text):,} characters)"


def whole_number(text: str, *, low: int = 0, high: int = MAX_WHOLE, what: str = "value") -> int:
    """``text`` read as a whole number from ``low`` to ``high``.

    :raises ValueError: It is not one; the message names ``what`` and the range.
    """
    stripped = text.strip()
    if _WHOLE.fullmatch(stripped):
        number = int(stripped)
        if low <= number <= high:
            return number
    raise ValueError(f"{what} must be a whole number from {low:,} to {high:,}, not "
                     f"{_shown(stripped)}")


class WholeNumber(click.ParamType[int]):
    """A whole number from ``low`` to ``high`` (inclusive), read by :func:`whole_number`.

    Attributes:
        low: The smallest value taken.
        high: The largest value taken (a 64-bit integer's largest by default).
    """

    name = "integer"

    def __init__(self, low: int = 0, high: int = MAX_WHOLE) -> None:
        self.low = low
        self.high = high

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        """The number, or a usage error naming the range."""
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        try:
            return whole_number(str(value), low=self.low, high=self.high, what="it")
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

    def __repr__(self) -> str:
        return f"WholeNumber({self.low}, {self.high})"


#: A fact id argument.
ID = WholeNumber(1)


class Moment(click.ParamType[dt.datetime]):
    """A moment in ISO 8601 (``2024-01-10``, ``2024-01-10T09:30:00+01:00``; without a zone
    it is UTC), as the JSON dump's ``now`` gives it."""

    name = "moment"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> dt.datetime:
        """The moment, or a usage error showing what was given."""
        if isinstance(value, dt.datetime):
            return value
        try:
            moment = dt.datetime.fromisoformat(str(value).strip())
        except ValueError:
            self.fail(f"it must be a moment in ISO 8601 (2024-01-10T09:30:00Z), not "
                      f"{_shown(str(value))}", param, ctx)
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
