"""Opening a store file: created private, WAL, sqlite-vec loaded, schema brought up to date."""

from __future__ import annotations

import os
import stat
import time
import urllib.parse
from collections.abc import Callable
from typing import TypeVar

import apsw
import sqlite_vec  # type: ignore[import-untyped]

from ..._files import make_private_dirs
from ...errors import ReadOnlyStoreError, StoreBusyError, StoreError
from ._busy import busy_error
from ._connection import DEFAULT_BUSY_TIMEOUT_S, Connection
from ._migrations import migrate as apply_migrations

__all__ = ["open_connection"]

T = TypeVar("T")


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
        except (apsw.BusyError, StoreBusyError):
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
            make_private_dirs(parent)  # each one made 0700, whatever the umask
        if not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc}", path=path) from exc


def _refuse_special(path: str) -> None:
    """Raise :class:`StoreError` for a path that is not a regular file (a folder, a named
    pipe, a device such as ``/dev/null``): SQLite fails on it with no word of why."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise StoreError(f"cannot open {path}: {exc.strerror or exc}", path=path) from exc
    if not stat.S_ISREG(mode):
        raise StoreError(f"cannot open {path}: it is not a regular file (a folder, a pipe or "
                         "a device); name a store file", path=path)


def _open_refused(path: str) -> str:
    """Why the system refuses to open ``path`` (`` (Too many open files)``), asked again
    of it, for an open SQLite failed without saying; ``""`` when it opens now."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as exc:
        return f" ({exc.strerror or exc})"
    return ""


def _sqlite_name(path: str) -> str:
    """``path`` as SQLite names it: the file name's bytes (as the system's calls encode
    ``path``, in the locale's encoding) read as UTF-8, the only encoding SQLite takes file
    names in. In a UTF-8 locale that is ``path`` itself; in a Latin-1 one, ``mém.db`` is
    the byte ``e9`` on disk, which SQLite would otherwise be handed as ``c3 a9``, and so
    write another file than the one checked and made here.

    :raises StoreError: The name's bytes are not UTF-8 (a name in Latin-1, which reaches
        Python as lone surrogates in a UTF-8 locale), or the locale's encoding has no
        bytes for a character of the name (``東`` in Latin-1).
    """
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise StoreError(f"cannot open {path}: file names are in {exc.encoding} here, which "
                         f"has no bytes for {exc.object[exc.start:exc.end]!r}; name the store "
                         "in characters it has, or run in a UTF-8 locale", path=path) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        shown = raw.decode("utf-8", "backslashreplace")
        raise StoreError(f"cannot open {shown}: the path is not UTF-8, and SQLite takes file "
                         "names in UTF-8 only; rename the file or the folder that is not",
                         path=path) from None


def _refuse_foreign(raw: apsw.Connection, path: str) -> None:
    """Refuse a database another program made (tables, and no ctxslots schema), before
    anything of it changes. One statement reads both, so a store another process is
    creating meanwhile is seen whole or not at all."""
    names = [str(row[0]) for row in raw.execute(
        "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
        "AND (SELECT user_version FROM pragma_user_version) = 0 ORDER BY name LIMIT 4")]
    if names:
        raise StoreError(f"{path} is not a ctxslots store: it is a SQLite database holding "
                         f"other tables ({', '.join(names)[:100]}); nothing was changed",
                         path=path)


#: The endings of the files SQLite keeps beside a database (its write-ahead log, that
#: log's index, a rollback journal): a store named so would be taken for one of them.
_LOG_ENDINGS = ("-wal", "-shm", "-journal")
#: Bytes the write-ahead log is cut back to once a checkpoint empties it: a reader that
#: stays open lets it grow (every write is appended), and SQLite keeps a grown log's
#: size for good otherwise (1.6 GB beside a 6 MB file in a long run).
WAL_SIZE_LIMIT = 64 * 1024 * 1024


def _read_only_because(path: str) -> str | None:
    """Why the store at ``path`` must be opened for reading only (a clause for the error a
    write raises, empty when the file itself may not be written), or ``None`` when it
    need not (missing, or this process may write it and the log beside it).

    A store in WAL mode is written through its ``-wal`` and ``-shm`` files: SQLite
    creates them in the file's folder unless they are there already, so a writable
    file in a folder this process may not write cannot be written either.
    """
    if not os.path.exists(path):
        return None
    if not os.access(path, os.W_OK):
        return ""  # permissions, a read-only mount: "read-only" says it
    folder = os.path.dirname(os.path.abspath(path))
    logs = [path + end for end in _LOG_ENDINGS[:2]]
    if os.access(folder, os.W_OK | os.X_OK) or all(os.access(p, os.W_OK) for p in logs):
        return None
    return (f" (this user may not write the folder {folder}, where SQLite keeps the "
            "store's write-ahead log)")


def _read_only_uri(path: str) -> str:
    """The URI that opens ``path`` for reading without writing anything beside it (its
    name's bytes percent-encoded, whatever the locale's encoding)."""
    uri = "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path)))
    if os.path.exists(path + "-wal"):
        # A log beside the file: another process may be writing the store now, and the
        # log may hold commits the file does not. SQLite reads through it read-only
        # (needing the -shm file too, or a folder to make it in): never immutable,
        # which reads the file alone and trusts that nothing changes it.
        return uri + "?mode=ro"
    # No log: no process has the store open for writing (one would have made it), and
    # SQLite, opening read-only, cannot make the log's files. Immutable reads the file
    # as it is, without them; a writer that starts while this connection reads is not
    # seen by it.
    return uri + "?immutable=1"


def _first_read(raw: apsw.Connection, path: str) -> None:
    """Read the header of a store opened read-only, so a log SQLite cannot read is said
    here, with its cause, and not by whichever read comes first."""
    try:
        raw.execute("PRAGMA schema_version").fetchall()
    except (apsw.ReadOnlyError, apsw.CantOpenError) as exc:
        raise ReadOnlyStoreError(f"cannot read {path} ({exc}): its write-ahead log "
                                 f"{path}-wal may hold changes not yet in the file, and "
                                 f"{_log_cause(path)}", path=path) from exc


def _log_cause(path: str) -> str:
    """Why SQLite could not read a read-only store's log, and what to do."""
    logs = [path + end for end in _LOG_ENDINGS[:2]]
    unreadable = [p for p in logs if os.path.exists(p) and not os.access(p, os.R_OK)]
    if unreadable:
        return (f"this user may not read {' and '.join(unreadable)}: let it read them, or "
                "open the store as the user who wrote it")
    folder = os.path.dirname(os.path.abspath(path))
    return (f"SQLite reads them only with {path}-shm beside it, which it cannot create in "
            f"the read-only folder {folder}: let this user write to {folder}, or open the "
            "store once as a user who may")


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

    A file this process may not write, or whose folder it may not write (where
    SQLite makes the WAL's files), is opened for reading only
    (:attr:`Connection.read_only`); its writes raise :class:`ReadOnlyStoreError`.

    :raises StoreError: The file cannot be opened, is not a database, or its
        schema is newer than this version of ctxslots understands.
    :raises StoreBusyError: Another connection held the lock a migration needs
        past ``busy_timeout``.
    :raises ReadOnlyStoreError: A file opened for reading only whose write-ahead
        log SQLite cannot read (no ``-shm`` file, and a folder it may not make one in).
    """

    path_text = os.fspath(path)
    if "://" in path_text:
        raise StoreError(f"{path_text.split('://')[0]}://... is a server URL, not a SQLite file "
                         "(open it with FactStore)", path=None)
    name = path_text
    if path_text != ":memory:":
        name = _sqlite_name(path_text)
        log = next((end for end in _LOG_ENDINGS if path_text.endswith(end)), None)
        if log is not None:
            raise StoreError(
                f"{path_text} is named as the {log} file of the store "
                f"{path_text[:-len(log)]}, which SQLite deletes or rewrites when it opens "
                "that store: name the store otherwise", path=path_text)
        if not create and not os.path.exists(path_text) and os.path.lexists(path_text):
            raise StoreError(f"cannot open {path_text}: a symbolic link that leads to no file "
                             "(a loop, or its target is gone)", path=path_text)
        if not create and not os.path.exists(path_text):
            raise StoreError(
                f"no store at {path_text}: write a fact first (`ctxslots --db {path_text} "
                "remember ...`) or pass the path of an existing store", path=path_text)
        _create_private(path_text)
        _refuse_special(path_text)
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    because = None if path_text == ":memory:" else _read_only_because(path_text)
    read_only = because is not None
    if read_only:
        flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        name = _read_only_uri(path_text)
    try:
        raw = apsw.Connection(name, flags=flags)
    except apsw.Error as exc:
        raise StoreError(f"cannot open {path_text}: {exc}{_open_refused(path_text)}",
                         path=path_text) from exc
    conn = Connection(raw, path_text)
    conn.read_only = read_only
    conn.read_only_because = because or ""
    conn.busy_timeout = busy_timeout
    deadline = time.monotonic() + busy_timeout
    try:
        raw.set_busy_timeout(int(busy_timeout * 1000))
        if read_only:
            _first_read(raw, path_text)
        if migrate and not read_only:
            _until_not_busy(lambda: _refuse_foreign(raw, path_text), deadline)
        if not read_only:
            _until_not_busy(lambda: raw.execute("PRAGMA journal_mode=WAL").fetchall(), deadline)
            raw.execute("PRAGMA synchronous=NORMAL")
            # Deleted rows are overwritten with zeros, so erased text leaves the file.
            raw.execute("PRAGMA secure_delete=ON")
            raw.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        raw.execute("PRAGMA foreign_keys=ON")
        if load_vec:
            conn.vec_version = _load_sqlite_vec(raw)
        if migrate and conn.read_only:
            from ._migrations import SCHEMA_VERSION, refuse_newer

            if (version := refuse_newer(conn)) != SCHEMA_VERSION:
                raise ReadOnlyStoreError(
                    f"{path_text} is read-only and its schema (version {version}) "
                    f"needs upgrading to {SCHEMA_VERSION}: open it once where it can be written",
                    path=path_text)
        elif migrate:
            _until_not_busy(lambda: apply_migrations(conn), deadline)
    except apsw.NotADBError as exc:
        raw.close()
        raise StoreError(f"{path_text} is not a ctxslots store (not a SQLite database)",
                         path=path_text) from exc
    except apsw.CorruptError as exc:
        raw.close()
        raise StoreError(f"{path_text} is not a ctxslots store this can read: the file is "
                         f"damaged or cut short ({exc})", path=path_text) from exc
    except StoreError:
        raw.close()
        raise
    except apsw.BusyError as exc:
        raw.close()
        raise busy_error(path_text, busy_timeout) from exc
    except apsw.ReadOnlyError as exc:
        raw.close()
        folder = os.path.dirname(os.path.abspath(path_text))
        raise ReadOnlyStoreError(
            f"cannot open {path_text} ({exc}): SQLite writes its log beside it, as "
            f"{path_text}-wal and {path_text}-shm in {folder}; let this user write the file, "
            "those two and the folder", path=path_text) from exc
    except apsw.Error as exc:
        code = raw.system_errno  # the system's reason, where one failed (EMFILE...)
        raw.close()
        reason = f" ({os.strerror(code)})" if code else ""
        raise StoreError(f"cannot prepare {path_text}: {exc}{reason}", path=path_text) from exc
    return conn
