"""The one place that talks to the SQLite driver.

The stdlib ``sqlite3`` of many Python builds cannot load extensions, so the
store uses ``apsw``, which bundles a recent SQLite with FTS5 and can load
sqlite-vec on every platform it ships wheels for. Everything else in
``stores/`` goes through :class:`Connection` and :func:`open_connection`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import apsw
import sqlite_vec  # type: ignore[import-untyped]

from ...errors import ReadOnlyStoreError, StoreError

__all__ = ["Connection", "open_connection", "sqlite_version"]

Params = Sequence[Any] | dict[str, Any]
T = TypeVar("T")

#: How long a connection waits for another process's lock before failing.
DEFAULT_BUSY_TIMEOUT_S = 30.0


def sqlite_version() -> str:
    """The version of the SQLite library the driver bundles."""
    return str(apsw.sqlite_lib_version())


class Cursor(Protocol):
    """The part of a cursor this package reads; column values are whatever SQLite holds."""

    def fetchall(self) -> list[tuple[Any, ...]]: ...

    def fetchone(self) -> tuple[Any, ...] | None: ...

    def __iter__(self) -> Iterator[tuple[Any, ...]]: ...


class Connection:
    """A small wrapper over an ``apsw.Connection``.

    Reads run in autocommit mode. Writes go through :meth:`write`, which opens
    ``BEGIN IMMEDIATE`` (so a busy database waits on the busy timeout up front
    instead of failing on lock upgrade) and nests through savepoints.
    """

    def __init__(self, raw: apsw.Connection, path: str) -> None:
        self.raw = raw
        self.path = path
        self.vec_version: str | None = None
        #: Whether the file could be opened for reading only.
        self.read_only = False
        self._depth = 0
        self._lock = threading.RLock()

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        """Run one statement (or a script without parameters).

        :raises StoreError: A table or column the statement names is gone (a
            damaged store: ``doctor`` says what, ``reindex`` rebuilds what it can).
        """
        return self._cursor(sql, params)

    def _cursor(self, sql: str, params: Params) -> apsw.Cursor:
        try:
            return self.raw.execute(sql, params)
        except apsw.SQLError as exc:
            if "no such" not in str(exc):
                raise
            raise StoreError(f"{self.path} is damaged ({exc}): run `ctxslots doctor`",
                             path=self.path) from exc

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement once per row of parameters."""
        self.raw.executemany(sql, rows)

    def rows(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        """Run a query and return its rows as dictionaries."""
        cursor = self._cursor(sql, params)
        try:
            names = [d[0] for d in cursor.get_description()]
        except apsw.ExecutionCompleteError:
            return []
        return [dict(zip(names, row)) for row in cursor]

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """Run a query and return the first column of its first row, or ``None``."""
        for row in self.execute(sql, params):
            return row[0]
        return None

    @property
    def in_transaction(self) -> bool:
        """Whether a :meth:`write` block is open on this connection."""
        return self._depth > 0

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """Run the block in one write transaction; nested blocks use savepoints."""
        with self._lock:
            depth = self._depth
            if depth == 0:
                self.raw.execute("BEGIN IMMEDIATE")
            else:
                self.raw.execute(f"SAVEPOINT sp{depth}")
            self._depth += 1
            try:
                yield self
            except BaseException:
                self._depth -= 1
                if depth == 0:
                    self.raw.execute("ROLLBACK")
                else:
                    self.raw.execute(f"ROLLBACK TO sp{depth}; RELEASE sp{depth}")
                raise
            else:
                self._depth -= 1
                if depth == 0:
                    self.raw.execute("COMMIT")
                else:
                    self.raw.execute(f"RELEASE sp{depth}")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self.raw.close()


def _load_sqlite_vec(raw: apsw.Connection) -> str:
    raw.enable_load_extension(True)
    try:
        raw.load_extension(sqlite_vec.loadable_path())
    finally:
        raw.enable_load_extension(False)
    return str(raw.execute("SELECT vec_version()").fetchall()[0][0])


def _until_not_busy(action: Callable[[], T], deadline: float) -> T:
    """Run ``action``; while SQLite answers BUSY, wait a little and run it again until ``deadline``.

    SQLite answers some lock requests BUSY without calling the busy handler:
    switching a new file to WAL while other processes open it is one (several
    processes starting on a fresh store). The busy timeout does not cover them.
    """
    delay = 0.005
    while True:
        try:
            return action()
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, 0.2)


def _create_private(path: str) -> None:
    """Create a missing store file and directory readable by their owner only.

    Memory holds personal data. SQLite gives the ``-wal`` and ``-shm`` files
    the permissions of the database file, so they follow.
    """
    parent = os.path.dirname(os.path.abspath(path))
    try:
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o700, exist_ok=True)
        if not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc}", path=path) from exc


def open_connection(
    path: str | os.PathLike[str],
    *,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S,
    load_vec: bool = True,
    migrate: bool = True,
    create: bool = True,
) -> Connection:
    """Open (creating if needed) a store database and bring its schema up to date.

    Enables WAL and ``synchronous=NORMAL``, sets the busy timeout, loads
    sqlite-vec and applies pending migrations.

    :param path: The database file; ``":memory:"`` works for throwaway stores.
    :param busy_timeout: Seconds to wait for another writer's lock.
    :param load_vec: Load the sqlite-vec extension (needed for the vector leg).
    :param migrate: Apply pending schema migrations.
    :param create: Create the file (and its directory) when missing; when
        false, a missing file is a :class:`StoreError` and nothing is created.
    :raises StoreError: The file cannot be opened, is not a database, or its
        schema is newer than this version of ctxslots understands.
    """
    from .migrations import migrate as apply_migrations

    path_text = os.fspath(path)
    if "://" in path_text:
        raise StoreError(f"{path_text.split('://')[0]}://... is a server URL, not a SQLite file "
                         "(open it with FactStore)", path=None)
    if path_text != ":memory:":
        if not create and not os.path.exists(path_text):
            raise StoreError(
                f"no store at {path_text}: write a fact first (`ctxslots --db {path_text} "
                "remember ...`) or pass the path of an existing store", path=path_text)
        _create_private(path_text)
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    name = path_text
    read_only = path_text != ":memory:" and os.path.exists(path_text) \
        and not os.access(path_text, os.W_OK)
    if read_only:
        # A file this process may not write (permissions, a read-only mount):
        # read it as it is. SQLite cannot make the WAL's shared-memory file
        # beside it, so the file is opened as immutable.
        flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        name = "file:" + urllib.parse.quote(os.path.abspath(path_text)) + "?immutable=1"
    try:
        raw = apsw.Connection(name, flags=flags)
    except apsw.Error as exc:
        raise StoreError(f"cannot open {path_text}: {exc}", path=path_text) from exc
    conn = Connection(raw, path_text)
    conn.read_only = read_only
    deadline = time.monotonic() + busy_timeout
    try:
        raw.set_busy_timeout(int(busy_timeout * 1000))
        if not read_only:
            _until_not_busy(lambda: raw.execute("PRAGMA journal_mode=WAL").fetchall(), deadline)
            raw.execute("PRAGMA synchronous=NORMAL")
        raw.execute("PRAGMA foreign_keys=ON")
        if load_vec:
            conn.vec_version = _load_sqlite_vec(raw)
        if migrate and conn.read_only:
            from .migrations import SCHEMA_VERSION, schema_version

            if schema_version(conn) != SCHEMA_VERSION:
                raise ReadOnlyStoreError(
                    f"{path_text} is read-only and its schema (version {schema_version(conn)}) "
                    f"needs upgrading to {SCHEMA_VERSION}: open it once where it can be written",
                    path=path_text)
        elif migrate:
            _until_not_busy(lambda: apply_migrations(conn), deadline)
    except apsw.NotADBError as exc:
        raw.close()
        raise StoreError(f"{path_text} is not a SQLite database", path=path_text) from exc
    except StoreError:
        raw.close()
        raise
    except apsw.Error as exc:
        raw.close()
        raise StoreError(f"cannot prepare {path_text}: {exc}", path=path_text) from exc
    return conn
