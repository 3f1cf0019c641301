"""Keep stored values on one line, so a value can never open a new part of a prompt.

:func:`bullet` is the jinja2 filter every template applies to data. A value with
newlines, markdown headings, code fences, rules, list markers, chat-template
tags (``<|im_start|>``, ``</system>``, ``[INST]``), control, zero-width or bidi
characters comes out as one line of plain text that reads the same:

- every line break (``\\n``, ``\\r``, ``\\v``, ``\\f``, U+0085, U+2028, U+2029...)
  becomes `` ⏎ ``, and blank lines disappear;
- control characters become spaces; format characters (zero-width spaces and
  joiners, bidi embeddings, overrides and isolates, soft hyphens, BOM) are removed,
  but for a zero-width joiner or non-joiner between two characters that are not
  ASCII, spaces or format characters: there it is part of the text (Persian
  ``می‌خواهم``, Sinhala ``ශ්‍රී``, the emoji ``👨‍👩‍👧``);
- runs of three or more backticks or tildes are backslash-escaped, so no code
  fence can start or end;
- a leading ``#``, ``>``, ``-``, ``*``, ``+``, ``=``, ``|``, ``_``, ``:`` or
  ``1.`` is backslash-escaped, so the value cannot become a heading, a quote, a
  rule or a nested list;
- ``<`` before a letter, ``/``, ``!``, ``?``, ``|`` or ``｜`` becomes ``‹`` and
  ``|>`` (``｜>``) becomes ``|›`` (``｜›``), so no tag or special token
  (``<|im_start|>``, ``</system>``, ``<｜User｜>``) survives; ``[INST]``-style
  markers, and every upper-case one such as ``[TOOL_CALLS]``, get full-width
  brackets.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["bullet", "fence_for", "md_cell", "shown_length_text"]

NEWLINE_MARK = " ⏎ "

_FORMAT_CATEGORIES = frozenset({"Cf", "Cs"})
_FENCE = re.compile(r"(`{3,}|~{3,})")
_LEADING = re.compile(r"^(?:[#>\-*+=|_:]|\d+[.)])")
# The full-width bar too: DeepSeek's special tokens are written <｜User｜>.
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?|\uff5c])")
_SPECIAL_CLOSE = re.compile(r"([|\uff5c])>")
# [INST], [/INST], [SYS] in any case, and every upper-case marker such as Mistral's
# [TOOL_CALLS], [/TOOL_RESULTS] or [SYSTEM_PROMPT].
_INST = re.compile(r"\[(/?(?:(?i:INST|SYS|SYSTEM|USER|ASSISTANT)|[A-Z][A-Z0-9_]*))\]")
_SPACES = re.compile(r"[ \t]+")
# Plain ASCII that needs nothing but the leading-marker check: no control
# character, no fence, tag or bracket character, no double or edge spaces.
_PLAIN = re.compile(r"[^\x00-\x1f\x7f`~<|\[ ]+(?: [^\x00-\x1f\x7f`~<|\[ ]+)*")


def _clean_char(ch: str) -> str:
    if ch == "\t":
        return " "
    cat = unicodedata.category(ch)
    if cat == "Cc":
        return " "
    if cat in _FORMAT_CATEGORIES:
        return ""
    return ch


#: The zero-width non-joiner and joiner: letters of the text in Persian (``می‌خواهم``),
#: Indic scripts (``ශ්‍රී``) and emoji sequences (``👨‍👩‍👧``), kept between two such characters.
_JOINERS = frozenset("\u200c\u200d")


def _joins(ch: str) -> bool:
    """Whether a joiner beside ``ch`` may be part of the text: ``ch`` is no ASCII (so no
    tag, marker or special token is made of it), space, control or format character."""
    return not ch.isascii() and not ch.isspace() and unicodedata.category(ch) not in (
        "Cc", *_FORMAT_CATEGORIES)


def _cleaned(line: str) -> str:
    """``line`` with its control characters as spaces and its format characters
    removed, but for a joiner between two characters :func:`_joins` accepts."""
    out = []
    last = len(line) - 1
    for i, ch in enumerate(line):
        if ch in _JOINERS and 0 < i < last and _joins(line[i - 1]) and _joins(line[i + 1]):
            out.append(ch)
        else:
            out.append(_clean_char(ch))
    return "".join(out)


def _one_line(text: str) -> str:
    parts = []
    for line in text.splitlines():
        if not (line.isascii() and line.isprintable()):
            line = _cleaned(line)
        cleaned = _SPACES.sub(" ", line).strip()
        if cleaned:
            parts.append(cleaned)
    return NEWLINE_MARK.join(parts)


# The format characters (zero-width spaces and joiners, bidi controls, soft hyphens,
# BOM) the filter removes, as ranges (searched several times faster than a class of
# single characters), written out: reading them from unicodedata at import takes 0.2 s.
_FORMAT = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]")
_RUNS = re.compile(r"\s{2,}")


def shown_length_text(value: str) -> str:
    """``value`` as long as :func:`bullet` shows it, near enough to estimate its tokens:
    runs of spaces one, format characters gone (cheap: no other escape is made)."""
    if "  " in value or "\t" in value or "\n" in value:
        value = _RUNS.sub(" ", value)
    if not value.isascii():
        value = _FORMAT.sub("", value)
    return value


def bullet(value: object) -> str:
    """Return ``value`` as one line of text that cannot open a new section.

    ``None`` becomes the empty string; other non-strings are formatted with
    ``str()``.
    """
    text = "" if value is None else str(value)
    if text.isascii() and _PLAIN.fullmatch(text):
        return "\\" + text if _LEADING.match(text) else text
    return _escape(text)


def _escape(text: str) -> str:
    text = _one_line(text)
    if not text:
        return ""
    text = _FENCE.sub(lambda m: "".join("\\" + ch for ch in m.group()), text)
    text = _TAG_OPEN.sub("‹", text)
    text = _SPECIAL_CLOSE.sub(r"\1›", text)
    text = _INST.sub(r"［\1］", text)
    if _LEADING.match(text):
        text = "\\" + text
    return text


def md_cell(value: object) -> str:
    """:func:`bullet`, with ``|`` escaped, for a markdown table cell."""
    return bullet(value).replace("|", "\\|")


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text`` (at least 3)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)
