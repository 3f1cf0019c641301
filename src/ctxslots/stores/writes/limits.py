"""Checks applied to every fact before it is written.

Each check raises :class:`~ctxslots.errors.InvalidFactError` (a ``ValueError``)
naming the field, and nothing is written.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping

import attrs

from ..._checks import names, one_of, whole
from ..._readable import TIME_RANGE, count, shown_moment
from ..._secrets import redact
from ...errors import InvalidArgumentError, InvalidFactError
from ...model import to_timestamp
from ..backend import MAX_TIME
from ..owners import ANY, BUILTIN_SLOT_OWNERS, SlotOwners

__all__ = ["BUILTIN_SLOTS", "KEY_PATTERN", "LONE_SURROGATE", "MAX_SCORE_STEP", "MAX_TIMESTAMP",
           "SECRET_POLICIES", "TIME_DIGITS", "Limits", "check_conversation"]

#: The last Unix second :class:`datetime.datetime` can represent (9999-12-31T23:59:59Z).
MAX_TIMESTAMP = MAX_TIME

#: The most one reinforce or demote moves a score.
MAX_SCORE_STEP = 1000.0

#: What :attr:`Limits.secrets` may be.
SECRET_POLICIES = ("redact", "refuse", "allow")

#: The slots ctxslots ships contributors for.
BUILTIN_SLOTS: tuple[str, ...] = ("user", "project", "agent")

#: The one rule for keys, wherever a key is written (the store, the command line, the
#: agent tools' schemas, the flusher's reply schema): at least one character that is
#: not a space, no control characters. The length limit is :attr:`Limits.max_key_chars`.
KEY_PATTERN = r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"
_KEY = re.compile(KEY_PATTERN)

_SLOT = re.compile(r"[a-z][a-z0-9_\-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_conversation(conversation: object) -> str:
    """A conversation id: non-empty Unicode text, at most 200 characters, no control
    characters.

    :raises InvalidArgumentError: It is not (field ``"conversation"``).
    """
    if not isinstance(conversation, str) or not conversation.strip() \
            or len(conversation) > 200 or _CONTROL.search(conversation) \
            or LONE_SURROGATE.search(conversation):
        raise InvalidArgumentError(
            "conversation must be a non-empty string of at most 200 characters without "
            "control characters", field="conversation", value=conversation)
    return conversation


def _check_text(text: str, limit: int, what: str, field: str, *, plain: bool) -> None:
    """Refuse ``text`` over ``limit`` characters, or holding a control character (unless
    ``plain``, the caller's own check), saying which of the two it is."""
    if len(text) > limit:
        raise InvalidFactError(f"{what} must be at most {limit} characters, not {len(text)}",
                               field=field, value=text)
    if not plain:
        raise InvalidFactError(f"{what} must be one line without control characters "
                               "(no newline or tab)", field=field, value=text)
#: Decimals a stored time keeps: whole microseconds, all a datetime holds, so a time read
#: back as a datetime and given again names the moment stored.
TIME_DIGITS = 6
#: A lone surrogate (say, from an argv byte that is not UTF-8, or a file read with
#: ``surrogateescape``): no text SQLite can store.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode(text: str, field: str) -> str:
    if LONE_SURROGATE.search(text):
        raise InvalidFactError(
            f"{field} is not valid Unicode text (it holds a lone surrogate, as bytes that were "
            "not UTF-8 become)", field=field, value=text)
    return text


def _no_nul(text: str, field: str) -> str:
    # PostgreSQL's text holds no NUL: refused on both engines, so a store moves between them.
    if "\x00" in text:
        raise InvalidFactError(f"{field} must not contain NUL characters", field=field,
                               value=text)
    return text


def _fit_bytes(text: str, limit: int) -> str:
    """``text``, or, when over ``limit`` UTF-8 bytes, its start ending with ``…`` within them."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    mark = "…" if limit >= 3 else ""
    return data[: limit - len(mark.encode())].decode("utf-8", "ignore") + mark


def _name(text: str, field: str) -> str:
    """A key, owner or scope as stored: valid Unicode, and not made of invisible
    characters alone."""
    named = _unicode(text, field)
    # ASCII holds no format (Cf) character: most names are checked without the scan.
    shown = named if named.isascii() else "".join(
        c for c in named if unicodedata.category(c) != "Cf")
    if not shown.strip():
        raise InvalidFactError(f"{field} must hold a visible character", field=field,
                               value=text)
    return named



def _names(slots: Iterable[str]) -> tuple[str, ...]:
    # One text is one slot name, as everywhere slots are named.
    found = names(slots, "slots")
    for name in found:
        if not isinstance(name, str) or not _SLOT.fullmatch(name):
            raise InvalidArgumentError(
                f"slots: invalid slot name {name!r}: use a lower-case letter, then up to 63 "
                "lower-case letters, digits, '_' or '-'", field="slots", value=slots)
    return found


def _owners(owners: Mapping[str, SlotOwners | str]) -> dict[str, SlotOwners]:
    if not isinstance(owners, Mapping):
        raise InvalidArgumentError(f"slot_owners must map slot names to owners, not {owners!r}",
                                   field="slot_owners", value=owners)
    return {slot: SlotOwners.parse(o) if isinstance(o, str) else o for slot, o in owners.items()}


def _flag(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{attribute.name} must be True or False, not {value!r}",
                                   field=attribute.name, value=value)


#: The owners of a slot that declares none.
_WORKSPACE = SlotOwners()
_KIND_NAMES = {"user": "a user", "agent": "an agent", "scope": "a workspace (scope)"}


def _whose(owners: SlotOwners) -> str:
    """``"a user"``, ``"an agent (and a workspace, when given)"``...: whose facts a slot holds."""
    kinds = [_KIND_NAMES[k] for k in ("user", "agent") if getattr(owners, k)]
    if not kinds:
        return _KIND_NAMES["scope"] if owners.scope else "nobody"
    scope = " (and a workspace, when given)" if owners.scope else ""
    return " and ".join(kinds) + scope


def _a(kind: str) -> str:
    return f"{'an' if kind[0].lower() in 'aeiou' else 'a'} {kind}"


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _not_any(value: object, kind: str) -> None:
    """Refuse :data:`~ctxslots.ANY` where one owner is needed: stored, it would be a
    user (or agent, or scope) named ``*``; asked, every owner's facts at once."""
    if value is ANY:
        raise InvalidFactError(
            f"{kind}=ANY selects every {kind} in a listing, an export or a search; this "
            f"needs one {kind}", field=kind, value=value)


@attrs.frozen
class Limits:
    """Size limits and slot rules for what a store accepts. A value out of its range
    (a limit under 1, a slot name no slot may have) is an
    :class:`~ctxslots.errors.InvalidArgumentError` when the limits are made.

    Attributes:
        max_value_bytes: Largest value, in UTF-8 bytes (default 4 KiB).
        max_context_bytes: Largest context, in UTF-8 bytes (default 4 KiB).
        max_key_chars: Longest key.
        max_scope_chars: Longest scope name.
        max_tags: Most tags on one fact.
        max_tag_chars: Longest tag.
        max_batch: Most facts in one batch call.
        max_import_line_chars: Longest line an import reads (a JSONL record with
            its history and links, a Markdown line), in characters (bytes for a
            Markdown file): a file with no line break (``/dev/zero``) fails at
            this length instead of filling memory (default 64 Mi).
        strict_slots: Refuse slots not in ``slots``, naming the known ones (the
            default, so a mistyped slot is not stored where no contributor looks);
            ``False`` accepts any well-formed slot name ("free slots").
        slots: The known slots: the built-in three, plus those plugins register
            (:func:`ctxslots.plugins.known_slots`).
        slot_owners: Whose facts each slot holds (the built-in three, plus
            those plugins register, :func:`ctxslots.plugins.slot_owners`); a slot
            not named holds a workspace's facts.
        secrets: What a value (and a context, and a forget's reason) holding a
            credential-shaped string (an API key, a token, a private key, a
            password in a URL or after ``password=``; the catalogue is
            :data:`ctxslots._secrets.PATTERNS`) becomes:
            ``"redact"`` (the default: each one is replaced by ``[redacted
            KIND]``, and the write says so: the flush report, the tool's
            answer, the import report, a warning on the ``ctxslots.secrets``
            logger), ``"refuse"`` (:class:`InvalidFactError`, nothing written)
            or ``"allow"`` (stored as given). Memory is shown to a model on
            every later turn: it must not become a secret store.
    """

    max_value_bytes: int = attrs.field(default=4096, validator=whole(1))
    max_context_bytes: int = attrs.field(default=4096, validator=whole(1))
    max_key_chars: int = attrs.field(default=200, validator=whole(1))
    max_scope_chars: int = attrs.field(default=200, validator=whole(1))
    max_tags: int = attrs.field(default=32, validator=whole(0))
    max_tag_chars: int = attrs.field(default=64, validator=whole(1))
    max_batch: int = attrs.field(default=10_000, validator=whole(1))
    max_import_line_chars: int = attrs.field(default=64 * 1024 * 1024, validator=whole(1))
    strict_slots: bool = attrs.field(default=True, validator=_flag)
    slots: tuple[str, ...] = attrs.field(default=BUILTIN_SLOTS, converter=_names)
    # Compared, not hashed (a dict has no hash): equal limits still hash alike.
    slot_owners: Mapping[str, SlotOwners] = attrs.field(
        factory=lambda: dict(BUILTIN_SLOT_OWNERS), converter=_owners, hash=False)
    secrets: str = attrs.field(default="redact", validator=one_of(SECRET_POLICIES))

    def slot(self, slot: object) -> str:
        """Validate a slot name: lower-case letters, digits, ``_`` or ``-``."""
        if not isinstance(slot, str) or not slot:
            raise InvalidFactError("slot must be a non-empty string", field="slot", value=slot)
        if not _SLOT.fullmatch(slot):
            raise InvalidFactError(
                f"invalid slot name {_short(slot)!r}: use a lower-case letter, then up to "
                "63 lower-case letters, digits, '_' or '-'",
                field="slot",
                value=slot,
            )
        if self.strict_slots and slot not in self.slots:
            raise InvalidFactError(
                f"unknown slot {slot!r} (known: {', '.join(self.slots)})",
                field="slot",
                value=slot,
            )
        return slot

    def scope(self, scope: object) -> str:
        """Validate a scope; return its stored form (``""`` for global).

        :raises InvalidFactError: ``scope`` is malformed, or is :data:`~ctxslots.ANY`
            (which reads call for themselves: a write or a prompt needs one scope).
        """
        if scope is None:
            return ""
        _not_any(scope, "scope")
        if not isinstance(scope, str) or not scope.strip():
            raise InvalidFactError(
                "scope must be None or a non-empty string", field="scope", value=scope
            )
        _check_text(scope, self.max_scope_chars, "scope", "scope",
                    plain=not _CONTROL.search(scope))
        return _name(scope, "scope")

    def owners_of(self, slot: str) -> SlotOwners:
        """Whose facts ``slot`` holds (a workspace's, for a slot that declares nothing)."""
        return self.slot_owners.get(slot, _WORKSPACE)

    def owner(self, value: object, kind: str) -> str:
        """Validate a user or agent id: a non-empty string within
        :attr:`max_scope_chars` characters, without control characters, and not
        :data:`~ctxslots.ANY` (which reads call for themselves)."""
        _not_any(value, kind)
        if not isinstance(value, str) or not value.strip():
            raise InvalidFactError(f"{kind} must be a non-empty string", field=kind, value=value)
        _check_text(value, self.max_scope_chars, kind, kind, plain=not _CONTROL.search(value))
        return _name(value, kind)

    def write_owners(self, slot: str, *, user: object, agent: object, scope: object,
                     default_user: str, default_agent: str) -> tuple[str, str, str]:
        """The stored ``(user, agent, scope)`` of a fact written to ``slot``: the
        owners it names, the store's default user and agent for a slot that has
        them and names none, ``""`` for an owner the slot does not have.

        :raises InvalidFactError: An owner is named that ``slot`` does not have
            (a user for a project fact, a scope for a user fact...), or is malformed.
        """
        owners = self.owners_of(slot)
        for kind, given in (("user", user), ("agent", agent), ("scope", scope)):
            if given is not None and not getattr(owners, kind):
                raise InvalidFactError(
                    f"{slot} facts belong to {_whose(owners)}, not to {_KIND_NAMES[kind]}: "
                    f"leave out {kind}", field=kind, value=given)
        stored_user = "" if not owners.user else (
            default_user if user is None else self.owner(user, "user"))
        stored_agent = "" if not owners.agent else (
            default_agent if agent is None else self.owner(agent, "agent"))
        return stored_user, stored_agent, self.scope(scope)

    def key(self, key: object) -> str:
        """Validate a fact key: non-empty, single line, bounded length."""
        if not isinstance(key, str) or not key.strip():
            raise InvalidFactError("key must be a non-empty string", field="key", value=key)
        _check_text(key, self.max_key_chars, "key", "key", plain=bool(_KEY.fullmatch(key)))
        return _name(key, "key")

    def value(self, value: object) -> str:
        """Validate a value: non-blank text within :attr:`max_value_bytes`; return it
        as stored (with credential-shaped strings redacted, see :attr:`secrets`)."""
        return self.screen(value)[0]

    def screen(self, value: object) -> tuple[str, tuple[str, ...]]:
        """Validate a value and apply the :attr:`secrets` policy.

        :return: The value as stored, and the kinds of credential it held (for a
            report; empty when none, or with ``secrets="allow"``).
        :raises InvalidFactError: The value is malformed, over the limit, or
            holds a credential and the policy is ``"refuse"``.
        """
        stored, kinds = self._apply_secrets(self._checked_value(value), "value")
        # Each secret's [redacted KIND] may be longer than it: the value as stored must
        # fit too, or its export would not import.
        size = len(stored.encode("utf-8"))
        if size > self.max_value_bytes:
            raise InvalidFactError(
                f"value is {size} bytes once redacted ({', '.join(dict.fromkeys(kinds))}), "
                f"over the limit of {self.max_value_bytes}",
                field="value", value=stored)
        return stored, kinds

    def label_without_secret(self, text: str, field: str) -> None:
        """Refuse a label (a key, a tag) holding a credential-shaped string, unless the
        :attr:`secrets` policy is ``"allow"``: a label names a fact and is not redacted
        in place.

        :raises InvalidFactError: ``text`` holds a credential (the message names its
            kind, never the secret).
        """
        if self.secrets == "allow":
            return
        _, kinds = redact(text)
        if kinds:
            raise InvalidFactError(
                f"{field} holds what looks like {_a(kinds[0])}; memory is shown to a model on "
                "every later turn and is no place for secrets", field=field, value="[redacted]")

    def _apply_secrets(self, text: str, field: str) -> tuple[str, tuple[str, ...]]:
        """``text`` as stored under the :attr:`secrets` policy, and the kinds it held."""
        if self.secrets == "allow":
            return text, ()
        stored, kinds = redact(text)
        if kinds and self.secrets == "refuse":
            raise InvalidFactError(
                f"{field} holds what looks like {_a(kinds[0])}; memory is shown to a model "
                "on every later turn and is no place for secrets (Limits.secrets='refuse')",
                field=field, value=stored)
        return stored, kinds

    def _checked_value(self, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise InvalidFactError("value must be a non-empty string", field="value", value=value)
        _no_nul(value, "value")
        _unicode(value, "value")
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > self.max_value_bytes:
            raise InvalidFactError(
                f"value is {size} bytes, over the limit of {self.max_value_bytes}",
                field="value",
                value=value,
            )
        return value

    def context(self, context: object) -> tuple[str | None, tuple[str, ...]]:
        """Validate a memory's context: ``None``, or text within
        :attr:`max_context_bytes` (blank text is no context). The :attr:`secrets`
        policy applies as to a value: a context is stored and exported.

        :return: The context as stored (``None`` for none), and the kinds of
            credential it held.
        """
        if context is None:
            return None, ()
        if not isinstance(context, str):
            raise InvalidFactError("context must be a string or None", field="context",
                                   value=context)
        if not context.strip():
            return None, ()
        _unicode(_no_nul(context, "context"), "context")
        size = len(context.encode("utf-8", "surrogatepass"))
        if size > self.max_context_bytes:
            raise InvalidFactError(
                f"context is {size} bytes, over the limit of {self.max_context_bytes}",
                field="context", value=context)
        stored, kinds = self._apply_secrets(context, "context")
        # Each secret's [redacted KIND] may be longer than it: cut what no longer fits.
        fitted = _fit_bytes(stored, self.max_context_bytes)
        return (fitted if fitted.strip() else None), kinds

    def tags(self, tags: object) -> str:
        """Validate tags; return their stored form (one per line)."""
        if isinstance(tags, str):
            tags = [tags]
        if not isinstance(tags, Iterable):
            raise InvalidFactError("tags must be a sequence of strings", field="tags", value=tags)
        out: dict[str, None] = {}  # insertion-ordered, a set for the repeats
        for tag in tags:
            if not isinstance(tag, str) or not tag.strip():
                raise InvalidFactError("each tag must be a non-empty string", field="tags", value=tag)
            _check_text(tag, self.max_tag_chars, f"tag {_short(tag)!r}", "tags",
                        plain=not _CONTROL.search(tag))
            _unicode(tag, "tags")
            out[tag] = None
        if len(out) > self.max_tags:
            raise InvalidFactError(
                f"{count(len(out), 'tag')}, over the limit of {self.max_tags}", field="tags",
                value=tags,
            )
        return "\n".join(out)

    def confidence(self, confidence: object) -> float:
        """Validate a confidence: a finite number from 0 to 1."""
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
            raise InvalidFactError(
                "confidence must be a number from 0 to 1", field="confidence", value=confidence
            )
        if isinstance(confidence, int) and not 0 <= confidence <= 1:  # float() could overflow
            raise InvalidFactError(
                f"confidence must be from 0 to 1, not {_short(str(confidence))}",
                field="confidence", value=confidence,
            )
        if not math.isfinite(confidence) or not 0.0 <= confidence <= 1.0:
            raise InvalidFactError(
                f"confidence must be from 0 to 1, not {confidence}",
                field="confidence",
                value=confidence,
            )
        return abs(float(confidence))  # -0.0 is kept, and shown, as 0.0

    def source(self, source: object) -> str | None:
        """Validate a source label (free text, at most 1,000 characters)."""
        if source is None:
            return None
        if not isinstance(source, str) or len(source) > 1000:
            raise InvalidFactError(
                "source must be a string of at most 1000 characters", field="source", value=source
            )
        return _unicode(_no_nul(source, "source"), "source")

    def reason(self, reason: object) -> str | None:
        """Validate why a fact was forgotten; return it as stored (see :meth:`screen_reason`)."""
        return self.screen_reason(reason)[0]

    def screen_reason(self, reason: object) -> tuple[str | None, tuple[str, ...]]:
        """Validate why a fact was forgotten (free text, at most 1,000 characters as
        stored, as an import takes it back). The :attr:`secrets` policy applies as to a
        value: a reason is stored in the archive and exported.

        :return: The reason as stored, and the kinds of credential it held.
        """
        if reason is None:
            return None, ()
        if not isinstance(reason, str) or len(reason) > 1000:
            raise InvalidFactError("reason must be None or a string of at most 1000 characters",
                                   field="reason", value=reason)
        stored, kinds = self._apply_secrets(_unicode(_no_nul(reason, "reason"), "reason"),
                                            "reason")
        if len(stored) > 1000:  # each secret's [redacted KIND] may be longer than it
            stored = stored[:999] + "…"
        return stored, kinds

    def score_step(self, amount: object) -> float:
        """Validate how much one reinforce or demote moves a score: a finite
        number from 0 to :data:`MAX_SCORE_STEP`."""
        # NaN fails every comparison, and comparing a huge int never overflows.
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) \
                or not 0 <= amount <= MAX_SCORE_STEP:
            raise InvalidFactError(
                f"amount must be a number from 0 to {MAX_SCORE_STEP:g}, not "
                f"{_short(repr(amount))}", field="amount", value=amount)
        return float(amount)

    def expires_at(self, expires_at: object, now: float | None = None) -> float | None:
        """Validate an expiry: a datetime, Unix seconds, or ``None``; given ``now``, one
        at or before it is refused (the fact would be stored expired, never to be seen)."""
        if expires_at is None:
            return None
        stamp = self.moment(expires_at, "expires_at")
        if now is not None and stamp <= now:
            when = dt.datetime.fromtimestamp(stamp, dt.UTC).isoformat(timespec="seconds")
            raise InvalidFactError(
                f"expires_at must be in the future, not {when}: a fact stored expired is never "
                "seen (leave expires_at out for a fact that does not expire)",
                field="expires_at", value=expires_at)
        return stamp

    def moment(self, value: object, field: str) -> float:
        """Validate a point in time: a datetime or Unix seconds, from 1970 up to
        the year 9999 (what :class:`datetime.datetime` can hold), in whole
        microseconds: a fact's time read back as a datetime (which holds no finer)
        and given again names the very moment stored."""
        if isinstance(value, bool) or not isinstance(value, (dt.datetime, int, float)):
            raise InvalidFactError(f"{field} must be a datetime or Unix seconds, not "
                                   f"{type(value).__name__}", field=field, value=value)
        try:
            stamp = to_timestamp(value)
        except (OverflowError, ValueError) as exc:
            raise InvalidFactError(f"{field} is not a representable time", field=field,
                                   value=value) from exc
        if stamp is None or not math.isfinite(stamp) or not 0.0 <= stamp <= MAX_TIMESTAMP:
            raise InvalidFactError(
                f"{field} must be a time between 1970 and the year 9999 ({TIME_RANGE}), "
                f"not {shown_moment(value)}", field=field, value=value)
        return round(stamp, TIME_DIGITS)
