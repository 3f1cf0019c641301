"""Reading a JSONL export record by record (the writing is :mod:`._import_writer`).

The file is read as a stream: each line is checked as it comes and handed on,
so an import of a million facts never holds them all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TextIO

from ..._json_fields import DECODER, DuplicateFieldError
from ...errors import InvalidFactError
from ..core import StoreCore
from ..writes.limits import LONE_SURROGATE
from .id_map import IdMap
from .jsonl_records import ImportOwners, ParsedFact, check_header, parse_record
from .report import ImportIssue, InvalidImportError

__all__ = ["ON_DUPLICATE", "check_on_duplicate", "read_jsonl"]

#: What an import may do with a fact already in the store.
ON_DUPLICATE = ("skip", "error")


def check_on_duplicate(on_duplicate: str) -> None:
    """Raise :class:`InvalidFactError` unless ``on_duplicate`` is one of :data:`ON_DUPLICATE`."""
    if on_duplicate not in ON_DUPLICATE:
        raise InvalidFactError(f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, "
                               f"not {on_duplicate!r}", field="on_duplicate", value=on_duplicate)


#: Characters read from the file at a time.
_CHUNK = 1 << 16


def _too_long(number: int, longest: int) -> InvalidImportError:
    return InvalidImportError(ImportIssue(
        number, f"the line is longer than {longest:,} characters "
        "(Limits.max_import_line_chars): not a ctxslots export (a file with no line breaks?)",
        "line"))


def _raw_lines(fp: TextIO, longest: int) -> Iterator[str]:
    """The lines of ``fp`` (only ``\\n`` ends one), read a chunk at a time, so that a line
    longer than ``longest`` characters fails before much more of it is read.

    :raises InvalidImportError: A line is longer than ``longest``.
    """
    pending: list[str] = []  # the pieces read so far of the line not yet ended
    size = 0
    number = 1
    while chunk := fp.read(_CHUNK):
        *complete, rest = chunk.split("\n")
        for part in complete:
            # The "\r" of a "\r\n" ends the line: no part of its length.
            if size + len(part) - part.endswith("\r") > longest:
                raise _too_long(number, longest)
            yield "".join(pending) + part + "\n"
            pending, size, number = [], 0, number + 1
        pending.append(rest)
        size += len(rest)
        if size - rest.endswith("\r") > longest:  # its "\n" may be in the next chunk
            raise _too_long(number, longest)
    if size:
        yield "".join(pending)


def _lines(fp: TextIO, longest: int) -> Iterator[tuple[int, str]]:
    """Numbered lines of ``fp``; text that is not UTF-8 fails naming its line (read with
    ``errors="surrogateescape"``, as the command line reads, a bad byte is a lone
    surrogate in its line; read strictly, the decoder fails on a chunk, and the line
    named is the first one of that chunk)."""
    number = 0
    try:
        for number, line in enumerate(_raw_lines(fp, longest), start=1):
            if LONE_SURROGATE.search(line):
                raise InvalidImportError(ImportIssue(
                    number, "not UTF-8 text (a byte that is not UTF-8, or a lone surrogate)",
                    "encoding"))
            # A byte-order mark (some Windows editors write one) is no part of the header.
            yield number, line.removeprefix("\ufeff") if number == 1 else line
    except UnicodeDecodeError as exc:
        raise InvalidImportError(ImportIssue(
            number + 1, f"not UTF-8 text ({exc.reason}), on this line or one of the next "
            f"{_CHUNK:,} characters", "encoding")) from None


def read_jsonl(core: StoreCore, fp: TextIO, owners: ImportOwners
               ) -> Iterator[ParsedFact | ImportIssue]:
    """Each record of ``fp`` checked, in order: a fact, or the issue of a bad line.

    :raises InvalidImportError: The header is missing, malformed or newer, or
        the text is not UTF-8.
    """
    seen_header = False
    now = core.clock()
    lines_of_ids = IdMap()  # id -> the line that used it first
    for number, line in _lines(fp, core.limits.max_import_line_chars):
        if not line.strip():
            continue
        fact: ParsedFact | None = None
        try:
            data = DECODER.decode(line)
            if not seen_header:
                check_header(data)
                seen_header = True
                continue
            fact = parse_record(data, line=number, limits=core.limits, now=now, owners=owners)
            if fact.id is not None:
                first = lines_of_ids.get(fact.id)
                if first is not None:
                    raise InvalidFactError(
                        f"id {fact.id} is also the id of line {first}: ids must be unique in "
                        "one file (links and superseded_by would not know which fact they "
                        "mean)", field="id", value=fact.id)
                lines_of_ids.add(fact.id, number)
        except InvalidFactError as exc:
            issue = ImportIssue(number, str(exc), exc.field, exc.value)
        except json.JSONDecodeError as exc:
            issue = ImportIssue(number, f"not JSON: {exc.msg} (column {exc.colno})", "json", line)
        except DuplicateFieldError as exc:
            issue = ImportIssue(number, f"the record names {exc.args[0]!r} twice; name each "
                                "field once", "json", line)
        except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
            issue = ImportIssue(number, f"not JSON this store can read: {exc}", "json", line)
        else:
            if fact is not None:
                yield fact
            continue
        if not seen_header:
            raise InvalidImportError(issue) from None
        yield issue
    if not seen_header:
        raise InvalidImportError(ImportIssue(1, "the file is empty: expected the header line",
                                             "format"))
