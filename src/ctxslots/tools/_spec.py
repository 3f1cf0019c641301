"""One definition per tool: its JSON schemas in both formats and argument checking come from it.

Keeping the schema and the checks on one definition means a model is never told
one thing by the schema and refused for another by the dispatcher.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._json_fields import DECODER, DuplicateFieldError
from .._readable import count
from ..errors import ArgumentError

__all__ = ["ArgumentError", "Param", "ToolSpec", "parse_arguments", "whole"]

KINDS = ("string", "integer", "string_list")

#: The longest arguments text :func:`parse_arguments` decodes (characters), unless the
#: tool's own arguments may take more (:meth:`ToolSpec.longest_arguments`).
MAX_ARGUMENTS_CHARS = 65_536
#: The most characters of JSON text one character of an argument takes (an escaped
#: character beyond the BMP: ``\ud83d\ude00``), and room for the names and punctuation.
_ESCAPED_CHARS = 12
_SYNTAX_CHARS = 4096


def whole(pattern: str) -> str:
    """``pattern`` made to match a whole string, as a JSON Schema ``pattern`` (which may
    match anywhere in it): anchored at both ends, a leading ``^`` or trailing ``$`` of
    its own dropped. The ``(?!\n)`` keeps Python's ``$``, which also matches before a
    final line break, to the end of the string, as ECMA-262's ``$`` is."""
    body = pattern.removeprefix("^").removesuffix("$")
    return f"^(?:{body})$(?!\\n)"


@attrs.frozen
class Param:
    """One argument of a tool.

    Attributes:
        name: The argument name.
        kind: ``"string"``, ``"integer"`` or ``"string_list"``.
        description: What the model should put there.
        required: Whether the call must give it.
        minimum: Smallest integer accepted.
        maximum: Largest integer accepted.
        max_length: Longest string (characters) or list (items).
        slot_enum: The value must be one of the tool set's slots.
        pattern: A regular expression a string must match, as JSON Schema reads one
            (found anywhere in the string: see :func:`whole`); also in the schema.
        pattern_rule: The pattern in words, for the error and the strict schema.
        item_max_length: Longest item of a list of strings (characters).
        item_pattern: A regular expression each item of a list must match, as
            ``pattern``.
        item_rule: ``item_pattern`` in words.
        slot_notes: With ``slot_enum``, what each slot holds, as ``(slot, note)`` pairs:
            the description then names every slot offered, and only those, each with
            its note (a slot without one: "facts of the SLOT slot").
    """

    name: str
    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    description: str
    required: bool = False
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None
    slot_enum: bool = False
    pattern: str | None = None
    pattern_rule: str = "text matching its pattern"
    item_max_length: int | None = None
    item_pattern: str | None = None
    item_rule: str = "text matching its pattern"
    slot_notes: tuple[tuple[str, str], ...] = ()

    def schema(self, slots: Sequence[str], *, strict: bool = False) -> dict[str, Any]:
        """This argument's JSON Schema.

        :param slots: The values a ``slot_enum`` argument may take.
        :param strict: Keep to the subset of JSON Schema that OpenAI's strict mode
            accepts: an optional argument becomes nullable (``null`` meaning "not
            given"), and a string's length limit moves into the description
            (``maxLength`` is outside that subset; the dispatcher still applies it).
        """
        out: dict[str, Any]
        description = self._slot_words(slots) if self.slot_notes else self.description
        if self.kind == "integer":
            out = {"type": "integer"}
            if self.minimum is not None:
                out["minimum"] = self.minimum
            if self.maximum is not None:
                out["maximum"] = self.maximum
        elif self.kind == "string":
            out = {"type": "string"}
            if self.slot_enum:
                out["enum"] = list(slots)
            if self.pattern is not None:
                if strict:  # outside OpenAI's strict subset, like maxLength
                    description = f"{description} It must be {self.pattern_rule}."
                else:
                    out["pattern"] = self.pattern
            if self.max_length is not None:
                if strict:
                    description = f"{description} At most {self.max_length} characters."
                else:
                    out["maxLength"] = self.max_length
        else:
            items: dict[str, Any] = {"type": "string"}
            if strict and (self.item_pattern is not None or self.item_max_length is not None):
                description = f"{description} Each {self._item_words()}."
            else:
                if self.item_pattern is not None:
                    items["pattern"] = self.item_pattern
                if self.item_max_length is not None:
                    items["maxLength"] = self.item_max_length
            out = {"type": "array", "items": items}
            if self.max_length is not None:
                out["maxItems"] = self.max_length
        if strict and not self.required:
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
            description = f"{description} null: not given."
        out["description"] = description
        return out

    def _slot_words(self, slots: Sequence[str]) -> str:
        notes = dict(self.slot_notes)
        return "; ".join(f"{slot}: {notes.get(slot, f'facts of the {slot} slot').rstrip('.')}"
                         for slot in slots) + "."

    def _item_words(self) -> str:
        rule = self.item_rule if self.item_pattern is not None else "text"
        most = (f"at most {self.item_max_length} characters, "
                if self.item_max_length is not None else "")
        return f"{most}{rule}"

    def check(self, value: Any, slots: Sequence[str]) -> Any:
        """Return ``value`` if it fits; raise :class:`ArgumentError` naming the argument.

        A whole number written as a float (``3.0``) is an integer, as JSON Schema has it.
        """
        if self.kind == "integer":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentError(f"'{self.name}' must be an integer, not {_shown(value)}")
            if self.minimum is not None and value < self.minimum:
                raise ArgumentError(f"'{self.name}' must be at least {self.minimum}, not {value}")
            if self.maximum is not None and value > self.maximum:
                raise ArgumentError(f"'{self.name}' must be at most {self.maximum}, not {value}")
            return value
        if self.kind == "string":
            if not isinstance(value, str):
                raise ArgumentError(f"'{self.name}' must be a string, not {_shown(value)}")
            _check_unicode(self.name, value)
            if self.slot_enum and value not in slots:
                raise ArgumentError(f"unknown {self.name} {json.dumps(value, ensure_ascii=False)} "
                                    f"(known: {', '.join(slots)})")
            if self.pattern is not None and not re.search(self.pattern, value):
                raise ArgumentError(f"'{self.name}' must be {self.pattern_rule}, not "
                                    f"{json.dumps(value, ensure_ascii=False)}")
            if self.max_length is not None and len(value) > self.max_length:
                raise ArgumentError(f"'{self.name}' must be at most {self.max_length} characters, "
                                    f"not {len(value)}")
            return value
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ArgumentError(f"'{self.name}' must be a list of strings, not {_shown(value)}")
        for item in value:
            _check_unicode(self.name, item)
            if (self.item_pattern is not None and not re.search(self.item_pattern, item)) \
                    or (self.item_max_length is not None and len(item) > self.item_max_length):
                raise ArgumentError(f"each of '{self.name}' must be {self._item_words()}; not "
                                    f"{json.dumps(item, ensure_ascii=False)[:80]}")
        if self.max_length is not None and len(value) > self.max_length:
            raise ArgumentError(f"'{self.name}' must have at most "
                                f"{count(self.max_length, 'item')}, "
                                f"not {len(value)}")
        return list(value)


def _check_unicode(name: str, text: str) -> None:
    # JSON may carry "\ud800" escapes: lone surrogates that SQLite cannot store.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ArgumentError(f"'{name}' is not valid Unicode text (it holds a lone "
                            "surrogate)") from None


def _shown(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value), "a value")
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except RecursionError:  # a mapping's argument nested deeper than Python can encode
        return f"{kind} (nested too deeply to show)"
    return f"{kind} ({text[:40]}{'…' if len(text) > 40 else ''})"


@attrs.frozen
class ToolSpec:
    """A tool: its name, what it does, its arguments, and hints for clients that show tools.

    Attributes:
        name: The name a model calls.
        description: What the tool does, for the model.
        params: Its arguments, in order.
        title: A short human-readable name (MCP ``title``).
        read_only: It changes nothing a person would call state (MCP ``readOnlyHint``).
        destructive: It may remove what was stored (MCP ``destructiveHint``).
        idempotent: A second identical call has no further effect (MCP ``idempotentHint``).
    """

    name: str
    description: str
    params: tuple[Param, ...]
    title: str = ""
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    def longest_arguments(self) -> int:
        """The longest arguments text :func:`parse_arguments` decodes for this tool:
        :data:`MAX_ARGUMENTS_CHARS`, or what its arguments at their longest take written
        with every character escaped, when that is more."""
        chars = sum((p.max_length or 0) * (p.item_max_length or 0) if p.kind == "string_list"
                    else p.max_length or 0 for p in self.params if p.kind != "integer")
        return max(MAX_ARGUMENTS_CHARS, chars * _ESCAPED_CHARS + _SYNTAX_CHARS)

    def annotations(self) -> dict[str, Any]:
        """The MCP tool annotations (hints for clients; every tool works on a local store only)."""
        return {"title": self.title or self.name, "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive, "idempotentHint": self.idempotent,
                "openWorldHint": False}

    def input_schema(self, slots: Sequence[str], *, strict: bool = False) -> dict[str, Any]:
        """The arguments as one JSON Schema object.

        :param strict: OpenAI's strict form: every argument listed in ``required``,
            the optional ones nullable (see :meth:`Param.schema`).
        """
        return {
            "type": "object",
            "properties": {p.name: p.schema(slots, strict=strict) for p in self.params},
            "required": [p.name for p in self.params if strict or p.required],
            "additionalProperties": False,
        }

    def openai(self, slots: Sequence[str], *, strict: bool = False) -> dict[str, Any]:
        """The OpenAI chat-completions ``tools`` entry (with ``"strict": true`` when strict)."""
        function: dict[str, Any] = {"name": self.name, "description": self.description,
                                    "parameters": self.input_schema(slots, strict=strict)}
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def responses(self, slots: Sequence[str], *, strict: bool = True) -> dict[str, Any]:
        """The OpenAI Responses API ``tools`` entry (a flat function tool)."""
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.input_schema(slots, strict=strict), "strict": strict}

    def anthropic(self, slots: Sequence[str]) -> dict[str, Any]:
        """The Anthropic Messages API ``tools`` entry."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.input_schema(slots)}


def parse_arguments(spec: ToolSpec, arguments: str | Mapping[str, Any] | None,
                    slots: Sequence[str]) -> dict[str, Any]:
    """Decode and check a call's arguments (a JSON text or a mapping).

    ``null`` for an optional argument means "not given".

    :raises ArgumentError: Invalid JSON, not an object, a missing, unknown or
        ill-typed argument, or a value out of range.
    """
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        data: Any = {}
    elif isinstance(arguments, str):
        longest = spec.longest_arguments()
        if len(arguments) > longest:
            raise ArgumentError(f"the arguments are too long ({len(arguments)} characters; "
                                f"at most {longest})")
        try:
            data = DECODER.decode(arguments)
        except DuplicateFieldError as exc:
            raise ArgumentError(f"the arguments name {exc.args[0]!r} twice; name each "
                                "argument once") from None
        except json.JSONDecodeError as exc:
            # "Unterminated string starting at" (arguments cut off) ends with its own "at".
            raise ArgumentError(f"the arguments are not valid JSON "
                                f"({exc.msg.removesuffix(' at')} at position {exc.pos})"
                                ) from None
        except (ValueError, RecursionError) as exc:
            # Python refuses integers over 4,300 digits (ValueError) and very deep nesting.
            reason = ("nested too deeply" if isinstance(exc, RecursionError)
                      else "a number has too many digits")
            raise ArgumentError(f"the arguments are not valid JSON ({reason})") from None
    else:
        data = arguments
    if not isinstance(data, Mapping):
        raise ArgumentError(f"the arguments must be a JSON object, not {_shown(data)}")
    known = {p.name: p for p in spec.params}
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise ArgumentError(f"unknown argument(s) {', '.join(repr(u) for u in unknown)}; "
                            f"{spec.name} takes {', '.join(known) or 'no arguments'}")
    out: dict[str, Any] = {}
    for param in spec.params:
        value = data.get(param.name)
        if value is None:
            if param.required:
                raise ArgumentError(f"missing required argument '{param.name}'")
            continue
        out[param.name] = param.check(value, slots)
    return out
