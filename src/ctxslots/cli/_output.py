"""Everything the command prints passes here: no stored text can drive the terminal.

A stored value holds whatever a model, an import file or an MCP client put there,
terminal control sequences included: OSC 52 writes the clipboard, OSC 8 makes a link
that shows one address and opens another, ``ESC [2J`` clears the screen, and U+009B is
the same CSI in one character; a bidirectional control (U+202E and its kin) shows a
line in another order than it is stored. :func:`terminal_safe` writes every control
character except newline and tab (C0, DEL and C1), and every bidirectional control, as
its ``\\uXXXX`` escape, so the terminal shows it and obeys nothing. That is also JSON's own escape (``json.dumps`` already
escapes C0; C1 and DEL it leaves raw), so JSON output stays valid and reads back as
the same values.

Every command prints through :func:`echo` (``tests/test_terminal_output.py`` checks
that no other module of the command calls ``click.echo``); error lines pass
:func:`terminal_safe` where the root group shows them.

Whatever the locale's encoding, no text ends a command in a ``UnicodeEncodeError``:
:func:`tolerant_streams` writes a character the locale has no byte for (``東`` in
Latin-1) as its escape, :func:`echo_json` writes ASCII JSON to a stream that is not
UTF-8, and a document written to standard output (a JSONL export, a dump) goes through
:func:`document_stdout`, in UTF-8, the encoding its format promises.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from typing import IO, Any, cast

import attrs
import click

from .._streams import speaks_utf8

__all__ = ["SafeWriter", "document_stdout", "echo", "echo_json", "silence_stdout_if_broken",
           "terminal_safe", "tolerant_streams"]

# Newline and tab stay: they move the cursor as any text does and drive nothing else.
# The bidirectional controls go too: they make a terminal show text in another order
# than it is stored (a "Trojan Source" line).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                      "\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character but newline and tab, and every
    bidirectional control, written as ``\\uXXXX``."""
    return _CONTROL.sub(_escape, text)


def echo(message: str = "", *, err: bool = False, nl: bool = True,
         file: IO[str] | None = None) -> None:
    """Print ``message`` (to stderr with ``err``, or to ``file``) with its control
    characters escaped."""
    click.echo(terminal_safe(message), file=file, err=err, nl=nl)


def echo_json(data: Any, *, indent: int | None = 2) -> None:
    """Print ``data`` as JSON (indented unless ``indent`` is ``None``), control characters
    escaped the JSON way; to a standard output that is not UTF-8 (a Latin-1 locale), every
    character beyond ASCII is escaped too, so the JSON reads back as the same values."""
    echo(json.dumps(data, indent=indent, ensure_ascii=not speaks_utf8(sys.stdout)))


def tolerant_streams() -> None:
    """Let standard output and standard error show any text in any locale: a character
    the locale's encoding has no byte for is written as its escape (``\\u6771``) instead
    of ending the command in a ``UnicodeEncodeError``. A UTF-8 stream is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not speaks_utf8(stream):
            stream.reconfigure(errors="backslashreplace")


@attrs.define
class _Utf8Writer:
    """A text stream writing UTF-8 to a binary one.

    Attributes:
        buffer: Where the bytes go.
    """

    buffer: IO[bytes]

    @property
    def mode(self) -> str:
        """``"w"``: a stream open for writing text."""
        return "w"

    @property
    def encoding(self) -> str:
        """``"utf-8"``."""
        return "utf-8"

    def write(self, text: str) -> int:
        """Write ``text`` in UTF-8; return its length."""
        self.buffer.write(text.encode("utf-8"))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.buffer, name)


def document_stdout() -> IO[str]:
    """Standard output for a document (a JSONL export, a dump): UTF-8 whatever the locale,
    as its format promises; ``sys.stdout`` itself when it is UTF-8 already."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if speaks_utf8(stream) or buffer is None:
        return stream
    stream.flush()  # what was printed before comes first
    return cast(IO[str], _Utf8Writer(buffer))


@attrs.define
class SafeWriter:
    """A text stream that writes through :func:`terminal_safe` (an export to stdout).

    Attributes:
        stream: Where the text goes.
    """

    stream: IO[str]

    def write(self, text: str) -> int:
        """Write ``text`` with its control characters escaped; return its length."""
        self.stream.write(terminal_safe(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def silence_stdout_if_broken(broken: bool = False) -> None:
    """Send standard output to the null device when it can no longer be written (a full
    disk; a reader gone, when ``broken``), so the interpreter's last flush on exit adds
    no second error."""
    if not broken:
        try:
            sys.stdout.flush()
            return
        except OSError:
            pass
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)
