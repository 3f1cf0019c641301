"""The Markdown memory format: facts as bullets, and bullets back into facts.

Pure text functions, no store. One file holds one slot of one scope::

    # user

    - **editor**: The user edits code in Helix. `#tools`
    - Prefers short answers.
      A second line stays inside its bullet, indented by two spaces.
    - **sister**: The user's sister Ines moved to Lisbon in May.
      > user: By the way, my sister Ines moved to Lisbon in May.

Reading accepts the common ``MEMORY.md`` shape too: headings become tags of
the bullets under them, prose is ignored and counted. Two details make any
value round-trip: tags are trailing code spans starting with ``#``, and an
empty HTML comment (``<!---->``, invisible when rendered) marks a value whose
own text would otherwise be read as a key or as tags. A fact's context (the
words it was drawn from: searched, never shown in a prompt) is the quote that
ends its bullet, ``> `` before each line; a line of the value that starts with
``>`` carries the mark, so only the closing quote is ever read as context.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence

import attrs

from ...errors import InvalidImportError
from .jsonl_records import FORMAT
from .report import ImportIssue

__all__ = [
    "Bullet",
    "MarkdownReader",
    "ParsedMarkdown",
    "heading_scope",
    "parse_markdown",
    "render_bullet",
    "render_file",
    "scope_dirname",
    "split_tags",
    "title",
    "titled_scope",
]

#: Marks a value that would otherwise read as keyed (at the start) or tagged (at the end).
MARK = "<!---->"

#: A bullet: its marker followed by a space or a tab (an editor set to indent with tabs).
_BULLET = re.compile(r"^( {0,3})[-*+](?:[ \t](.*))?$")
#: An ATX heading: its run of ``#`` (the level), then its text, as :func:`_heading_text`
#: reads it. No two parts of the pattern can take the same characters, so a line of any
#: length is read in one pass (a lazy text before an optional closing run took time
#: growing with the square of the spaces in a line).
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
#: A code fence's opening run (a backtick one with no backtick after it: "```a`" is code
#: inside a line, not a fence, as in CommonMark).
_FENCE = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")
#: An HTML comment opening outside a bullet (``<!-- ... -->``, on one line or several).
_COMMENT = re.compile(r"^ {0,3}<!--")
_THEMATIC = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_KEYED = re.compile(r"\*\*([^\n]+?)\*\*:(?: |(?=\n)|$)")
#: A line CommonMark may read as a link reference definition (``[x]: url``,
#: which renders as nothing and makes ``[x]`` a live link) or a footnote.
_LINK_DEFINITION = re.compile(r" {0,3}\[(?:[^\[\]\\]|\\.)+\]:")
#: The title :func:`title` writes: ``# slot`` or ``# slot (scope: NAME)``.
_TITLE = re.compile(r"# ([a-z][a-z0-9_-]{0,63})(?: \(scope: (.*)\))?")
_SAFE_DIR_CHARS = re.compile(r"[A-Za-z0-9_\-]")


# -- tags as trailing code spans --------------------------------------------


def _tag_span(tag: str) -> str:
    runs = [len(r) for r in re.findall(r"`+", tag)]
    if not runs:
        return f"`#{tag}`"
    fence = "`" * (max(runs) + 1)
    return f"{fence} #{tag} {fence}"


def _last_span(text: str, end: int) -> tuple[int, str] | None:
    """``(end of the text before it, tag)`` when ``text[:end]`` ends with whitespace and a
    tag span. Works on indexes, never on copies, so reading many tags takes linear time."""
    ticks = 0
    while ticks < end and text[end - 1 - ticks] == "`":
        ticks += 1
    if ticks == 0:
        return None
    fence = "`" * ticks
    if ticks == 1:
        start = text.rfind("`#", 0, end - 1)
        inner = text[start + 2:end - 1] if start >= 0 else ""
        if start < 0 or not inner or "`" in inner:
            return None
    else:
        if not text.endswith(" " + fence, 0, end):
            return None
        start = text.rfind(fence + " #", 0, end - ticks)
        if start < 0:
            return None
        inner = text[start + ticks + 2:end - ticks - 1]
        if not inner or fence in inner:
            return None
    if start == 0 or not text[start - 1].isspace():
        return None
    before = start
    while before > 0 and text[before - 1].isspace():
        before -= 1
    return before, inner


def split_tags(text: str) -> tuple[str, list[str]]:
    """Split a bullet's text into its value and its trailing tags."""
    end = len(text.rstrip())
    tags: list[str] = []
    while (found := _last_span(text, end)) is not None and found[0] > 0:
        end, tag = found
        tags.append(tag)
    tags.reverse()
    return text[:end].removesuffix(MARK), tags


def _with_tags(value: str, tags: Sequence[str]) -> str:
    body = value.rstrip()
    if body.endswith(MARK) or split_tags(body) != (body, []):
        body += MARK
    if not tags:
        return body
    # After a multi-line value the tags get a line of their own, so they never
    # sit on a value's last line (which may close a code fence).
    return body + ("\n" if "\n" in body else " ") + " ".join(_tag_span(t) for t in tags)


# -- writing ----------------------------------------------------------------


def render_bullet(value: str, *, key: str | None = None, tags: Sequence[str] = (),
                  context: str | None = None) -> str:
    """One fact as a bullet; continuation lines indented by two spaces, the context (if
    any) as a quote closing the bullet."""
    if key is not None:
        text = f"**{key}**: " + _with_tags(value, tags)
    else:
        text = _with_tags(value, tags)
        if text.startswith(MARK) or _KEYED.match(text) or _LINK_DEFINITION.match(text) \
                or _THEMATIC.match("- " + text.split("\n", 1)[0]):
            text = MARK + text
    first, *rest = text.split("\n")
    lines = [f"- {first}" if first else "-"]
    lines.extend(f"  {_shielded(line)}" if line else "" for line in rest)
    if context:
        lines.extend(f"  >{' ' + line if line else ''}" for line in context.split("\n"))
    return "\n".join(lines)


def _shielded(line: str) -> str:
    """A continuation line that a viewer would read as a link definition, or a reader as
    the context's quote, marked so it shows as text (the mark is read back off any line
    that starts with it)."""
    return MARK + line if line.startswith(MARK) or _LINK_DEFINITION.match(line) \
        or _is_quote(line) else line


def _is_quote(line: str) -> bool:
    return line.lstrip(" ").startswith(">")


def title(slot: str, scope: str | None) -> str:
    """The heading line of a slot's file: ``# slot`` or ``# slot (scope: NAME)``."""
    return f"# {slot}" if scope is None else f"# {slot} (scope: {scope})"


def titled_scope(line: str, slot: str) -> str | None:
    """The scope that ``line``, a file's first, names when it is the title of a
    scoped file of ``slot`` (``# slot (scope: NAME)``, see :func:`title`), else ``None``."""
    parts = _title_parts(line.removeprefix("\ufeff"))
    return parts[1] or None if parts is not None and parts[0] == slot else None


def heading_scope(lines: Iterable[str], slot: str) -> str | None:
    """The scope named by the title of a file of ``slot`` (``# slot (scope: NAME)``, see
    :func:`title`): its first heading above any bullet, outside code blocks and HTML
    comments, so a note, a comment or a code block a person added above the title is
    passed over; ``None`` when that heading is no such title, or a bullet comes first."""
    fence: str | None = None  # as in MarkdownReader.bullets
    comment = False
    for number, raw in enumerate(lines):
        line = raw.removesuffix("\r").removeprefix("\ufeff" if number == 0 else "")
        if fence is not None:
            fence = None if _closes_fence(line, fence) else fence
        elif comment:
            comment = "-->" not in line
        elif _BULLET.match(line) is not None and _THEMATIC.match(line) is None:
            return None
        elif _HEADING.match(line) is not None:
            return titled_scope(line.lstrip(" "), slot)
        elif (opened := _FENCE.match(line)) is not None:
            fence = opened.group(1)
        elif (opened := _COMMENT.match(line)) is not None:
            comment = "-->" not in line[opened.end() - 2:]
    return None


def _title_parts(line: str) -> tuple[str, str | None] | None:
    """The slot and scope (``None``: no scope named) of a title :func:`title` writes,
    or ``None`` when ``line`` is no such title."""
    found = _TITLE.fullmatch(line.rstrip())
    return None if found is None else (found.group(1), found.group(2))


def render_file(slot: str, scope: str | None, bullets: Iterable[str]) -> str:
    """A slot's file: its title, a blank line, then one bullet per fact."""
    body = "\n".join(bullets)
    return f"{title(slot, scope)}\n\n{body}\n" if body else f"{title(slot, scope)}\n"


def scope_dirname(scope: str) -> str:
    """A file-system-safe directory name for a scope (percent-encoded, bounded)."""
    name = "".join(c if _SAFE_DIR_CHARS.fullmatch(c) else
                   "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in scope)
    if len(name) <= 100:
        return name
    cut = name[:60]
    cut = cut[: cut.rfind("%")] if "%" in cut[-2:] else cut
    return f"{cut}~{hashlib.sha256(scope.encode('utf-8')).hexdigest()[:12]}"


# -- reading ----------------------------------------------------------------


@attrs.frozen
class Bullet:
    """One fact read from Markdown.

    Attributes:
        line: The line its bullet starts on.
        key: Its key (from ``**key**: value``), or ``None``.
        value: Its text, continuation lines included.
        tags: Heading tags, then its own tags, without repeats.
        context: The quote that ends it (``> `` lines), or ``None``.
    """

    line: int
    key: str | None
    value: str
    tags: tuple[str, ...]
    context: str | None = None


@attrs.frozen
class ParsedMarkdown:
    """What :func:`parse_markdown` found.

    Attributes:
        bullets: The facts, in file order.
        ignored_lines: Non-blank lines that belong to no bullet (prose, code
            blocks outside bullets, rules, tables).
    """

    bullets: tuple[Bullet, ...]
    ignored_lines: int


def _heading_text(text: str) -> str:
    """A heading's text without the spaces and tabs that end it, nor a closing run of ``#``
    after a space or a tab (``## Build ##`` is ``Build``)."""
    text = text.rstrip(" \t")
    body = text.rstrip("#")
    return body.rstrip(" \t") if body != text and body != body.rstrip(" \t") else text


def _heading_tag(text: str, max_chars: int) -> str:
    text = _heading_text(text).strip().strip("*_`").strip().lower()
    return "-".join(text.split())[:max_chars].strip("-")


def _jsonl_header(line: str) -> bool:
    """Whether ``line`` is the header of a JSONL export (``{"format": "ctxslots-facts", ...}``):
    read as Markdown, such a file is prose and would import nothing."""
    if not line.lstrip().startswith("{"):
        return False
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def _is_title(line: str, slot: str) -> bool:
    parts = _title_parts(line)
    return parts is not None and parts[0] == slot


def _scope_words(scope: str | None) -> str:
    """A title's scope in words: ``scope 'repo'``, or ``no scope`` for a global file."""
    return "no scope" if scope is None else f"scope {scope!r}"


def _other_title(line: str, slot: str, slots: Iterable[str]) -> str | None:
    """The slot whose export title ``line`` is, when that is another slot than ``slot``:
    a known slot's ``# name``, or any ``# name (scope: ...)``."""
    parts = _title_parts(line)
    if parts is None or parts[0] == slot:
        return None
    return parts[0] if parts[1] is not None or parts[0] in slots else None


def _closes_fence(line: str, fence: str) -> bool:
    """Whether ``line`` closes the code fence opened by ``fence`` (its backticks or
    tildes): a run of the same character at least as long, indented by at most three
    spaces (more makes it a line of the code), and nothing after it."""
    run = line.strip()
    return len(run) >= len(fence) and run == fence[0] * len(run) \
        and len(line) - len(line.lstrip(" ")) <= 3


def _split_context(lines: list[str]) -> tuple[list[str], str | None]:
    """The bullet's lines without the quote that ends them, and the quote's text."""
    end = len(lines)
    while end > 1 and _is_quote(lines[end - 1]):
        end -= 1
    if end == len(lines):
        return lines, None
    quoted = [q.lstrip(" ")[1:] for q in lines[end:]]
    context = "\n".join(q.removeprefix(" ") for q in quoted)
    while end > 1 and not lines[end - 1].strip():  # blank lines before the quote
        end -= 1
    return lines[:end], context


def _bullet(line: int, lines: list[str], headings: list[str]) -> Bullet:
    lines, context = _split_context(lines)
    text = "\n".join([lines[0], *(line.removeprefix(MARK) for line in lines[1:])])
    key = None
    if text.startswith(MARK):
        text = text[len(MARK):]
    elif (keyed := _KEYED.match(text)) is not None:
        key, text = keyed.group(1), text[keyed.end():]
    value, own = split_tags(text)
    tags = list(dict.fromkeys([*headings, *own]))
    return Bullet(line=line, key=key, value=value, tags=tuple(tags), context=context)


def parse_markdown(text: str, *, slot: str, max_tag_chars: int = 64) -> ParsedMarkdown:
    """Read bullets, keys, tags and heading tags from Markdown text.

    A ``-``, ``*`` or ``+`` bullet (the marker, then a space or a tab) starts a
    fact; indented lines after it (blank lines between them included) continue it,
    with the bullet's indentation removed. Headings of any level become tags of the
    bullets under them (lower-case, spaces to ``-``), except the title
    :func:`render_file` writes for ``slot``. Everything else is prose, code blocks
    and HTML comments outside bullets included, with any bullet inside them.
    """
    reader = MarkdownReader(slot, max_tag_chars)
    # Only "\n" ends a line: a value may hold other line separators (U+2028...).
    bullets = tuple(reader.bullets(text.split("\n")))
    return ParsedMarkdown(bullets=bullets, ignored_lines=reader.ignored_lines)


@attrs.define
class MarkdownReader:
    """Reads bullets from lines as they come (a file of any size, in constant memory).

    Attributes:
        slot: The slot whose title (see :func:`title`) is no heading tag.
        max_tag_chars: Longest heading tag.
        other_slots: The slots whose title (``# name``) in the lines means they
            hold another slot's facts, as a one-file export of several slots does:
            reading stops there (so does any ``# name (scope: ...)`` of another slot,
            and a title of this slot naming another scope than its first title did).
        ignored_lines: Non-blank lines that belonged to no bullet, so far.
    """

    slot: str
    max_tag_chars: int = 64
    other_slots: frozenset[str] = frozenset()
    ignored_lines: int = 0

    def bullets(self, lines: Iterable[str]) -> Iterator[Bullet]:
        """The bullets of ``lines`` (without their ``\n``; a trailing ``\r`` is dropped).

        :raises InvalidImportError: A line is the title of another slot's facts
            (see :attr:`other_slots`), or of this slot's facts of another scope than
            its first title's: they would be read into this slot and scope; or the first
            line is the header of a JSONL export, whose facts would all be prose.
        """
        headings: list[str] = []  # one entry per heading level, "" for no tag
        current: tuple[int, int, list[str]] | None = None  # start line, indent, lines
        pending: list[str] = []  # blank lines inside a bullet, kept if it goes on after them
        fence: str | None = None  # the opening run of a code fence outside a bullet
        comment = False  # inside an HTML comment outside a bullet
        first = True  # no line but blank ones read yet
        titled: tuple[str | None] | None = None  # the scope the slot's first title names
        number = 0
        for number, raw in enumerate(lines, start=1):
            line = raw.removesuffix("\r")
            if fence is not None:
                self.ignored_lines += bool(line.strip())
                if _closes_fence(line, fence):
                    fence = None
                continue
            if comment:
                self.ignored_lines += bool(line.strip())
                comment = "-->" not in line
                continue
            indent = len(line) - len(line.lstrip(" "))
            if not line.strip():
                if current is not None:
                    pending.append(line[min(indent, current[1]):])
                continue
            starts, first = first, False
            bullet = _BULLET.match(line) if not _THEMATIC.match(line) else None
            if current is not None and (line.startswith("\t") or indent > 0) and not (
                    bullet is not None and indent < current[1]):
                strip = 1 if line.startswith("\t") else min(indent, current[1])
                current[2].extend([*pending, line[strip:]])
                pending = []
                continue
            pending = []
            if current is not None:
                yield _bullet(current[0], current[2], [h for h in headings if h])
                current = None
            if bullet is not None:
                current = (number, len(bullet.group(1)) + 2, [bullet.group(2) or ""])
            elif (heading := _HEADING.match(line)) is not None:
                level = len(heading.group(1))
                other = _other_title(line, self.slot, self.other_slots)
                if other is not None:
                    raise InvalidImportError(ImportIssue(
                        number, f"{line.strip()!r} is the title of the {other} slot's facts, "
                        f"which would be read into the {self.slot} slot (a one-file export "
                        "of several slots?): export to a folder (-o DIR/) and import each "
                        "slot's file", "title", line))
                own = _title_parts(line) if _is_title(line, self.slot) else None
                if own is not None and titled is not None and titled != own[1:]:
                    raise InvalidImportError(ImportIssue(
                        number, f"{line.strip()!r} is the title of the {self.slot} facts of "
                        f"{_scope_words(own[1])}, after those of {_scope_words(titled[0])}: "
                        "they would all be read into one scope (a one-file export of several "
                        "scopes?): export to a folder (-o DIR/) and import each scope's file",
                        "title", line))
                titled = titled or (None if own is None else own[1:])
                tag = "" if own is not None else _heading_tag(
                    heading.group(2) or "", self.max_tag_chars)
                headings = [*headings[: level - 1], *[""] * (level - 1 - len(headings)), tag]
            else:
                if starts and _jsonl_header(line):
                    raise InvalidImportError(ImportIssue(
                        number, "the header of a JSONL export, not Markdown: read as "
                        "Markdown, none of its facts is a bullet; import it as JSONL "
                        "(import_jsonl, ctxslots import --format jsonl)", "format", line))
                self.ignored_lines += 1
                if (opened := _FENCE.match(line)) is not None:
                    fence = opened.group(1)
                elif (opened := _COMMENT.match(line)) is not None:
                    # "<!-->" and "<!--->" close where they open, as in CommonMark.
                    comment = "-->" not in line[opened.end() - 2:]
        if current is not None:
            yield _bullet(current[0], current[2], [h for h in headings if h])
