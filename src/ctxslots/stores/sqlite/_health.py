"""Health of a store file: what is damaged, and rebuilding what derives from the facts.

The ``facts`` table is the source of truth. The FTS5 indexes, the triggers that
keep them and the change log in step, and the indexes are derived from it:
:func:`rebuild` recreates whichever of them is missing and refills the FTS5
indexes, so a dropped index or trigger never silently stops search.
"""

from __future__ import annotations

import os
import time
from typing import Any

import apsw

from ...errors import StoreBusyError, StoreDamagedError, StoreError, StoreFullError
from ..backend import Health
from ._busy import lock_holder
from ._connection import DEFAULT_BUSY_TIMEOUT_S, Connection, sqlite_version
from ._meta import get_meta, set_meta
from ._migrations import schema_version
from ._schema import derived_objects, fts_rank, fts_secure_delete
from ._vector_cache import META_GENERATION

__all__ = ["check", "checkpoint", "info", "rebuild", "used_bytes"]

_SOURCE_TABLES = ("facts", "archive", "fact_history", "fact_links", "store_meta",
                  "flush_progress", "fact_log")
_FTS_TABLES = ("facts_fts", "archive_fts")


def used_bytes(conn: Connection) -> int:
    """The bytes of the file that hold data (pages not on the free list)."""
    pages = int(conn.scalar("PRAGMA page_count")) - int(conn.scalar("PRAGMA freelist_count"))
    return pages * int(conn.scalar("PRAGMA page_size"))


def info(conn: Connection) -> dict[str, Any]:
    """Engine facts for ``stats``: file, size, schema and library versions."""
    path = conn.path
    return {
        "engine": "sqlite",
        "location": path,
        "path": path,
        "size_bytes": os.path.getsize(path) if os.path.exists(path) else 0,
        "schema_version": schema_version(conn),
        "sqlite_version": sqlite_version(),
        "sqlite_vec_version": conn.vec_version,
    }


def _existing(conn: Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master").fetchall()}


def _integrity(conn: Connection) -> tuple[str, bool]:
    """SQLite's integrity check: ``"ok"`` or what it found, and whether that is damage.

    The check stops at a page it cannot read; the damage it named before then is kept,
    and the stop said after it.
    """
    try:
        rows, stop = conn.rows_before_damage("PRAGMA integrity_check")
    except (apsw.Error, StoreError) as exc:
        return f"integrity check could not run: {exc}", False
    found = [line for row in rows for line in str(row[0]).splitlines()
             if line != "*** in database main ***"]
    if stop is not None:
        found.append(f"the check stopped at a page it could not read ({stop})")
    if found == ["ok"]:
        return "ok", False
    return "\n".join(found), True


#: Most of what the integrity check named that the problem line repeats (the integrity
#: line of the report holds it all).
_NAMED = 3


def _damaged(conn: Connection, integrity: str) -> Health:
    """The health of a damaged file: its one problem, the first things the check named,
    and the repair; nothing else checked."""
    found = integrity.splitlines()
    named = "; ".join(found[:_NAMED])
    if len(found) > _NAMED:
        named += f"; and {len(found) - _NAMED} more"
    problem = (f"integrity check failed, the file is damaged ({named}): restore it from a "
               "backup, or copy what is readable into a new file with "
               f"`sqlite3 {conn.path} .recover` and open that (`ctxslots reindex` cannot "
               "repair a damaged file)")
    return Health(integrity, False, (problem,), facts_readable=False)


def check(conn: Connection) -> Health:
    """Integrity of the file, presence of every table, trigger and index, FTS5 sync.

    A damaged file (SQLite's integrity check names damage, or a check meets a page it
    cannot read) is reported as such, with what the integrity check named, and nothing
    else is checked: what the other checks would advise cannot repair it.
    """
    problems: list[str] = []
    integrity, damaged = _integrity(conn)
    if damaged:
        return _damaged(conn, integrity)
    if integrity != "ok":
        problems.append(integrity)
    try:
        names = _existing(conn)
    except StoreDamagedError as exc:
        integrity = f"the schema could not be read ({exc.__cause__})"
        return _damaged(conn, integrity)
    gone = [t for t in _SOURCE_TABLES if t not in names]
    if "facts" in gone:
        problems.append("the facts table is missing: the facts themselves are gone and cannot "
                        "be rebuilt; restore the file from a backup or import an export")
        return Health(integrity, False, tuple(problems), facts_readable=False)
    if gone:
        problems.append(f"tables missing: {', '.join(gone)}; restore the file from a backup "
                        "or export what is left and import it into a new store")
    missing = [(kind, name) for kind, name, _ in derived_objects() if name not in names]
    if missing:
        problems.append(f"missing {', '.join(name for _, name in missing)}: run "
                        "`ctxslots reindex` to rebuild them")
    # The lexical index is its FTS5 tables and the triggers that keep them in step.
    in_sync = not any(kind == "trigger" or name in _FTS_TABLES for kind, name in missing)
    if in_sync:
        try:
            in_sync, busy = _fts_in_sync(conn)
        except StoreDamagedError as exc:
            integrity = f"the full-text index's check met a damaged page ({exc.__cause__})"
            return _damaged(conn, integrity)
        if not in_sync:
            problems.append("the full-text index is out of sync with the facts: "
                            "run `ctxslots reindex`")
        elif busy:
            who = lock_holder(conn.path) or "another connection"
            problems.append(f"the full-text index's own check could not run: {who} holds "
                            "the write lock it needs (the index holds one entry per fact, "
                            "as it should); run the doctor again once that writer is done")
    return Health(integrity, in_sync, tuple(problems))


def _page_damage(exc: StoreDamagedError) -> bool:
    """Whether ``exc`` is a damaged page of the file, not FTS5 saying its index does not
    match its content (which it reports as damage of the virtual table)."""
    cause = exc.__cause__
    return not (isinstance(cause, apsw.Error)
                and getattr(cause, "extendedresult", None) == apsw.SQLITE_CORRUPT_VTAB)


def _fts_in_sync(conn: Connection) -> tuple[bool, bool]:
    """FTS5's own integrity check: every word of every fact where the index says; and
    whether another connection's write lock kept it from running.

    The check is an ``INSERT`` command, which a file opened read-only refuses and which
    needs the write lock: it does not wait for one another connection holds (a health
    check must not hang on a long batch). Such a file is checked by what can be read:
    the index holds one entry per fact and the archive, no more.

    :raises StoreDamagedError: The check met a damaged page of the file.
    """
    busy = False
    if not conn.read_only:
        try:
            with conn.write(wait=0):
                for table in _FTS_TABLES:
                    conn.execute(
                        f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
            return True, False
        except StoreBusyError:
            busy = True
        except apsw.ReadOnlyError:
            pass
        except StoreDamagedError as exc:
            if _page_damage(exc):
                raise
            return False, False
        except (apsw.Error, StoreError):
            return False, False
    try:
        for table in ("facts", "archive"):
            strays = conn.scalar(
                f"SELECT (SELECT count(*) FROM {table} WHERE id NOT IN "
                f"(SELECT id FROM {table}_fts_docsize)) + (SELECT count(*) FROM "
                f"{table}_fts_docsize WHERE id NOT IN (SELECT id FROM {table}))")
            if strays:
                return False, busy
    except StoreDamagedError:
        raise
    except (apsw.Error, StoreError):
        return False, busy
    return True, busy


def rebuild(conn: Connection) -> None:
    """Recreate every missing derived object and refill the FTS5 indexes (one transaction)."""
    with conn.write():
        names = _existing(conn)
        if "facts" not in names:
            raise StoreError(f"{conn.path} has no facts table: the facts are gone and nothing "
                             "can be rebuilt from them; restore from a backup or an export",
                             path=conn.path)
        for _, name, sql in derived_objects():
            if name not in names:
                conn.execute(sql)
        if "vectors" not in names or "vector_log" not in names:
            # A new, empty vector table and log: in-memory copies must reload.
            set_meta(conn, META_GENERATION, str(int(get_meta(conn, META_GENERATION) or 0) + 1))
        for table in ("facts", "archive"):
            conn.execute(fts_rank(table))
            conn.execute(fts_secure_delete(table))
        conn.execute("INSERT INTO facts_fts(facts_fts) VALUES ('rebuild')")
        conn.execute("INSERT INTO archive_fts(archive_fts) VALUES ('rebuild')")


def checkpoint(conn: Connection) -> None:
    """Copy the write-ahead log into the file and truncate it, waiting (up to the busy
    timeout, a try at a time) while other connections still read from it.

    :raises StoreError: Readers held the log past the busy timeout.
    :raises StoreFullError: The file could not grow to take the log's pages back.
    """
    if conn.path == ":memory:" or conn.read_only:
        return
    deadline = time.monotonic() + DEFAULT_BUSY_TIMEOUT_S
    while True:
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
        except apsw.FullError as exc:
            # The erasure committed; only the copy back failed (the log may hold every
            # page of a store the disk filled before it was ever copied back).
            raise StoreFullError(
                f"the disk holding {conn.path} is full: the erasure is done, but the "
                "write-ahead log still holds the erased rows' earlier pages; free some space, "
                "and the next erasure, or the last connection to the store as it closes, "
                "empties it", path=conn.path) from exc
        if not busy:
            return
        if time.monotonic() >= deadline:
            raise StoreError(f"{conn.path}: other connections kept reading the write-ahead log; "
                             "the erased rows are gone, but their earlier pages stay in the log "
                             "until it is checkpointed (close the other connections and run "
                             "`ctxslots doctor`)", path=conn.path)
        time.sleep(0.05)
