"""Reading Markdown bullets into records for an import, line by line.

A file is read as a stream of lines (only ``\\n`` ends one), so its size is not
limited by memory, nor its number of bullets by anything but time.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ...errors import InvalidFactError
from ..core import StoreCore
from ..owners import Owners
from .jsonl_records import ParsedFact, import_owners
from .markdown_memory import MarkdownReader
from .report import ImportIssue, InvalidImportError

__all__ = ["file_lines", "markdown_source", "read_markdown", "stream_lines"]


def markdown_source(path_or_text: Any) -> tuple[Path | None, str | None]:
    """``(path, None)`` for a file to read, ``(None, text)`` for Markdown text.

    A :class:`~pathlib.Path` (or any path object), or a one-line string naming an
    existing file, is a file; any other string is the text itself.

    :raises InvalidFactError: ``path_or_text`` is neither, or is one line that holds
        no bullet and reads as the name of a file that is not there (a folder, a
        mistyped path): as text it would import nothing.
    """
    if isinstance(path_or_text, os.PathLike) or (
            isinstance(path_or_text, str) and "\n" not in path_or_text
            and path_or_text.strip() and os.path.isfile(path_or_text)):
        return Path(path_or_text), None
    if not isinstance(path_or_text, str):
        raise InvalidFactError("import_markdown needs a path or Markdown text",
                               field="path_or_text", value=path_or_text)
    if _names_a_missing_file(path_or_text):
        raise InvalidFactError(
            f"no file named {path_or_text!r} (a one-line string is read as a file name only "
            "when that file exists; give the Markdown text itself to import text)",
            field="path_or_text", value=path_or_text)
    return None, path_or_text


def _names_a_missing_file(text: str) -> bool:
    """Whether one line of text, with no bullet or heading, reads as a file name."""
    line = text.strip()
    if "\n" in text or not line or line[0] in "-*+#>":
        return False
    return (os.path.isdir(line) or line.lower().endswith((".md", ".markdown", ".txt"))
            or (" " not in line and ("/" in line or os.sep in line)))


def file_lines(path: Path, longest: int) -> Generator[str, None, None]:
    """The lines of a UTF-8 file, read one at a time (a byte-order mark dropped).

    :param longest: The most bytes a line may hold: a longer one (a file with no
        line break) fails before more of it is read.
    :raises InvalidFactError: The file cannot be read.
    :raises InvalidImportError: A line is not UTF-8, or is longer than ``longest``
        (naming it).
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InvalidFactError(f"cannot read {path}: {exc.strerror or exc}",
                               field="path_or_text", value=str(path)) from exc
    with handle:
        yield from stream_lines(handle, longest)


def stream_lines(handle: IO[bytes], longest: int) -> Iterator[str]:
    """The lines of a UTF-8 byte stream (a file, standard input), read one at a time
    (a byte-order mark dropped), as :func:`file_lines` reads a file.

    :raises InvalidImportError: A line is not UTF-8, or is longer than ``longest``
        (naming it).
    """
    # Room for the line break, "\r\n" included: it is no part of the line.
    for number, raw in enumerate(iter(lambda: handle.readline(longest + 2), b""), start=1):
        ending = 2 if raw.endswith(b"\r\n") else 1 if raw.endswith(b"\n") else 0
        if len(raw) - ending > longest:
            raise InvalidImportError(ImportIssue(
                number, f"the line is longer than {longest:,} bytes "
                "(Limits.max_import_line_chars): not a Markdown memory file (a file with "
                "no line breaks?)", "line"))
        try:
            line = raw.removesuffix(b"\n").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidImportError(ImportIssue(
                number, f"not UTF-8 text ({exc.reason})", "encoding")) from None
        yield line.removeprefix("\ufeff") if number == 1 else line


def read_markdown(core: StoreCore, lines: Iterable[str], reader: MarkdownReader, *,
                  owners: Owners, source: str) -> Iterator[ParsedFact | ImportIssue]:
    """Each bullet of ``lines`` as a checked record of ``reader.slot`` and ``owners``,
    or the issue of a bullet the store's limits refuse.

    :raises InvalidFactError: ``owners`` names an owner the slot does not have (a
        user fact's scope is kept, see :func:`import_owners`).
    """
    limits, writer = core.limits, core.writer
    user_id, agent_id, stored_scope = import_owners(
        limits, reader.slot, user=owners.user, agent=owners.agent, scope=owners.scope,
        default_user=writer.default_user, default_agent=writer.default_agent)
    now = core.clock()
    for bullet in reader.bullets(lines):
        try:
            key = None if bullet.key is None else limits.key(bullet.key)
            value, secrets = limits.screen(bullet.value)
            tags = limits.tags(bullet.tags)
            context, context_secrets = limits.context(bullet.context)
        except InvalidFactError as exc:
            yield ImportIssue(bullet.line, str(exc), exc.field, exc.value)
            continue
        row = {"slot": reader.slot, "scope": stored_scope, "user_id": user_id,
               "agent_id": agent_id, "key": key, "value": value,
               "tags": tags, "source": source, "confidence": 1.0, "score": 0.0,
               "created_at": now, "updated_at": now, "observed_at": now,
               "last_accessed": None, "access_count": 0, "expires_at": None,
               "superseded_by": None, "context": context}
        yield ParsedFact(line=bullet.line, id=None, row=row, archived=False, history=(),
                         redacted=tuple(dict.fromkeys((*secrets, *context_secrets))))
