"""What the assembler is asked for: the message, the workspace and the budget.

Shared data: the assembler builds a prompt for an :class:`AssemblyRequest`
and every contributor reads one; :mod:`ctxslots.model` re-exports both classes.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable

import attrs

from ._readable import TIME_RANGE, shown_moment
from .errors import InvalidRequestError

__all__ = ["AssemblyRequest", "ContextBlock"]

#: Default token budget of a request (and of ``ctxslots assemble``).
DEFAULT_BUDGET = 2000


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidRequestError(
            f"{name} must be an integer >= {minimum}, not {value!r}", field=name, value=value
        )
    return value


#: The last Unix second a datetime can hold (9999-12-31T23:59:59Z).
_LAST_SECOND = 253402300799.0


def _to_seconds(value: dt.datetime | float | None) -> float | None:
    """``now`` as Unix seconds: a datetime (naive means UTC) or a number from 1970 to 9999."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        when = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        seconds = when.timestamp()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidRequestError(f"now must be a datetime or Unix seconds, not "
                                  f"{type(value).__name__}", field="now", value=value)
    if not math.isfinite(seconds) or not 0.0 <= seconds <= _LAST_SECOND:
        raise InvalidRequestError(f"now must be a time between 1970 and the year 9999 "
                                  f"({TIME_RANGE}), not {shown_moment(value)}", field="now",
                                  value=value)
    return seconds


def _check_text(name: str, value: object, *, blank_ok: bool) -> str:
    if not isinstance(value, str):
        raise InvalidRequestError(
            f"{name} must be a string, not {type(value).__name__}", field=name, value=value
        )
    if not blank_ok and not value.strip():
        raise InvalidRequestError(f"{name} must not be blank", field=name, value=value)
    if _SURROGATE.search(value):
        # As bytes that were not UTF-8 become: no dump or model request could encode it.
        raise InvalidRequestError(f"{name} is not valid Unicode text (it holds a lone "
                                  "surrogate)", field=name, value=value)
    return value


@attrs.frozen
class ContextBlock:
    """Extra context the caller hands in for one turn (an open file, a ticket...).

    Each non-blank line of ``text`` becomes one item of a section titled
    ``title``; when the budget is short, the last lines go first.

    Attributes:
        title: The section heading.
        text: The context, one item per non-blank line.
        priority: Higher is kept longer (default 90: above the memory slots,
            because the caller chose it for this very turn).
        sticky: Place it with the sticky sections.
    """

    title: str
    text: str
    priority: int = 90
    sticky: bool = False

    def __attrs_post_init__(self) -> None:
        _check_text("title", self.title, blank_ok=False)
        _check_text("text", self.text, blank_ok=True)
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise InvalidRequestError(
                f"priority must be an integer, not {self.priority!r}",
                field="priority", value=self.priority,
            )
        if not isinstance(self.sticky, bool):
            raise InvalidRequestError("sticky must be True or False", field="sticky", value=self.sticky)

    @property
    def lines(self) -> list[str]:
        """The non-blank lines of the text, in order."""
        return [line for line in self.text.splitlines() if line.strip()]


def _to_blocks(value: Iterable[ContextBlock | tuple[str, str]]) -> tuple[ContextBlock, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidRequestError(
            "extra must be a list of ContextBlock or (title, text) pairs", field="extra", value=value
        )
    blocks = []
    for entry in value:
        if isinstance(entry, ContextBlock):
            blocks.append(entry)
        elif isinstance(entry, tuple) and len(entry) == 2:
            blocks.append(ContextBlock(*entry))
        else:
            raise InvalidRequestError(
                f"extra entries must be ContextBlock or (title, text) pairs, not {entry!r}",
                field="extra", value=entry,
            )
    return tuple(blocks)


@attrs.frozen
class AssemblyRequest:
    """One turn's request to :meth:`~ctxslots.PromptAssembler.assemble`.

    The prompt text may use ``budget - safety_margin - answer_reserve`` tokens,
    counted by tiktoken. Other model families' tokenizers often count more than
    tiktoken for the same text: a safety margin of about 10% covers that.

    Attributes:
        message: The user's message; memory contributors search with it.
        scope: The workspace (project) the turn happens in, or ``None``.
        budget: Total tokens for the assembled context.
        safety_margin: Tokens of the budget left unused on purpose.
        answer_reserve: Tokens of the budget kept for the model's answer.
        extra: Extra context for this turn: :class:`ContextBlock` objects or
            ``(title, text)`` pairs.
        now: The moment the turn happens, in Unix seconds or as a datetime
            (naive means UTC); memories are ranked as they would have been then
            (decay, ages, periods), and what was said after it is not shown.
            ``None``: the store's clock.
        room: Tokens left for the section being asked for, once the sections
            placed before it have taken theirs: the assembler sets it for each
            contributor it asks (:meth:`~ctxslots.PromptAssembler.assemble`
            asks them in placement order), so one that fills the budget offers
            what can still fit, and nothing when no room is left. ``None``
            (as callers build a request): not known, see :attr:`available`.
        user: The user the turn is for: memory contributors show that user's
            facts, never another's (``None``: the store's default user).
        agent: The agent answering: its own lessons, never another agent's
            (``None``: the store's default agent).
    """

    message: str
    scope: str | None = None
    budget: int = DEFAULT_BUDGET
    safety_margin: int = 0
    answer_reserve: int = 0
    extra: tuple[ContextBlock, ...] = attrs.field(default=(), converter=_to_blocks)
    now: float | None = attrs.field(default=None, converter=_to_seconds)
    room: int | None = None
    user: str | None = None
    agent: str | None = None

    def __attrs_post_init__(self) -> None:
        _check_text("message", self.message, blank_ok=True)
        for name in ("scope", "user", "agent"):
            if getattr(self, name) is not None:
                _check_text(name, getattr(self, name), blank_ok=False)
        _check_int("budget", self.budget, 1)
        _check_int("safety_margin", self.safety_margin, 0)
        _check_int("answer_reserve", self.answer_reserve, 0)
        if self.available < 1:
            raise InvalidRequestError(
                f"budget {self.budget} leaves no room after safety_margin "
                f"{self.safety_margin} and answer_reserve {self.answer_reserve}",
                field="budget", value=self.budget,
            )
        if self.room is not None:
            _check_int("room", self.room, 0)

    @property
    def available(self) -> int:
        """Tokens the prompt text may use."""
        return self.budget - self.safety_margin - self.answer_reserve

    @property
    def room_left(self) -> int:
        """Tokens a section may still fill: :attr:`room` when the assembler set it
        (never more than :attr:`available`), else :attr:`available`."""
        return self.available if self.room is None else min(self.room, self.available)
