"""The flusher's wire format: the operations a model sends back, parsed and checked.

The model answers with one JSON object::

    {"operations": [
        {"op": "upsert", "slot": "user", "key": "editor",
         "value": "The user edits code in Neovim.", "confidence": 0.9, "tags": ["tools"],
         "messages": [3]},
        {"op": "forget", "slot": "project", "key": "deploy.day",
         "reason": "The team no longer deploys on Fridays."}
    ]}

Nothing else is accepted. A reply is checked in two steps:

1. **Shape** (:func:`parse_reply`): one JSON object, optionally inside one
   markdown code fence and with prose around it; the top level holds exactly
   ``operations``, a list; each operation has exactly the fields of its kind,
   with the JSON types of :func:`operations_schema` (an upsert's ``messages``,
   the numbers of the messages it was drawn from, may be left out: a reply
   without it is read as before, and its facts get no context). A reply that fails here
   raises :class:`ReplyFormatError`; the flusher shows the model the error and
   asks once more.
2. **Content** (:func:`check_operation`): the slot is known, the key matches
   :data:`KEY_PATTERN`, the value and tags fit the store's limits, the key and tags
   hold no credential (unless the store allows secrets), the confidence is from 0
   to 1. An operation that fails here is rejected with its reason; the others are
   applied.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._json_fields import DECODER, DuplicateFieldError
from ..errors import InvalidFactError, ReplyFormatError
from ..stores import KEY_PATTERN as STORE_KEY_PATTERN
from ..stores import Limits

__all__ = [
    "KEY_PATTERN",
    "MAX_REASON_CHARS",
    "Forget",
    "Operation",
    "ReplyFormatError",
    "Upsert",
    "check_operation",
    "operations_schema",
    "parse_reply",
]

#: What a key looks like: the store's one rule (:data:`ctxslots.stores.KEY_PATTERN`),
#: re-exported here where the reply schema uses it. The extraction prompt still asks
#: for short lower-case identifiers such as ``deploy.day``; that is style, not a rule.
KEY_PATTERN = STORE_KEY_PATTERN

#: Longest ``reason`` of a forget operation.
MAX_REASON_CHARS = 500

#: A reasoning model's thinking at the start of its reply (DeepSeek-R1, Qwen3, QwQ
#: through servers that leave it in the content): drafts of the JSON, braces and all.
_THINKING = re.compile(r"\s*<(think|thinking)>.*?</\1>", re.DOTALL)

#: A line that opens a code fence (an info string may follow) and one that closes it.
_OPENER = re.compile(r"[ \t]*(`{3,}|~{3,})[^\n`]*")
_CLOSER = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*")
_UPSERT_FIELDS = ("op", "slot", "key", "value", "confidence", "tags")
#: Fields an upsert may leave out (the schema still lists them as required, as
#: strict structured output wants; replies written before them stay readable).
_UPSERT_OPTIONAL = ("messages",)
_FORGET_FIELDS = ("op", "slot", "key", "reason")


@attrs.frozen
class Upsert:
    """Write ``value`` under ``slot`` and ``key``, replacing a fact with that key.

    Attributes:
        slot: The memory slot.
        key: The fact's key, unique per slot and scope.
        value: The fact, one self-contained statement.
        confidence: How sure the model is, 0 to 1.
        tags: Free labels.
        messages: The numbers (as the prompt shows them) of the messages the
            fact was drawn from; the flusher stores them as the fact's context.
            Empty: the reply named none, and the fact gets no context.
    """

    slot: str
    key: str
    value: str
    confidence: float
    tags: tuple[str, ...] = ()
    messages: tuple[int, ...] = ()

    op = "upsert"

    def to_dict(self) -> dict[str, Any]:
        """The operation in its wire form (``messages`` only when it names some)."""
        out: dict[str, Any] = {"op": "upsert", "slot": self.slot, "key": self.key,
                               "value": self.value, "confidence": self.confidence,
                               "tags": list(self.tags)}
        if self.messages:
            out["messages"] = list(self.messages)
        return out


@attrs.frozen
class Forget:
    """Archive the fact stored under ``slot`` and ``key``.

    Attributes:
        slot: The memory slot.
        key: The key of the fact to forget.
        reason: Why it is no longer true, recorded in the archive.
    """

    slot: str
    key: str
    reason: str

    op = "forget"

    def to_dict(self) -> dict[str, Any]:
        """The operation in its wire form."""
        return {"op": "forget", "slot": self.slot, "key": self.key, "reason": self.reason}


#: One operation of a reply.
Operation = Upsert | Forget


def operations_schema(slots: Iterable[str] | None = None) -> dict[str, Any]:
    """The JSON schema of a reply, sent to servers as ``response_format``.

    :param slots: When given, ``slot`` is limited to these names (an ``enum``);
        otherwise any string is allowed by the schema and checked afterwards.
    """
    slot: dict[str, Any] = {"type": "string"}
    if slots is not None:
        slot["enum"] = list(slots)
    key = {"type": "string", "pattern": KEY_PATTERN}
    upsert = {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ["upsert"]},
            "slot": slot,
            "key": key,
            "value": {"type": "string"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
            "messages": {"type": "array", "items": {"type": "integer", "minimum": 1}},
        },
        "required": [*_UPSERT_FIELDS, *_UPSERT_OPTIONAL],
        "additionalProperties": False,
    }
    forget = {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ["forget"]},
            "slot": slot,
            "key": key,
            "reason": {"type": "string"},
        },
        "required": list(_FORGET_FIELDS),
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"operations": {"type": "array", "items": {"anyOf": [upsert, forget]}}},
        "required": ["operations"],
        "additionalProperties": False,
    }


def _code_blocks(raw: str) -> list[str]:
    """The contents of the fenced code blocks of ``raw``, in order.

    A block opens on a line of three or more backticks or tildes (an info string may
    follow) and closes at the next line holding that fence alone. Each line is looked at
    once: a model looping on an opening fence writes thousands of them, and searching
    for each one's closing line from scratch took minutes.
    """
    lines = raw.split("\n")
    closers: dict[tuple[str, int], list[int]] = {}  # (character, length): line numbers
    for number, line in enumerate(lines):
        if (closer := _CLOSER.fullmatch(line)) is not None:
            fence = closer.group(1)
            closers.setdefault((fence[0], len(fence)), []).append(number)
    blocks: list[str] = []
    number = 0
    while number < len(lines) - 1:  # an opener needs the line break after it
        end = _closing_line(_OPENER.fullmatch(lines[number]), number, closers)
        if end is None:
            number += 1
            continue
        blocks.append("".join(line + "\n" for line in lines[number + 1:end]))
        number = end + 1
    return blocks


def _closing_line(opener: re.Match[str] | None, number: int,
                  closers: Mapping[tuple[str, int], Sequence[int]]) -> int | None:
    """The first line after ``number`` that closes the fence ``opener`` opened, if any.

    A run of tildes may also be closed by a shorter run of three or more, its other
    tildes read as the info string, the longest run first (as a regular expression
    backtracks)."""
    if opener is None:
        return None
    char, size = opener.group(1)[0], len(opener.group(1))
    fences = [(char, size)] if char == "`" else sorted(
        (fence for fence in closers if fence[0] == char and fence[1] <= size), reverse=True)
    for fence in fences:
        candidates = closers.get(fence, ())
        at = bisect.bisect_right(candidates, number)
        if at < len(candidates):
            return candidates[at]
    return None


def _json_text(answer: str, raw: str) -> str:
    """The part of ``answer`` that should hold the JSON object."""
    fences = _code_blocks(answer)
    if len(fences) > 1:
        raise ReplyFormatError(
            f"the reply holds {len(fences)} code blocks; send exactly one JSON object", raw=raw
        )
    return fences[0] if fences else answer


def _load_object(answer: str, raw: str) -> dict[str, Any]:
    """The one JSON object of ``answer`` (the reply ``raw`` without its thinking)."""
    text = _json_text(answer, raw)
    start = text.find("{")
    if start < 0:
        stripped = text.strip()
        what = "is empty" if not stripped else "holds no JSON object"
        if stripped.startswith("["):
            what = "holds a JSON array, not an object"
        raise ReplyFormatError(f"the reply {what}; send one JSON object", raw=raw)
    before = text[:start].rstrip()
    if before.endswith(("[", ",")) or "}" in before:
        raise ReplyFormatError(
            "the reply holds a JSON array or several values, not an object; send one JSON "
            'object {"operations": [...]}', raw=raw,
        )
    try:
        obj, end = DECODER.raw_decode(text, start)
    except DuplicateFieldError as exc:
        raise ReplyFormatError(
            f"the reply names {exc.args[0]!r} twice in one object, which is ambiguous; "
            "send each field once", raw=raw) from None
    except json.JSONDecodeError as exc:
        raise ReplyFormatError(
            f"the reply is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            + (" (the reply looks cut off)" if _cut_off(text, exc) else ""),
            raw=raw,
        ) from exc
    except RecursionError:
        raise ReplyFormatError("the reply's JSON is nested too deeply to read", raw=raw) from None
    except ValueError as exc:  # e.g. an integer over Python's digit limit
        raise ReplyFormatError(f"the reply's JSON could not be read: {exc}", raw=raw) from None
    after = text[end:]
    if "{" in after or "}" in after:
        raise ReplyFormatError(
            "the reply holds text with braces after the JSON object; send exactly one object",
            raw=raw,
        )
    return obj  # type: ignore[no-any-return]


def _cut_off(text: str, exc: json.JSONDecodeError) -> bool:
    return exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def _shape(index: int, item: object, raw: str) -> Operation:
    where = f"operations[{index}]"
    if not isinstance(item, dict):
        raise ReplyFormatError(f"{where} is {_type_name(item)}, not an object", raw=raw)
    op = item.get("op")
    fields: tuple[str, ...]
    optional: tuple[str, ...] = ()
    if op == "upsert":
        fields, optional = _UPSERT_FIELDS, _UPSERT_OPTIONAL
    elif op == "forget":
        fields = _FORGET_FIELDS
    else:
        raise ReplyFormatError(
            f'{where}.op is {json.dumps(op)[:40]}; it must be "upsert" or "forget"', raw=raw
        )
    missing = [f for f in fields if f not in item]
    extra = sorted(k for k in item if k not in fields and k not in optional)
    if missing or extra:
        parts = ([f"lacks {', '.join(missing)}"] if missing else []) + (
            [f"has unknown fields {', '.join(extra)[:200]}"] if extra else [])
        raise ReplyFormatError(f"{where} ({op}) {' and '.join(parts)}", raw=raw)
    for name in ("slot", "key", "value", "reason"):
        if name in fields and not isinstance(item[name], str):
            raise ReplyFormatError(
                f"{where}.{name} is {_type_name(item[name])}, not a string", raw=raw
            )
    if op == "forget":
        return Forget(slot=item["slot"], key=item["key"], reason=item["reason"])
    confidence, tags = item["confidence"], item["tags"]
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        raise ReplyFormatError(
            f"{where}.confidence is {_type_name(confidence)}, not a number", raw=raw
        )
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ReplyFormatError(f"{where}.tags must be an array of strings", raw=raw)
    numbers = item.get("messages")
    if numbers is None:
        numbers = []
    if not isinstance(numbers, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in numbers):
        raise ReplyFormatError(f"{where}.messages must be an array of message numbers",
                               raw=raw)
    return Upsert(slot=item["slot"], key=item["key"], value=item["value"],
                  confidence=float(confidence), tags=tuple(tags),
                  messages=tuple(dict.fromkeys(numbers)))


def parse_reply(raw: str) -> tuple[Operation, ...]:
    """Read the operations out of a model's reply.

    One JSON object is accepted, alone or inside one markdown code fence, with
    prose before or after it as long as that prose holds no braces or brackets. A
    reasoning model's thinking that opens the reply (``<think>...</think>``) is
    passed over, whatever it holds.

    :param raw: The reply text.
    :raises ReplyFormatError: The reply is empty, not JSON, cut off, holds a
        list or several values, or does not match :func:`operations_schema` in
        shape (unknown or missing fields, wrong JSON types, an unknown ``op``).
        The message says exactly what is wrong, for the model to correct.
    """
    if not isinstance(raw, str):
        raise ReplyFormatError(f"the reply is {type(raw).__name__}, not text", raw=repr(raw))
    thinking = _THINKING.match(raw)
    obj = _load_object(raw[thinking.end():] if thinking else raw, raw)
    if not isinstance(obj, dict):  # pragma: no cover - raw_decode from "{" gives a dict
        raise ReplyFormatError("the reply is not a JSON object", raw=raw)
    extra = sorted(k for k in obj if k != "operations")
    if extra:
        raise ReplyFormatError(
            f"the object has unknown fields {', '.join(extra)[:200]}; only \"operations\" is "
            "allowed", raw=raw,
        )
    if "operations" not in obj:
        raise ReplyFormatError('the object lacks "operations"', raw=raw)
    ops = obj["operations"]
    if not isinstance(ops, list):
        raise ReplyFormatError(f'"operations" is {_type_name(ops)}, not an array', raw=raw)
    return tuple(_shape(i, item, raw) for i, item in enumerate(ops))


def check_operation(op: Operation, *, slots: Sequence[str] | Mapping[str, str],
                    limits: Limits) -> str | None:
    """Check an operation's content; return why it is rejected, or ``None``.

    :param op: An operation read by :func:`parse_reply`.
    :param slots: The slots the flusher may write.
    :param limits: The store's limits (value size, tags).
    """
    if op.slot not in slots:
        return (f"slot {op.slot[:40]!r} is not one of this flush's slots ({', '.join(slots)}); "
                "give the flusher the slots it may write: MemoryFlusher(slots=...), "
                "ctxslots flush --slot")
    try:
        limits.slot(op.slot)  # the store may know fewer slots than the flusher was given
        limits.key(op.key)
        limits.label_without_secret(op.key, "key")  # a model may copy a key into one
    except InvalidFactError as exc:
        return str(exc)
    if isinstance(op, Forget):
        if len(op.reason) > MAX_REASON_CHARS:
            return f"reason is {len(op.reason)} characters, over the limit of {MAX_REASON_CHARS}"
        try:
            limits.reason(op.reason)  # text the archive can hold: no NUL, no lone surrogate
        except InvalidFactError as exc:
            return str(exc)
        return None
    if not math.isfinite(op.confidence) or not 0.0 <= op.confidence <= 1.0:
        return f"confidence must be from 0 to 1, not {op.confidence}"
    try:
        limits.value(op.value)
        limits.tags(op.tags)
        for tag in op.tags:
            limits.label_without_secret(tag, "a tag")
    except InvalidFactError as exc:
        return str(exc)
    return None
