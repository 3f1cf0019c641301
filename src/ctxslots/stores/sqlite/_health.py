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

from ...errors import StoreError
from ..backend import Health
from ._connection import DEFAULT_BUSY_TIMEOUT_S, Connection, sqlite_version
from ._schema import derived_objects, fts_rank, fts_secure_delete, schema_version

__all__ = ["check", "checkpoint", "info", "rebuild", "used_bytes"]

_SOURCE_TABLES = ("facts", "archive", "fact_history", "fact_links", "store_meta",
                  "flush_progress", "vector_log", "fact_log", "vectors")


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


def check(conn: Connection) -> Health:
    """Integrity of the file, presence of every table, trigger and index, FTS5 sync."""
    problems: list[str] = []
    try:
        integrity = "\n".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))
    except (apsw.Error, StoreError) as exc:
        integrity = f"integrity check could not run: {exc}"
    if integrity != "ok":
        problems.append(f"integrity check failed: {integrity}")
    names = _existing(conn)
    gone = [t for t in _SOURCE_TABLES if t not in names]
    if "facts" in gone:
        problems.append("the facts table is missing: the facts themselves are gone and cannot "
                        "be rebuilt; restore the file from a backup or import an export")
        return Health(integrity, False, tuple(problems), facts_readable=False)
    if gone:
        problems.append(f"tables missing: {', '.join(gone)}; restore the file from a backup "
                        "or export what is left and import it into a new store")
    missing = [name for _, name, _ in derived_objects() if name not in names]
    if missing:
        problems.append(f"missing {', '.join(missing)}: run `ctxslots reindex` to rebuild them")
    in_sync = not missing
    if in_sync:
        try:
            for table in ("facts_fts", "archive_fts"):
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        except (apsw.Error, StoreError):
            in_sync = False
            problems.append("the full-text index is out of sync with the facts: "
                            "run `ctxslots reindex`")
    return Health(integrity, in_sync, tuple(problems))


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
        for table in ("facts", "archive"):
            conn.execute(fts_rank(table))
            conn.execute(fts_secure_delete(table))
        conn.execute("INSERT INTO facts_fts(facts_fts) VALUES ('rebuild')")
        conn.execute("INSERT INTO archive_fts(archive_fts) VALUES ('rebuild')")


def checkpoint(conn: Connection) -> None:
    """Copy the write-ahead log into the file and truncate it, waiting (up to the busy
    timeout, a try at a time) while other connections still read from it.

    :raises StoreError: Readers held the log past the busy timeout.
    """
    if conn.path == ":memory:" or conn.read_only:
        return
    deadline = time.monotonic() + DEFAULT_BUSY_TIMEOUT_S
    while True:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
        if not busy:
            return
        if time.monotonic() >= deadline:
            raise StoreError(f"{conn.path}: other connections kept reading the write-ahead log; "
                             "the erased rows are gone, but their earlier pages stay in the log "
                             "until it is checkpointed (close the other connections and run "
                             "`ctxslots doctor`)", path=conn.path)
        time.sleep(0.05)
