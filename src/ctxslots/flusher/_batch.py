"""How much of the unread conversation one flush sends: at most a number of tokens.

A conversation of thousands of messages sent as one request can be too long for
the model, and then every later flush would send it all again and never move on.
So a flush sends the unread messages, oldest first, while they fit the cap; the
rest waits for the next flush. A message counts with the heading and the fence the
extraction prompt puts around it (a dozen tokens: for short messages, more than their
text). A single message longer than the cap is sent cut to it, and counts as read.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..model import Message
from ..prompts.escape import fence_for
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


def _framing(message: Message, number: int, cap: int, encoding: str) -> int:
    """Tokens of the heading and fences the extraction prompt puts around ``message``."""
    fence = fence_for(message.content)
    # Counted apart, as the text between them is: tokens do not run across it.
    return (_tokens(f"\n\n## Message {number} ({message.role})\n{fence}text\n", cap, encoding)
            + _tokens(f"\n{fence}", cap, encoding))


def _cut(message: Message, cap: int, encoding: str) -> Message | None:
    """``message`` cut to ``cap`` tokens of text, marked as cut (``None``: it fits)."""
    enc = get_encoding(encoding)
    tokens = enc.encode_ordinary(message.content[:(cap + 1) * _CHARS_PER_TOKEN])
    if len(tokens) <= cap and len(message.content) <= (cap + 1) * _CHARS_PER_TOKEN:
        return None
    # A token may hold part of a character (an emoji, a Han character): one cut there
    # leaves its first bytes out, never a replacement character in the text.
    kept = enc.decode_bytes(tokens[:cap]).decode("utf-8", "ignore")
    return attrs.evolve(message, content=kept + "\n[the rest of this message was too long "
                                                "to read]")


def take_batch(unread: Sequence[Message], cap: int | None, encoding: str,
               first_number: int) -> Batch:
    """The oldest unread messages that fit ``cap`` tokens (``None``: all of them), each
    counted with its heading and fences as the extraction prompt shows it.

    :param first_number: The 1-based number of ``unread[0]`` in the conversation.
    """
    if cap is None or not unread:
        return Batch(tuple(unread), len(unread), 0)
    taken: list[Message] = []
    used = 0
    for number, message in enumerate(unread, start=first_number):
        framing = _framing(message, number, cap, encoding)
        size = framing + _tokens(message.content, max(cap - used - framing, 0), encoding)
        if used + size > cap:
            break
        taken.append(message)
        used += size
    if taken:
        return Batch(tuple(taken), len(taken), used)
    first = unread[0]
    framing = _framing(first, first_number, cap, encoding)
    room = max(cap - framing, 1)  # a cap smaller than the heading still reads a token
    cut = _cut(first, room, encoding)
    if cut is None:  # it fits the room left by its heading: sent whole, alone
        return Batch((first,), 1, framing + count_tokens(first.content, encoding))
    return Batch((cut,), 1, framing + count_tokens(cut.content, encoding),
                 warning=f"message {first_number} has more than the {cap:,} tokens one flush "
                         f"sends (max_flush_tokens): only its first {room:,} were read")
