"""The one place that talks to the SQLite driver: :class:`Connection`.

The stdlib ``sqlite3`` of many Python builds cannot load extensions, so the
store uses ``apsw``, which bundles a recent SQLite with FTS5 and can load
sqlite-vec on every platform it ships wheels for. Everything else in the
engine goes through :class:`Connection`; :mod:`._connect` opens one.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import apsw

from ...errors import (
    ReadOnlyStoreError,
    StoreClosedError,
    StoreDamagedError,
    StoreError,
    StoreFullError,
)
from ..backend import KeptRead, failed_batch_error
from ._busy import busy_error

__all__ = ["DEFAULT_BUSY_TIMEOUT_S", "Connection", "Params", "io_error", "sqlite_version"]

Params = Sequence[Any] | dict[str, Any]
T = TypeVar("T")

#: How long a connection waits for another process's lock before failing.
DEFAULT_BUSY_TIMEOUT_S = 30.0

#: Seconds between tries for a write lock another connection holds, then the last one
#: again: SQLite's own busy handler's pauses (coarser steps lose the short gaps between
#: another process's transactions: more busy errors under contention).
_PAUSES_S = (0.001, 0.002, 0.005, 0.010, 0.015, 0.020, 0.025, 0.025, 0.025, 0.050, 0.050,
             0.100)


def sqlite_version() -> str:
    """The version of the SQLite library the driver bundles."""
    return str(apsw.sqlite_lib_version())


class Cursor(Protocol):
    """The part of a cursor this package reads; column values are whatever SQLite holds."""

    def fetchall(self) -> list[tuple[Any, ...]]: ...

    def fetchone(self) -> tuple[Any, ...] | None: ...

    def __iter__(self) -> Iterator[tuple[Any, ...]]: ...


def _not_utf8(path: str, exc: UnicodeDecodeError) -> StoreError:
    return StoreError(f"{path} holds text that is not UTF-8 (byte {exc.object[exc.start]:#04x}: "
                      "written by another program, or damage): `ctxslots doctor` says where, "
                      "`ctxslots reindex` makes it readable", path=path)


def damaged_error(path: str, exc: apsw.Error) -> StoreDamagedError:
    """The error of a read or write that met a damaged page of the file at ``path``."""
    return StoreDamagedError(f"{path} is damaged ({exc}): restore it from a backup, or copy "
                             f"what is readable into a new file with `sqlite3 {path} .recover` "
                             "and open that (`ctxslots doctor` lists the damage)", path=path)


def io_error(path: str, raw: apsw.Connection, exc: apsw.IOError) -> StoreError:
    """The store's own error for a write the operating system refused (``exc``), by the
    system's reason SQLite kept.

    A file that reached the process's file size limit (``ulimit -f``, ``EFBIG``) cannot
    grow, as on a full disk: a :class:`~ctxslots.errors.StoreFullError`. Any other reason
    is named as the system gives it. SQLite rolled the write back: nothing was written.
    """
    code = raw.system_errno
    if code == errno.EFBIG:
        return StoreFullError(f"{path} cannot grow past this process's file size limit "
                              "(ulimit -f); nothing was written", path=path)
    reason = os.strerror(code) if code else str(exc)
    return StoreError(f"cannot write {path}: {reason}; nothing was written", path=path)


def _no_memory(path: str) -> MemoryError:
    """SQLite could not allocate memory (a memory limit, ``ulimit -v``, or the
    machine's): Python's own error for it, as an allocation of Python's would raise."""
    return MemoryError(f"SQLite ran out of memory working on {path}")


def _has_moved(raw: apsw.Connection) -> bool:
    """Whether the file ``raw`` has open is no longer the one at its path: deleted,
    renamed, or replaced by another file (SQLite compares the two; ``False`` in memory)."""
    moved = ctypes.c_int(0)
    raw.file_control("main", apsw.SQLITE_FCNTL_HAS_MOVED, ctypes.addressof(moved))
    return bool(moved.value)


#: Driver errors that mean the file's bytes are damaged, not that a statement is wrong.
_DAMAGE = (apsw.CorruptError, apsw.NotADBError)


def _closed(path: str) -> StoreClosedError:
    return StoreClosedError(f"the store at {path} is closed", path=path)


class _TakingTurns:
    """A cursor whose every step holds the connection's lock, for a connection one thread
    reads a large result from in steps (:attr:`Connection.streams`). Stored text that does
    not decode raises :class:`StoreError` saying what repairs it, and a result read on
    after the store closed :class:`StoreClosedError`."""

    def __init__(self, cursor: apsw.Cursor, lock: threading.RLock, path: str) -> None:
        self._cursor = cursor
        self._lock = lock
        self._path = path

    def _step(self, take: Callable[[], T]) -> T:
        try:
            with self._lock:
                return take()
        except UnicodeDecodeError as exc:
            raise _not_utf8(self._path, exc) from exc
        except (apsw.ConnectionClosedError, apsw.CursorClosedError) as exc:
            raise _closed(self._path) from exc
        except _DAMAGE as exc:
            raise damaged_error(self._path, exc) from exc

    def __iter__(self) -> _TakingTurns:
        return self

    def __next__(self) -> tuple[Any, ...]:
        row: tuple[Any, ...] = self._step(self._cursor.__next__)
        return row

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row left."""
        return self._step(lambda: list(self._cursor.fetchall()))

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or ``None``."""
        row: tuple[Any, ...] | None = self._step(self._cursor.fetchone)
        return row


class _Fetched:
    """A statement's whole result, read in the same turn of the connection's lock as the
    statement ran.

    Threads share a store's connection (the assembler runs its contributors in worker
    threads). A statement read in steps, the lock let go between them, would keep a read
    transaction open on the connection while another thread begins a write on it: that
    write then fails at once (SQLite's ``SQLITE_BUSY_SNAPSHOT`` when another connection,
    such as the access writer's, committed meanwhile), or the reader's later rows come
    from inside the other thread's transaction. Reading every row at once closes the
    statement before the lock is let go.
    """

    def __init__(self, cursor: apsw.Cursor, *, describe: bool = False) -> None:
        #: The result's column names and declared types (when asked to ``describe`` it);
        #: ``None`` without a result.
        self.description: tuple[tuple[str, str], ...] | None = None
        if describe:
            try:
                self.description = tuple(cursor.get_description())
            except apsw.ExecutionCompleteError:
                pass
        self._rows = iter(cursor.fetchall())

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self._rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row left."""
        return list(self._rows)

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or ``None``."""
        return next(self._rows, None)


class Connection:
    """A small wrapper over an ``apsw.Connection``.

    Reads run in autocommit mode. Writes go through :meth:`write`, which opens
    ``BEGIN IMMEDIATE`` (so a busy database waits on the busy timeout up front
    instead of failing on lock upgrade) and nests through savepoints. Once
    closed, every call raises :class:`~ctxslots.errors.StoreClosedError`.
    """

    def __init__(self, raw: apsw.Connection, path: str) -> None:
        self.raw = raw
        self.path = path
        self.vec_version: str | None = None
        #: Whether the file could be opened for reading only.
        self.read_only = False
        #: Why, when :attr:`read_only`: a clause for the error a write raises.
        self.read_only_because = ""
        #: Seconds a write waits for another connection's lock.
        self.busy_timeout = DEFAULT_BUSY_TIMEOUT_S
        #: Whether statements hand their rows over in steps (for one thread reading a
        #: large result) rather than all at once (see :class:`_Fetched`).
        self.streams = False
        self._depth = 0
        #: The thread whose write block is open (the lock keeps every other one out).
        self._writer: int | None = None
        #: Whether an open block says its blocks take no savepoints.
        self._unsaved = False
        #: The first error a block inside that one raised (the whole block then fails).
        self._failure: BaseException | None = None
        self._lock = threading.RLock()
        self._closed = False
        #: Inside a write transaction: the row (or absence) last read by one name, until
        #: the next statement, a rollback or the next transaction. The transaction holds
        #: the write lock, so only its own statements can change it.
        self.kept_read = KeptRead()

    def _closed_error(self) -> StoreClosedError:
        return _closed(self.path)

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        """Run one statement (or a script without parameters).

        :raises StoreError: A table or column the statement names is gone (a
            damaged store: ``doctor`` says what, ``reindex`` rebuilds what it can), or
            a page of the file is damaged (restore a backup, or recover what is readable).
        """
        if self.streams:
            return self._run(sql, params,
                             lambda cursor: _TakingTurns(cursor, self._lock, self.path))
        return self._run(sql, params, _Fetched)

    def _run(self, sql: str, params: Params, result: Callable[[apsw.Cursor], T]) -> T:
        """Run ``sql`` and make its ``result`` from the cursor, in one turn of the lock."""
        try:
            with self._lock:
                if self._closed:
                    raise self._closed_error()
                self.kept_read.forget()  # a statement that may change it
                return result(self.raw.execute(sql, params))
        except apsw.SQLError as exc:
            if "no such" not in str(exc):
                raise
            raise StoreError(f"{self.path} is damaged ({exc}): run `ctxslots doctor`",
                             path=self.path) from exc
        except apsw.BusyError as exc:
            raise busy_error(self.path, self.busy_timeout) from exc
        except UnicodeDecodeError as exc:
            raise _not_utf8(self.path, exc) from exc
        except _DAMAGE as exc:
            raise damaged_error(self.path, exc) from exc
        except apsw.NoMemError as exc:
            raise _no_memory(self.path) from exc

    def rows_before_damage(self, sql: str) -> tuple[list[tuple[Any, ...]], apsw.Error | None]:
        """The rows of ``sql`` up to a damaged page of the file, and the driver's error for
        the damage that stopped it there (``None`` when nothing did). For a check that names
        damage in its rows and may stop at a page it cannot read (``PRAGMA integrity_check``)."""
        def take(cursor: apsw.Cursor) -> tuple[list[tuple[Any, ...]], apsw.Error | None]:
            rows: list[tuple[Any, ...]] = []
            try:
                for row in cursor:
                    rows.append(row)  # noqa: PERF402 - the rows before a raise are kept
            except _DAMAGE as exc:
                return rows, exc
            return rows, None

        return self._run(sql, (), take)

    def changed(self, sql: str, params: Params = ()) -> int:
        """Run one statement that changes rows; how many rows it changed (not counting
        what its triggers changed). Cheaper than reading them back with ``RETURNING``,
        which makes SQLite keep every changed row until the statement ends."""
        return self._run(sql, params, lambda cursor: (cursor.fetchall(), self.raw.changes())[1])

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement once per row of parameters."""
        with self._lock:
            if self._closed:
                raise self._closed_error()
            self.kept_read.forget()
            try:
                self.raw.executemany(sql, rows)
            except _DAMAGE as exc:
                raise damaged_error(self.path, exc) from exc
            except apsw.NoMemError as exc:
                raise _no_memory(self.path) from exc

    def rows(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        """Run a query and return its rows as dictionaries."""
        cursor = self._run(sql, params, lambda raw: _Fetched(raw, describe=True))
        if cursor.description is None:
            return []
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """Run a query and return the first column of its first row, or ``None``."""
        for row in self.execute(sql, params):
            return row[0]
        return None

    def fts5_tokenizer(self, name: str, args: list[str]) -> Any:
        """The FTS5 tokenizer ``name`` with ``args``, callable from Python."""
        if self._closed:
            raise self._closed_error()
        return self.raw.fts5_tokenizer(name, args)

    @property
    def in_transaction(self) -> bool:
        """Whether this thread is inside a :meth:`write` block (another thread's block
        holds the connection until it ends: a write of this thread waits for it, and is
        no part of it)."""
        return self._depth > 0 and self._writer == threading.get_ident()

    @contextlib.contextmanager
    def write(self, *, savepoints: bool = True, wait: float | None = None
              ) -> Iterator[Connection]:
        """Run the block in one write transaction; nested blocks use savepoints.

        With ``savepoints=False`` the blocks nested in this one take none: one that
        raises cannot be undone alone, so it fails this block, which rolls back (to
        where it started) and raises at its end even if the error was caught; a
        block started after the failure raises at once. ``wait``: seconds to wait
        for another connection's write lock instead of the busy timeout (a write
        that may be put off, as an access count, waits less).

        :raises StoreBusyError: Another connection held the write lock past the
            busy timeout (nothing was written).
        :raises StoreClosedError: The connection was closed.
        :raises StoreError: A block nested in one with ``savepoints=False`` failed.
        """
        with self._lock:
            if self._closed:
                raise self._closed_error()
            depth = self._depth
            flat = self._unsaved  # a block of a block that takes no savepoints
            if flat and self._failure is not None:
                raise failed_batch_error(self._failure, self.path)
            try:
                yield from self._block(depth, flat, savepoints, wait)
            finally:
                # Ctrl-C's KeyboardInterrupt can arrive between any two steps (just after
                # BEGIN, just before COMMIT): however the outermost block ended, it leaves
                # no transaction open, holding the write lock, and no depth behind it.
                self._depth = depth
                if depth == 0:
                    self._unsaved, self._failure = False, None
                    if not self._closed and self.raw.in_transaction:
                        self.kept_read.forget()
                        self.raw.execute("ROLLBACK")

    def _block(self, depth: int, flat: bool, savepoints: bool, wait: float | None
               ) -> Iterator[Connection]:
        """The steps of one :meth:`write` block at ``depth`` (called holding the lock)."""
        if depth == 0:
            self._begin(self.busy_timeout if wait is None else wait)
            self.kept_read.forget()  # read in another transaction
            if _has_moved(self.raw):
                # SQLite would write on into the file it has open, which no path names
                # any more: every write would be gone once the store is closed.
                raise ReadOnlyStoreError(
                    f"{self.path} was deleted or replaced by another file while this store "
                    "had it open; nothing was written: open the store again (restart the "
                    "program holding it)", path=self.path)
        elif not flat:
            self.raw.execute(f"SAVEPOINT sp{depth}")
        starts = not flat and not savepoints
        if starts:
            self._unsaved = True
        self._depth += 1
        self._writer = threading.get_ident()
        try:
            yield self
            if starts and self._failure is not None:
                raise failed_batch_error(self._failure, self.path)
        except BaseException as exc:
            self._depth -= 1
            if self._closed:  # closed inside the block: its transaction went with it
                if isinstance(exc, StoreClosedError):
                    raise
                raise self._closed_error() from exc
            if flat:
                if self._failure is None:
                    self._failure = exc
                raise
            if starts:
                self._unsaved, self._failure = False, None
            self.kept_read.forget()  # what the rollback undid may have changed it
            if not self.raw.in_transaction:
                # SQLite rolled the whole transaction back itself (a full disk, an
                # interrupt): there is nothing left to undo, and the error stands.
                raise
            if depth == 0:
                self.raw.execute("ROLLBACK")
            else:
                self.raw.execute(f"ROLLBACK TO sp{depth}; RELEASE sp{depth}")
            raise
        else:
            self._depth -= 1
            if self._closed:  # closed inside the block: nothing of it was kept
                raise self._closed_error()
            if flat:
                return
            if starts:
                self._unsaved = False
            if depth == 0:
                self.raw.execute("COMMIT")
            else:
                self.raw.execute(f"RELEASE sp{depth}")

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[None]:
        """Run the block in one read transaction holding the connection, so every read
        inside sees one moment of the file; other threads wait for its end (a write of
        theirs could not begin inside it). Inside this thread's write block: that one.

        :raises StoreClosedError: The connection was closed.
        """
        with self._lock:
            if self._closed:
                raise self._closed_error()
            if self.in_transaction:
                yield
                return
            try:  # BEGIN inside: an interrupt just after it leaves no read open
                self.raw.execute("BEGIN")
                yield
            finally:
                if not self._closed and self.raw.in_transaction:
                    self.raw.execute("COMMIT")

    def _begin(self, wait: float) -> None:
        """Start a write transaction, waiting up to ``wait`` seconds for another
        connection's write lock. Called holding :attr:`_lock`, which it lets go between
        tries: SQLite's own busy handler would wait inside the call, and every other
        thread of this process, reads included, would wait with it."""
        deadline = time.monotonic() + wait
        pauses = iter(_PAUSES_S)
        while True:
            self.raw.set_busy_timeout(0)
            try:
                self.raw.execute("BEGIN IMMEDIATE")
                return
            except apsw.BusyError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise busy_error(self.path, wait) from exc
            finally:
                self.raw.set_busy_timeout(int(self.busy_timeout * 1000))
            self._lock.release()
            try:
                time.sleep(min(next(pauses, _PAUSES_S[-1]), left))
            finally:
                self._lock.acquire()
            if self._closed:
                raise self._closed_error()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close the connection (idempotent), once the statement or write block another
        thread runs on it ends: closing under it would fail that thread with an error
        of the driver's instead of :class:`~ctxslots.errors.StoreClosedError`."""
        with self._lock:
            self._closed = True
            self.raw.close()
