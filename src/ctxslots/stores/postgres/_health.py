"""Health checks, rebuilds and sizes of a PostgreSQL store.

The lexical index cannot drift from the facts: ``search`` is a generated
column, computed by the server on every write. What can go wrong is an index
left invalid (a failed ``CREATE INDEX CONCURRENTLY``, a crash during a
rebuild) or dropped by hand, the vector leg's HNSW index among them; :func:`check`
looks for both and :func:`rebuild` recreates and reindexes.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ..backend import Health
from ._schema import SCHEMA_VERSION, schema_version
from ._sql import Conn, relation_exists
from ._vectors import index_statements

__all__ = ["TABLES", "check", "info", "rebuild", "used_bytes"]

#: The tables of a store.
TABLES = ("facts", "archive", "fact_history", "fact_links", "flush_progress", "store_meta",
          "fact_vectors", "schema_migrations")

#: Indexes the lexical leg needs, with the statement that creates each.
_LEXICAL_INDEXES = {
    "facts_search": "CREATE INDEX IF NOT EXISTS facts_search ON facts USING gin (search)",
    "archive_search": "CREATE INDEX IF NOT EXISTS archive_search ON archive USING gin (search)",
}


def used_bytes(conn: Conn) -> int:
    """Bytes of every store table with its indexes and TOAST data."""
    found = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) "
        "FROM unnest(%s::text[]) t WHERE to_regclass(t) IS NOT NULL", (list(TABLES),)).fetchone()
    return int(found[0])


def info(conn: Conn, location: str) -> dict[str, Any]:
    """Engine facts for ``stats``."""
    found = conn.execute("SELECT current_setting('server_version'), "
                         "(SELECT extversion FROM pg_extension WHERE extname = 'vector')"
                         ).fetchone()
    return {"engine": "postgresql", "location": location,
            "schema_version": schema_version(conn), "size_bytes": used_bytes(conn),
            "server_version": str(found[0]), "pgvector_version": found[1]}


def _invalid_indexes(conn: Conn) -> list[str]:
    found = conn.execute(
        "SELECT i.indexrelid::regclass::text FROM pg_index i "
        "WHERE NOT i.indisvalid AND i.indrelid = ANY(SELECT to_regclass(t) "
        "FROM unnest(%s::text[]) t WHERE to_regclass(t) IS NOT NULL) ORDER BY 1",
        (list(TABLES),)).fetchall()
    return [str(r[0]) for r in found]


def _damaged(exc: psycopg.Error) -> bool:
    """Whether ``exc`` says the stored data cannot be read: class XX (internal error,
    data or index corrupted) or class 58 (an I/O error, a missing relation file)."""
    return (exc.sqlstate or "")[:2] in ("XX", "58")


def check(conn: Conn) -> Health:
    """Schema version, readable facts, valid indexes, the lexical indexes present.

    Facts the server cannot read (damaged pages, missing files) are reported as a
    problem; any other error (a lock held past the lock timeout, a statement
    timeout, a missing privilege, a lost server) is raised, as for any other call.
    """
    problems: list[str] = []
    try:
        conn.execute("SELECT count(*) FROM (SELECT 1 FROM facts LIMIT 1) s").fetchone()
        readable = True
    except psycopg.Error as exc:
        if not _damaged(exc):
            raise  # a lock, a timeout, a privilege, a lost server: the store's usual error
        readable = False
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        problems.append(f"the facts cannot be read ({detail}): restore the database "
                        "from a backup")
    if not readable:
        return Health(integrity="facts unreadable", lexical_in_sync=False,
                      problems=tuple(problems), facts_readable=False)
    version = schema_version(conn)
    if version != SCHEMA_VERSION:
        problems.append(f"the schema is at version {version}, this ctxslots writes "
                        f"{SCHEMA_VERSION}: open the store with a matching ctxslots")
    invalid = _invalid_indexes(conn)
    for name in invalid:
        problems.append(f"index {name} is invalid: run `ctxslots reindex`")
    missing = [name for name in _LEXICAL_INDEXES
               if not relation_exists(conn, name)]
    for name in missing:
        problems.append(f"the full-text index {name} is missing: run `ctxslots reindex`")
    for name in index_statements(conn):
        if not relation_exists(conn, name):
            problems.append(f"the vector index {name} is missing (searches scan every vector "
                            "they may see): run `ctxslots reindex`")
    lexical_ok = not missing and not any(n in _LEXICAL_INDEXES for n in invalid)
    return Health(integrity="ok" if not invalid else "invalid indexes: " + ", ".join(invalid),
                  lexical_in_sync=lexical_ok, problems=tuple(problems))


def rebuild(conn: Conn) -> None:
    """Recreate missing lexical and vector indexes and rebuild the invalid ones.

    A valid index is left alone: PostgreSQL keeps it in step with its table, and
    rebuilding every table's indexes takes locks that deadlock with the writers of
    other processes (each ``REINDEX TABLE`` blocks writes while it runs).
    """
    # Only the missing: CREATE INDEX IF NOT EXISTS takes the table's lock before it looks.
    for name, statement in [*_LEXICAL_INDEXES.items(), *index_statements(conn).items()]:
        if not relation_exists(conn, name):
            conn.execute(statement)
    for name in _invalid_indexes(conn):
        conn.execute(f"REINDEX INDEX {name}")
