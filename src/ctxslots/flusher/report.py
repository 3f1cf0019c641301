"""What a flush did, and the policy that decides when one is due."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._readable import count
from ..errors import InvalidArgumentError
from ..model import Fact, Message
from ..tokens import DEFAULT_ENCODING, ENCODINGS, count_tokens
from ._progress import check_messages
from .operations import Operation

__all__ = ["Change", "FlushPolicy", "FlushReport", "Rejection"]

#: What a summary line shows escaped: every character that breaks a line (as
#: ``str.splitlines`` sees them) and every other control character but the tab.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return {"\n": "\\n", "\r": "\\r"}.get(char) or f"\\u{ord(char):04x}"

#: :attr:`FlushReport.status` values.
STATUSES = ("applied", "nothing_new", "not_due", "failed")


def _positive_or_none(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(
            f"{attribute.name} must be a positive integer or None, not {value!r}",
            field=attribute.name, value=value)


def _known_encoding(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or value not in ENCODINGS:
        raise InvalidArgumentError(
            f"{attribute.name} must be one of {', '.join(sorted(ENCODINGS))} (the encodings "
            f"available offline), not {value!r}", field=attribute.name, value=value)


@attrs.frozen
class FlushPolicy:
    """Decides when the unflushed part of a conversation is worth a flush.

    A flush is due when either threshold is reached; a threshold of ``None``
    is off. Session end and compaction call ``flush(..., force=True)``, which
    does not ask the policy, again while ``report.remaining`` is not 0 (one flush
    sends at most ``max_flush_tokens`` of messages).

    Attributes:
        every_n_turns: Due once this many user messages are unflushed.
        token_threshold: Due once the unflushed text has this many tokens,
            counted by tiktoken with ``encoding`` (offline).
        encoding: The tiktoken encoding that counts.

    Its methods take :class:`~ctxslots.model.Message` objects or ``{role, content}``
    mappings, as :meth:`MemoryFlusher.flush` does.

    :raises InvalidArgumentError: A threshold is not a positive integer or ``None``, or
        the encoding is not one available offline (a ``ValueError``); it was found only
        at the first count.
    """

    every_n_turns: int | None = attrs.field(default=10, validator=_positive_or_none)
    token_threshold: int | None = attrs.field(default=2000, validator=_positive_or_none)
    encoding: str = attrs.field(default=DEFAULT_ENCODING, validator=_known_encoding)

    def turns(self, messages: Sequence[Message | Mapping[str, Any]]) -> int:
        """How many of ``messages`` are user turns.

        :raises InvalidArgumentError: ``messages`` is not a sequence of messages.
        """
        return sum(1 for m in check_messages(messages) if m.role == "user")

    def tokens(self, messages: Sequence[Message | Mapping[str, Any]]) -> int:
        """Tokens of the messages' text (contents only, one per line).

        :raises InvalidArgumentError: ``messages`` is not a sequence of messages.
        """
        return count_tokens("\n".join(m.content for m in check_messages(messages)),
                            self.encoding)

    def should_flush(self, messages: Sequence[Message | Mapping[str, Any]]) -> bool:
        """Whether the unflushed ``messages`` are due for a flush (never when empty).

        :raises InvalidArgumentError: ``messages`` is not a sequence of messages.
        """
        messages = check_messages(messages)
        if not messages:
            return False
        if self.every_n_turns is not None and self.turns(messages) >= self.every_n_turns:
            return True
        return self.token_threshold is not None and self.tokens(messages) >= self.token_threshold

    def explain(self, messages: Sequence[Message | Mapping[str, Any]]) -> str:
        """A line saying how far the unflushed messages are from each threshold.

        :raises InvalidArgumentError: ``messages`` is not a sequence of messages.
        """
        messages = check_messages(messages)
        parts = []
        if self.every_n_turns is not None:
            parts.append(f"{self.turns(messages)} of {count(self.every_n_turns, 'turn')}")
        if self.token_threshold is not None:
            parts.append(f"{self.tokens(messages)} of {count(self.token_threshold, 'token')}")
        return ", ".join(parts) or "every threshold is off"


@attrs.frozen
class Change:
    """One fact a flush wrote, or found already up to date.

    Attributes:
        kind: ``"added"``, ``"updated"``, ``"unchanged"`` or ``"forgotten"``.
        index: Position of the operation in the reply's ``operations`` list.
        fact: The fact after the change (archived for ``"forgotten"``).
        previous: The value before the change, for ``"updated"``.
        redacted: What the model's value (for ``"forgotten"``, its reason) held that
            the store's secret policy replaced with ``[redacted KIND]`` ("GitHub
            token"...), one entry each.
    """

    kind: str
    index: int
    fact: Fact
    previous: str | None = None
    redacted: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"kind": self.kind, "index": self.index, "fact": self.fact.to_dict(),
                "previous": self.previous, "redacted": list(self.redacted)}


@attrs.frozen
class Rejection:
    """An operation that was not applied, and why.

    Attributes:
        index: Position of the operation in the reply's ``operations`` list.
        operation: The operation as read.
        reason: Why it was rejected.
    """

    index: int
    operation: Operation
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"index": self.index, "operation": self.operation.to_dict(), "reason": self.reason}


@attrs.frozen
class FlushReport:
    """What one flush did: facts written and rejected, the model's raw output, tokens.

    Attributes:
        status: ``"applied"`` (the reply was applied, possibly with zero
            operations), ``"nothing_new"`` (no unread messages; no model call),
            ``"not_due"`` (the policy said wait; nothing read), ``"failed"``
            (the store is unchanged; see ``error``).
        conversation: The conversation id.
        flush_id: Unique id of this flush, recorded in the source of each fact.
        scope: The workspace of scoped slots, or ``None``.
        model: The model that answered as the server named it, else the
            client's name.
        first: Number (1-based) of the first message read by this flush.
        last: Number of the last message read (``first - 1`` when none).
        messages_read: Messages of the conversation read after this flush.
        remaining: Unread messages this flush left for the next ones: those that
            did not fit its token cap (``max_flush_tokens``), or, when it was not
            due, all the new ones.
        restarted: The messages read earlier changed (or the conversation got
            shorter), so this flush read the conversation from the start.
        warnings: Plain-language notes, such as why the flush restarted.
        detail: Why the flush was skipped, for ``"not_due"`` and ``"nothing_new"``.
        source: The source recorded on every fact this flush wrote.
        known_facts: The short ids shown to the model, mapped to fact ids.
        added: Facts written under a new key.
        updated: Facts whose value (or tags, or confidence) was replaced.
        unchanged: Upserts that matched the stored fact exactly (not written).
        forgotten: Facts moved to the archive.
        superseded: Ids of older facts that a fact this flush wrote now hides
            as a near-duplicate (still stored; see ``FactStore.consolidate``).
        pruned: Ids of facts that pruning moved to the archive after the flush
            because a slot went over its cap.
        rejected: Operations that were not applied, with the reason.
        attempts: Model calls made (1, or 2 after a retry).
        raw_outputs: The model's reply text of every attempt, as received.
        format_errors: Why each rejected reply could not be read.
        prompt_tokens: Prompt tokens the server reported over all attempts.
        completion_tokens: Completion tokens the server reported.
        error: Why the flush failed, for ``"failed"``.
        user: The user whose conversation it was (``None``: the store's default).
        agent: The agent that took part (``None``: the store's default).
    """

    status: str = attrs.field(validator=attrs.validators.in_(STATUSES))
    conversation: str
    flush_id: str
    scope: str | None = None
    model: str | None = None
    first: int = 1
    last: int = 0
    messages_read: int = 0
    remaining: int = 0
    restarted: bool = False
    warnings: tuple[str, ...] = ()
    detail: str | None = None
    source: str | None = None
    # The mappings are compared, not hashed (a dict has no hash): equal reports hash alike.
    known_facts: dict[int, int] = attrs.field(factory=dict, hash=False)
    added: tuple[Change, ...] = ()
    updated: tuple[Change, ...] = ()
    unchanged: tuple[Change, ...] = ()
    forgotten: tuple[Change, ...] = ()
    superseded: tuple[int, ...] = ()
    pruned: tuple[int, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    attempts: int = 0
    raw_outputs: tuple[str, ...] = ()
    format_errors: tuple[str, ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    user: str | None = None
    agent: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the flush did not fail."""
        return self.status != "failed"

    @property
    def redacted(self) -> tuple[Change, ...]:
        """The changes whose value (a forget's reason) held a secret that was replaced
        before it was written."""
        return tuple(c for c in (*self.added, *self.updated, *self.unchanged, *self.forgotten)
                     if c.redacted)

    @property
    def tokens_used(self) -> int | None:
        """Prompt plus completion tokens, when the server reported them."""
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (the layout of ``ctxslots flush --json``)."""
        out: dict[str, Any] = {}
        for field in attrs.fields(FlushReport):
            value = getattr(self, field.name)
            if field.name in ("added", "updated", "unchanged", "forgotten", "rejected"):
                value = [c.to_dict() for c in value]
            elif field.name == "known_facts":
                value = {str(k): v for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            out[field.name] = value
        out["tokens_used"] = self.tokens_used
        return out

    def summary(self) -> str:
        """A few human-readable lines: the outcome, each change and rejection (a line
        break or control character inside one of them shown as ``\\n``, ``\\r`` or
        ``\\uXXXX``)."""
        if self.status == "not_due":
            span = f"{self.remaining} unread message{'s' if self.remaining != 1 else ''}"
        elif self.last >= self.first:
            span = f"messages {self.first}-{self.last}"
        else:
            span = "no new messages"
        head = (f"flush {self.flush_id} of {self.conversation}: {self.status} ({span}, "
                f"{self.messages_read} read in all)")
        lines = [head]
        if self.remaining and self.status != "not_due":
            lines.append(f"{self.remaining} more message{'s' if self.remaining != 1 else ''} "
                         "left for the next flush (the token cap of one flush was reached)")
        lines += [f"warning: {w}" for w in self.warnings]
        if self.detail:
            lines.append(self.detail)
        if self.error:
            lines.append(f"error: {self.error}")
        for change in (*self.added, *self.updated, *self.unchanged, *self.forgotten):
            f = change.fact
            where = f.slot + (f"@{f.scope}" if f.scope else "")
            lines.append(f"{change.kind:>9} {where} {f.key}: {f.value[:200]}")
            if change.redacted:
                what = "reason" if change.kind == "forgotten" else "value"
                lines.append(f"           redacted from the {what}: {', '.join(change.redacted)}")
        for rej in self.rejected:
            lines.append(f" rejected operations[{rej.index}] ({rej.operation.op} "
                         f"{rej.operation.slot[:40]} {rej.operation.key[:60]}): {rej.reason}")
        if self.superseded:
            lines.append(f"superseded as near-duplicates: {', '.join(map(str, self.superseded))}")
        if self.pruned:
            lines.append(f"pruned to the archive: {', '.join(map(str, self.pruned))}")
        if self.attempts:
            used = self.tokens_used
            lines.append(f"{self.attempts} model call(s)"
                         + (f", {used} tokens" if used is not None else ""))
        # A key, value or reason the model wrote may hold a line break or a control
        # character: shown as an escape, it cannot pass for a line of the report (an
        # "added" line nothing backs) nor drive a terminal.
        return "\n".join(_UNSAFE.sub(_escaped, line) for line in lines)
