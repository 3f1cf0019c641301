"""A fact's context from the messages the model says it was drawn from.

The context of an extracted fact is the text of the messages its upsert names
(``"messages": [3, 4]``), one ``role: content`` line each, so that a question
worded like the conversation finds the fact even where the fact's own sentence
uses other words. It is per fact: a context of the whole batch would be shared by
every fact of a flush and tell them apart by nothing (BENCHMARKS.md, "Context for
extracted facts").
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..model import Message

__all__ = ["FactContext", "fact_context"]

#: Ends a message cut to fit the context's byte limit.
_CUT = "…"


@attrs.frozen
class FactContext:
    """The context of one fact, and the message numbers that could not be used.

    Attributes:
        text: The context to store, or ``None`` when no usable message was named.
        ignored: Numbers the model named that are not among the messages it was shown.
    """

    text: str | None
    ignored: tuple[int, ...] = ()


def _cut(text: str, size: int) -> str:
    """``text`` within ``size`` UTF-8 bytes, ending in an ellipsis when cut."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= size:
        return text
    room = size - len(_CUT.encode("utf-8"))
    if room <= 0:
        return ""
    return raw[:room].decode("utf-8", "ignore") + _CUT


def _shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Bytes each piece may keep so that all fit ``budget``: short pieces whole, the
    room they leave shared evenly among the long ones."""
    shares = [0] * len(sizes)
    left, order = budget, sorted(range(len(sizes)), key=lambda i: sizes[i])
    for done, index in enumerate(order):
        fair = left // (len(order) - done)
        shares[index] = min(sizes[index], fair)
        left -= shares[index]
    return shares


def fact_context(numbers: Sequence[int], conversation: Sequence[Message], *, first: int,
                 last: int, max_bytes: int, before: int = 0) -> FactContext:
    """The context of a fact drawn from the messages ``numbers`` of ``conversation``.

    :param numbers: The 1-based message numbers the model named.
    :param conversation: The conversation, oldest first (message ``n`` at ``n - 1``).
    :param first: The first number the model was shown.
    :param last: The last number the model was shown.
    :param max_bytes: The most UTF-8 bytes the context may take
        (``Limits.max_context_bytes``): each message keeps an even share, a short
        one whole, a long one cut.
    :param before: Also take up to this many messages said just before the first
        one named (read in earlier flushes, too).
    """
    usable = {n for n in numbers if first <= n <= last and n <= len(conversation)}
    named = sorted(usable)
    ignored = tuple(n for n in numbers if n not in usable)  # a set: a reply may name millions
    if not named:
        return FactContext(None, ignored)
    chosen = [*range(max(1, named[0] - before), named[0]), *named]
    lines = [f"{m.role}: {m.content}".replace("\x00", "")
             for m in (conversation[n - 1] for n in chosen)]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return FactContext(None, ignored)
    budget = max_bytes - (len(lines) - 1)  # the newlines between them
    sizes = [len(line.encode("utf-8", "surrogatepass")) for line in lines]
    text = "\n".join(_cut(line, share) for line, share in zip(lines, _shares(sizes, budget),
                                                                strict=True))
    return FactContext(text if text.strip() else None, ignored)
