"""Progress on stderr for long commands, drawn only when stderr is a terminal.

A :class:`Progress` shows ``label``, a bar and ``done/total`` when the total is
known, else what is done so far; the elapsed seconds always. A background
ticker redraws it a few times a second, so work that reports nothing (a store
call without a progress callback) still shows it is alive. When stderr is not a
terminal (a pipe, a file, a test) nothing is drawn at all.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any, Self

import attrs

from ._output import terminal_safe

__all__ = ["CountingReader", "CountingWriter", "Progress"]

_WIDTH = 24


def _is_terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@attrs.define
class Progress:
    """One progress line, redrawn in place; use it as a context manager.

    Attributes:
        label: What is being done ("importing facts").
        total: How many units there are, when known.
        unit: What a unit is ("facts", "bytes", "files").
        stream: Where to draw (stderr).
        enabled: Whether to draw at all (default: when ``stream`` is a terminal).
        interval: Seconds between redraws by the ticker.
    """

    label: str
    total: int | None = None
    unit: str = ""
    stream: IO[str] = attrs.field(factory=lambda: sys.stderr)
    enabled: bool | None = None
    interval: float = 0.2
    done: int = attrs.field(default=0, init=False)
    note: str = attrs.field(default="", init=False)
    _started: float = attrs.field(factory=time.monotonic, init=False)
    _stop: threading.Event = attrs.field(factory=threading.Event, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self.enabled is None:
            self.enabled = _is_terminal(self.stream)

    def __enter__(self) -> Self:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._draw(final=True)

    def update(self, done: int, total: int | None = None) -> None:
        """Set how much is done (and the total, when it becomes known)."""
        with self._lock:
            self.done = done
            if total is not None:
                self.total = total

    def advance(self, amount: int = 1) -> None:
        """Add ``amount`` to what is done."""
        with self._lock:
            self.done += amount

    def set_note(self, note: str) -> None:
        """Show ``note`` after the counts ("12,000 records"), until it is set again."""
        with self._lock:
            self.note = note

    def relabel(self, label: str, *, total: int | None = None, unit: str | None = None) -> None:
        """Start another phase on the same line (``done`` back to 0)."""
        with self._lock:
            self.label, self.total, self.done = label, total, 0
            if unit is not None:
                self.unit = unit
        if self._thread is not None and not self._stop.is_set():
            self._draw()  # show the new phase at once, however short it is

    def line(self) -> str:
        """The text of the line as it is now."""
        with self._lock:
            label, total, done, unit = self.label, self.total, self.done, self.unit
        elapsed = f"{time.monotonic() - self._started:.0f}s"
        if self.note:
            elapsed = f"{self.note} {elapsed}"
        suffix = f" {unit}" if unit else ""
        if total:
            share = min(1.0, done / total)
            filled = int(share * _WIDTH)
            bar = "#" * filled + "-" * (_WIDTH - filled)
            return f"{label} [{bar}] {share:4.0%} {done:,}/{total:,}{suffix} {elapsed}"
        return f"{label} {done:,}{suffix} {elapsed}" if done else f"{label}... {elapsed}"

    def _draw(self, *, final: bool = False) -> None:
        try:
            self.stream.write("\r\x1b[K" + terminal_safe(self.line()) + ("\n" if final else ""))
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away
            self._stop.set()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()


@attrs.define
class CountingReader:
    """Iterates the lines of a text file, adding the bytes read to a :class:`Progress`;
    once the file is read, the line moves on to the phase ``then`` (when given)."""

    fp: IO[str]
    progress: Progress
    then: str | None = None

    def __iter__(self) -> Iterator[str]:
        for line in self.fp:
            self.progress.advance(len(line.encode("utf-8", "surrogateescape")))
            yield line
        if self.then:
            self.progress.relabel(self.then, unit="")

    def read(self, size: int = -1) -> str:
        """Read like the file itself, counting what was read (at the end of the file, the
        line moves on to ``then``, as when iterating)."""
        text = self.fp.read(size)
        self.progress.advance(len(text.encode("utf-8", "surrogateescape")))
        if self.then and size != 0 and (not text or size < 0):
            self.progress.relabel(self.then, unit="")
        return text


@attrs.define
class CountingWriter:
    """Writes to a text file, adding each line written to a :class:`Progress`."""

    fp: IO[str]
    progress: Progress

    def write(self, text: str) -> int:
        """Write ``text``; count its newlines."""
        self.progress.advance(text.count("\n"))
        return self.fp.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fp, name)
