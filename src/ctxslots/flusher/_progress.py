"""How far each conversation has been read: input checks, fingerprints, the progress row.

The store records, per user, agent and conversation id, how many messages were read and a
SHA-256 fingerprint of them (:meth:`~ctxslots.FactStore.flush_progress`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._readable import count
from ..errors import InvalidArgumentError
from ..model import MESSAGE_ROLES, Message
from ..model.facts import plain_text
from ..stores import FactStore
from ..stores.writes.limits import LONE_SURROGATE, check_conversation

__all__ = [
    "BROKEN_TEXT",
    "READING_AGAIN",
    "READ_AGAIN_NEXT",
    "Progress",
    "broken_text",
    "check_conversation",
    "check_messages",
    "fingerprint",
    "read_progress",
    "start_position",
    "write_progress",
]

#: ``(messages_read, fingerprint)`` of one conversation.
Progress = tuple[int, str]


def check_messages(messages: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    """Messages as :class:`~ctxslots.model.Message` objects.

    :raises InvalidArgumentError: ``messages`` is not a sequence, an entry is
        neither a message nor a mapping, a message's role, content or id is not text
        (an id may be ``None``), it has no role or one not of :data:`MESSAGE_ROLES`, or its
        content or id holds a lone surrogate (field ``"messages"``).
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidArgumentError("messages must be a sequence of messages", field="messages",
                               value=messages)
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            if m.get("role") is None:  # a Responses API item ({"type": "function_call"})
                kind = m.get("type")
                raise InvalidArgumentError(
                    f"messages[{i}] has no role"
                    + (f" (a {str(kind)[:40]!r} item, not a chat message)" if kind else "")
                    + f"; a message's role is one of {', '.join(MESSAGE_ROLES)}",
                    field="messages", value=m)
            out.append(Message.from_dict(m))
        else:
            raise InvalidArgumentError(
                f"messages[{i}] must be a Message or a {{role, content}} mapping, not "
                f"{type(m).__name__}", field="messages", value=m,
            )
        wrong = [(name, value) for name, value in (("role", out[-1].role),
                                                   ("content", out[-1].content),
                                                   ("id", out[-1].id))
                 if not isinstance(value, str) and (name != "id" or value is not None)]
        if wrong:  # a Message built by hand: its fields are not checked when it is made
            name, value = wrong[0]
            raise InvalidArgumentError(f"messages[{i}].{name} must be text, not "
                                       f"{type(value).__name__}", field="messages", value=value)
        if any(type(text) not in (str, type(None))
               for text in (out[-1].role, out[-1].content, out[-1].id)):
            # A str enum's member: its own characters, not its name ("Role.USER").
            out[-1] = Message(plain_text(out[-1].role), plain_text(out[-1].content),
                              None if out[-1].id is None else plain_text(out[-1].id))
        if out[-1].role not in MESSAGE_ROLES:
            raise InvalidArgumentError(
                f"messages[{i}] has the role {out[-1].role[:40]!r}; a message's role is one of "
                f"{', '.join(MESSAGE_ROLES)}", field="messages", value=out[-1].role)
        if broken_text(out[-1]):
            raise InvalidArgumentError(f"messages[{i}] {BROKEN_TEXT}", field="messages",
                                       value=out[-1].content)
    return out


#: Why a message holding a lone surrogate is refused: no request can carry it, and the
#: record of what was read cannot be computed over it.
BROKEN_TEXT = ("is not valid Unicode text: it holds a lone surrogate (half of a character, "
               "as a string cut between the two halves of an emoji leaves); nothing was "
               "sent to the model")


def broken_text(message: Message) -> bool:
    """Whether ``message``'s content or id holds a lone surrogate."""
    return any(LONE_SURROGATE.search(text) is not None
               for text in (message.content, message.id) if text is not None)




def fingerprint(messages: Sequence[Message]) -> str:
    """SHA-256 over the roles, contents and ids of ``messages``, in order."""
    digest = hashlib.sha256()
    for m in messages:
        digest.update(json.dumps([m.role, m.content, m.id], ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def read_progress(store: FactStore, conversation: str, *, user: str | None = None,
                  agent: str | None = None) -> Progress | None:
    """The recorded progress of this user's and agent's ``conversation``, or ``None``
    before its first flush."""
    return store.flush_progress(conversation, user=user, agent=agent)


def write_progress(store: FactStore, conversation: str, messages: Sequence[Message], *,
                   user: str | None = None, agent: str | None = None) -> None:
    """Record ``messages`` as read; call inside the flush's write transaction."""
    store.record_flush_progress(conversation, len(messages), fingerprint(messages),
                                user=user, agent=agent)


#: What follows a start over, said by a flush that reads the conversation.
READING_AGAIN = "; reading the conversation again from the start"
#: What follows a start over, said by a flush that does not read yet (not due, or no
#: messages at all): the progress recorded stays until a flush reads.
READ_AGAIN_NEXT = "; the next flush that reads it starts again from the first message"


def start_position(progress: Progress | None, messages: Sequence[Message]) -> tuple[int, str | None]:
    """Where to start reading ``messages``, and why reading starts over, if it does.

    Reading starts over at 0 when the messages read before have changed or the
    conversation is shorter than what was read; the reason is said without what
    follows from it (a flush that reads appends :data:`READING_AGAIN`, one that does
    not read yet :data:`READ_AGAIN_NEXT`).
    """
    if progress is None:
        return 0, None
    read, expected = progress
    if len(messages) < read:
        return 0, (f"the conversation has {count(len(messages), 'message')}, fewer than the {read} "
                   "read before")
    if fingerprint(messages[:read]) != expected:
        return 0, f"messages 1-{read} changed since they were read (fingerprint mismatch)"
    return read, None
