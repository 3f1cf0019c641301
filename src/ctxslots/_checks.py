"""Checks of the values policies and options are given (ranking, limits, query words,
the chat client, slot lists and stores given to the tools and the flusher).

Each refuses a value with :class:`~ctxslots.errors.InvalidArgumentError` (a
``ValueError``) naming the field and the range, when the policy is made: a value out of
range otherwise failed every later search or write with a bare ``ZeroDivisionError``,
``OverflowError`` or ``TypeError``, or turned the ranking upside down without a word.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from .errors import InvalidArgumentError

__all__ = ["decay_map", "names", "number", "one_of", "store_of", "whole", "word_set"]

Validator = Callable[[Any, Any, Any], None]

def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _range_text(low: float, high: float | None, *, above: bool, below: bool = False) -> str:
    if high is None:
        return f"above {low:g}" if above else f"of at least {low:g}"
    start = f"above {low:g}" if above else f"from {low:g}"
    return f"{start} and under {high:g}" if below else f"{start} to {high:g}"


def number(low: float, high: float | None = None, *, above: bool = False, below: bool = False,
           optional: bool = False) -> Validator:
    """A finite number from ``low`` (or ``above`` it) to ``high`` (or ``below`` it;
    ``None``: no top); ``optional`` lets ``None`` through."""

    def check(_instance: Any, attribute: Any, value: Any) -> None:
        if value is None and optional:
            return
        if (not _is_number(value) or not math.isfinite(value)
                or (value <= low if above else value < low)
                or (high is not None and (value >= high if below else value > high))):
            allowed = f"a number {_range_text(low, high, above=above, below=below)}"
            raise InvalidArgumentError(
                f"{attribute.name} must be {allowed}{' or None' if optional else ''}, "
                f"not {value!r}", field=attribute.name, value=value)

    return check


def whole(low: int, high: int | None = None) -> Validator:
    """A whole number (not a bool) from ``low`` to ``high`` (``None``: no top)."""

    def check(_instance: Any, attribute: Any, value: Any) -> None:
        if (not isinstance(value, int) or isinstance(value, bool) or value < low
                or (high is not None and value > high)):
            raise InvalidArgumentError(
                f"{attribute.name} must be a whole number "
                f"{_range_text(low, high, above=False)}, not {value!r}",
                field=attribute.name, value=value)

    return check


def one_of(choices: tuple[str, ...]) -> Validator:
    """One of ``choices``."""

    def check(_instance: Any, attribute: Any, value: Any) -> None:
        if not isinstance(value, str) or value not in choices:
            raise InvalidArgumentError(
                f"{attribute.name} must be one of {', '.join(map(repr, choices))}, not "
                f"{value!r}", field=attribute.name, value=value)

    return check


def decay_map(_instance: Any, attribute: Any, value: Any) -> None:
    """Slot names mapped to a decay constant in days above 0, or ``None`` (no decay)."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"{attribute.name} must map slot names to days above 0 or None, not {value!r}",
            field=attribute.name, value=value)
    for slot, days in value.items():
        if not isinstance(slot, str) or not (
                days is None or (_is_number(days) and math.isfinite(days) and days > 0)):
            raise InvalidArgumentError(
                f"{attribute.name} must map slot names to days above 0 or None, not "
                f"{slot!r}: {days!r}", field=attribute.name, value=value)


def word_set(_instance: Any, attribute: Any, value: Any) -> None:
    """A set of words (a text alone would be taken letter by letter)."""
    if not isinstance(value, AbstractSet) or not all(isinstance(w, str) for w in value):
        raise InvalidArgumentError(
            f"{attribute.name} must be a set of words (a frozenset of str), not {value!r}",
            field=attribute.name, value=value)


def names(value: object, field: str) -> tuple[str, ...]:
    """The slot names of ``value``, an iterable of strings (one string is one name).

    :raises InvalidArgumentError: ``value`` is no iterable of strings.
    """
    if isinstance(value, str):
        return (value,)
    if isinstance(value, bytes) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{field} must be a list of slot names, not {value!r}",
                                   field=field, value=value)
    found = tuple(value)
    if not all(isinstance(name, str) for name in found):
        raise InvalidArgumentError(f"{field} must hold slot names (strings), not {found!r}",
                                   field=field, value=found)
    return found


def store_of(instance: Any, attribute: Any, value: Any) -> None:
    """A fact store (anything with the store's ``limits`` and ``search``)."""
    if not callable(getattr(getattr(value, "limits", None), "slot", None)) \
            or not callable(getattr(value, "search", None)):
        raise InvalidArgumentError(f"{type(instance).__name__}.{attribute.name} must be a "
                                   f"FactStore, not {value!r}", field=attribute.name,
                                   value=value)
