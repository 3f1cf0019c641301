"""In-memory copies of a store file, loaded on a background thread.

A copy (the lexical postings, the vectors) takes seconds to read from a large
file. :class:`CacheSlot` holds one: the first search that wants it starts a
:class:`BackgroundLoader`, which opens its own connection and builds the copy
inside one read transaction (so it matches one moment of the file), while
searches go on without it; a later search adopts it and brings it up to date
through the file's change log.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from ...errors import StoreError
from .._forks import engine_work, let_forks_pass
from ._connect import open_connection
from ._connection import Connection

__all__ = ["BackgroundLoader", "CacheSlot", "row_chunks"]

T = TypeVar("T")
#: ``build(conn, cancelled) -> copy``; ``cancelled()`` is polled between chunks.
Build = Callable[[Connection, Callable[[], bool]], T]


def row_chunks(rows: Iterable[Any], cancelled: Callable[[], bool] | None,
               background_size: int) -> Iterator[list[Any]]:
    """``rows`` in lists, for building a copy; the last list may be short or empty.

    In the foreground (``cancelled`` is ``None``) the lists are large. In the
    background they hold ``background_size`` rows with a pause between them:
    the building loop holds the GIL, and a search waiting for it would otherwise
    wait out the interpreter's switch interval at every step. Stops early once
    ``cancelled()`` is true; the caller checks it afterwards.
    """
    size = 5000 if cancelled is None else background_size
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            if cancelled is not None:
                if cancelled():
                    return
                time.sleep(0)
            yield chunk
            chunk = []
    yield chunk


class BackgroundLoader(Generic[T]):
    """Builds one copy of a store file on a daemon thread with its own connection.

    A fork waits for the thread to leave SQLite (a child forked while it was inside would
    inherit the library's locks held, and hang at its first open), for one chunk at most.
    """

    def __init__(self, path: str, build: Build[T], *, load_vec: bool, name: str) -> None:
        self.result: T | None = None
        self.error: BaseException | None = None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(path, build, load_vec),
                                        daemon=True, name=f"ctxslots-load-{name}")
        self._thread.start()

    def _run(self, path: str, build: Build[T], load_vec: bool) -> None:
        try:
            with engine_work():
                conn = open_connection(path, load_vec=load_vec, migrate=False)
                conn.streams = True  # this thread alone reads it, a large result in chunks
                try:
                    conn.execute("BEGIN")
                    result = build(conn, self._between_chunks)
                    conn.execute("COMMIT")
                    if not self._cancel.is_set():
                        self.result = result
                finally:
                    conn.close()
        except Exception as exc:  # noqa: BLE001 - handed to the store, which reports it
            self.error = exc

    def _between_chunks(self) -> bool:
        """The build's ``cancelled()``: polled between chunks, outside SQLite, where a fork
        under way may go ahead."""
        let_forks_pass()
        return self._cancel.is_set()

    def done(self) -> bool:
        """Whether the load has finished (built, failed or cancelled)."""
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the load to finish; return whether it has."""
        self._thread.join(timeout)
        return self.done()

    def cancel(self) -> None:
        """Ask the build to stop at its next chunk; its result is dropped."""
        self._cancel.set()


class CacheSlot(Generic[T]):
    """One in-memory copy a store uses once it is loaded, and how it gets loaded.

    :param what: Names the copy in messages.
    :param build: Builds the copy from a connection (see :data:`Build`).
    :param load_vec: The loading connection needs sqlite-vec.
    """

    def __init__(self, what: str, build: Build[T], *, load_vec: bool) -> None:
        self.what = what
        self.build = build
        self.load_vec = load_vec
        self.copy: T | None = None
        self.loader: BackgroundLoader[T] | None = None
        self.failure: BaseException | None = None

    def ready(self, conn: Connection) -> T | None:
        """The loaded copy, or ``None`` while it loads (starting the load when none runs).

        A ``":memory:"`` database is built here, on ``conn``: another
        connection would see another database. After a failed load this
        returns ``None`` for good, with one ``RuntimeWarning``.
        """
        if self.copy is not None or self.failure is not None:
            return self.copy
        if conn.path == ":memory:":
            self.copy = self.build(conn, lambda: False)
            return self.copy
        loader = self.loader
        if loader is None:
            self.loader = BackgroundLoader(conn.path, self.build, load_vec=self.load_vec,
                                           name=self.what.replace(" ", "-"))
            return None
        if not loader.done():
            return None
        self.loader = None
        if loader.result is None:
            self.failure = loader.error or StoreError(f"loading the {self.what} was cancelled")
            warnings.warn(f"ctxslots: the {self.what} could not be loaded, searches go on "
                          f"without it: {self.failure}", RuntimeWarning, stacklevel=4)
            return None
        self.copy = loader.result
        return self.copy

    def load_now(self, conn: Connection, timeout: float | None = None) -> bool:
        """Load the copy and wait for it; return whether it is loaded (false on timeout).

        :raises StoreError: The load failed.
        """
        if self.copy is None and self.failure is None:
            if self.loader is None:
                self.ready(conn)  # starts the load, or builds a ":memory:" copy
            if self.loader is not None and not self.loader.wait(timeout):
                return False
        if self.ready(conn) is None:
            raise StoreError(f"loading the {self.what} failed: {self.failure}", path=conn.path)
        return True

    def stop(self) -> None:
        """Stop a load in progress and wait (briefly) for its thread."""
        if self.loader is not None:
            self.loader.cancel()
            self.loader.wait(10.0)
            self.loader = None

    def reset(self) -> None:
        """Drop the copy, any load in progress and any failure: the next use loads afresh."""
        self.stop()
        self.copy = None
        self.failure = None
