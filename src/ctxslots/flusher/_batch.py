"""How much of the unread conversation one flush sends: at most a number of tokens.

A conversation of thousands of messages sent as one request can be too long for
the model, and then every later flush would send it all again and never move on.
So a flush sends the unread messages, oldest first, while their text fits the
cap; the rest waits for the next flush. A single message longer than the cap is
sent cut to it, and counts as read.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..model import Message
from ..tokens import count_tokens, get_encoding

__all__ = ["Batch", "take_batch"]

#: Characters counted for a message before its tokens are: no token of the
#: supported encodings is this long, so a longer message is over the cap when
#: this much of it is (counting 51 MB to find that out would take seconds).
_CHARS_PER_TOKEN = 16


@attrs.frozen
class Batch:
    """The messages one flush sends.

    Attributes:
        messages: As sent (the only one may be cut to the cap).
        count: How many unread messages of the conversation they are.
        tokens: Tokens of their text, counted as sent.
        warning: Why a message was cut, when one was.
    """

    messages: tuple[Message, ...]
    count: int
    tokens: int
    warning: str | None = None


def _tokens(text: str, limit: int, encoding: str) -> int:
    """Tokens of ``text``, or a number above ``limit`` when it has more than that."""
    window = (limit + 1) * _CHARS_PER_TOKEN
    if len(text) > window:
        head = count_tokens(text[:window], encoding)
        if head > limit:
            return head
    return count_tokens(text, encoding)


def _cut(message: Message, cap: int, encoding: str) -> Message:
    enc = get_encoding(encoding)
    head = enc.decode(enc.encode_ordinary(message.content[:(cap + 1) * _CHARS_PER_TOKEN])[:cap])
    return attrs.evolve(message, content=head + "\n[the rest of this message was too long "
                                                "to read]")


def take_batch(unread: Sequence[Message], cap: int | None, encoding: str,
               first_number: int) -> Batch:
    """The oldest unread messages whose text fits ``cap`` tokens (``None``: all of them).

    :param first_number: The 1-based number of ``unread[0]`` in the conversation.
    """
    if cap is None or not unread:
        return Batch(tuple(unread), len(unread), 0)
    taken: list[Message] = []
    used = 0
    for message in unread:
        size = _tokens(message.content, cap - used, encoding)
        if used + size > cap:
            break
        taken.append(message)
        used += size
    if taken:
        return Batch(tuple(taken), len(taken), used)
    first = unread[0]
    cut = _cut(first, cap, encoding)
    return Batch((cut,), 1, count_tokens(cut.content, encoding),
                 warning=f"message {first_number} has more than the {cap:,} tokens one flush "
                         f"sends (max_flush_tokens): only its first {cap:,} were read")
