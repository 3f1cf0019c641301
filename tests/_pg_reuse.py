"""Reuse a test's PostgreSQL database when the test changed nothing but rows.

Creating a database from the template and dropping it costs 0.1 to 0.5 s of
server time on a busy 2-core machine (two checkpoints and a copy of the
catalogs); emptying a store test's tables costs a tenth of that. A database
goes back to the pool only when it is, but for its rows, the template
itself once the tables the template lacks are dropped (the vector table a
store makes for its embedder on first opening):

- no catalog row of the database was written after it was handed out (every
  CREATE, ALTER, GRANT, COMMENT, or DROP followed by a CREATE writes one; a
  DROP alone lowers a catalog's row count), planner statistics aside;
- its own ``pg_database`` row is unchanged and it has no per-database
  settings, no prepared transactions and, once the test's sessions are
  ended, no other session.

Then every table the test touched is emptied (TRUNCATE: new, empty files, as
in a new copy) and refilled with the template's rows, every sequence is set
back, and the planner's statistics, the size estimates in ``pg_class`` and
the activity counters are those of a new copy. Anything else and the
database is dropped as before.
"""

from __future__ import annotations

from typing import Any

import attrs
import psycopg
from psycopg import sql

__all__ = ["TemplateState"]

# Written by ANALYZE (and cleared by the reset): not the schema.
_STATISTICS = ("pg_statistic", "pg_statistic_ext_data")

# The quoted, schema-qualified names of the relations of some kinds outside the system's schemas.
_USER_RELATIONS = ("SELECT format('%%I.%%I', n.nspname, c.relname) FROM pg_class c"
                   " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = ANY(%s)"
                   " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
                   " AND n.nspname NOT LIKE 'pg\\_%%' ORDER BY 1")

# Each user table's size with its indexes and TOAST table (a table written to grows).
_SIZES = ("SELECT format('%%I.%%I', n.nspname, c.relname), pg_total_relation_size(c.oid)"
          " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
          " WHERE format('%%I.%%I', n.nspname, c.relname) = ANY(%s)")

# The planner's size estimates of every relation outside pg_catalog.
_ESTIMATES = ("SELECT oid::bigint, relpages, reltuples, relallvisible FROM pg_class"
              " WHERE relnamespace <> 'pg_catalog'::regnamespace AND relkind IN ('r', 'i', 't', 'p')")


def _next_xid(conn: psycopg.Connection[Any]) -> int:
    """The 32-bit id the next transaction will get (``xmin`` values are 32-bit)."""
    row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").fetchone()
    assert row is not None
    return int(row[0]) % 2**32


@attrs.define
class TemplateState:
    """What a copy of the template holds, to check a used copy against and refill it.

    Attributes:
        catalog_rows: Rows in each of the database's own catalogs.
        tables: The template's tables (schema-qualified, quoted).
        sizes: Each table's total size in bytes (indexes and TOAST included).
        rows: Each non-empty table's rows in COPY text format.
        sequences: Each sequence's ``(last_value, is_called)``.
        estimates: ``(oid, relpages, reltuples, relallvisible)`` of each relation.
    """

    catalog_rows: dict[str, int]
    tables: list[str]
    sizes: dict[str, int]
    rows: dict[str, bytes]
    sequences: dict[str, tuple[int, bool]]
    estimates: list[tuple[int, int, float, int]]

    @classmethod
    def read(cls, conn: psycopg.Connection[Any]) -> TemplateState:
        """Read the state of the database ``conn`` is connected to (the template)."""
        names = [r[0] for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'pg_catalog'::regnamespace"
            " AND relkind = 'r' AND NOT relisshared AND relname <> ALL(%s) ORDER BY relname",
            (list(_STATISTICS),))]
        counts = dict(conn.execute(_catalog_query(names, with_changes=False)).fetchall())
        tables = [r[0] for r in conn.execute(_USER_RELATIONS, (["r", "p"],))]
        rows: dict[str, bytes] = {}
        for table in tables:
            data = bytearray()
            with conn.cursor().copy(sql.SQL("COPY {} TO STDOUT").format(sql.SQL(table))) as copy:
                for chunk in copy:
                    data += chunk
            if data:
                rows[table] = bytes(data)
        sequences: dict[str, tuple[int, bool]] = {}
        for (name,) in conn.execute(_USER_RELATIONS, (["S"],)).fetchall():
            value = conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(
                sql.SQL(name))).fetchone()
            assert value is not None
            sequences[name] = (int(value[0]), bool(value[1]))
        return cls(catalog_rows=counts, tables=tables,
                   sizes=dict(conn.execute(_SIZES, (tables,)).fetchall()), rows=rows,
                   sequences=sequences, estimates=conn.execute(_ESTIMATES).fetchall())

    def mark(self, conn: psycopg.Connection[Any]) -> int:
        """The point after which a write to a catalog of ``conn``'s database counts as a change."""
        return _next_xid(conn)

    def reset(self, conn: psycopg.Connection[Any], since: int) -> int | None:
        """Empty and refill a copy used since ``since``; the new mark, or None when it must go.

        ``conn`` is a superuser's autocommit connection to the copy.
        """
        conn.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                     " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        extra = [t for (t,) in conn.execute(_USER_RELATIONS, (["r", "p"],)) if t not in self.tables]
        if extra:
            try:
                conn.execute(sql.SQL("DROP TABLE {}").format(
                    sql.SQL(", ").join(sql.SQL(t) for t in extra)))
            except psycopg.Error:
                return None
        if not self._unchanged(conn, since):
            return None
        sizes = dict(conn.execute(_SIZES, (self.tables,)).fetchall())
        touched = [t for t in self.tables if t in self.rows or sizes.get(t) != self.sizes[t]]
        with conn.transaction():
            if touched:
                conn.execute(sql.SQL("TRUNCATE {}").format(
                    sql.SQL(", ").join(sql.SQL(t) for t in touched)))
            for table, data in self.rows.items():
                with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(sql.SQL(table))) as copy:
                    copy.write(data)
            for name, (value, called) in self.sequences.items():
                conn.execute("SELECT setval(%s::regclass, %s, %s)", (name, value, called))
            conn.execute("DELETE FROM pg_statistic WHERE starelid IN (SELECT oid FROM pg_class"
                         " WHERE relnamespace <> 'pg_catalog'::regnamespace)")
            conn.execute("DELETE FROM pg_statistic_ext_data")
            with conn.cursor() as cur:
                cur.executemany("UPDATE pg_class SET relpages = %s, reltuples = %s, relallvisible = %s"
                                " WHERE oid = %s::oid AND (relpages, reltuples, relallvisible)"
                                " IS DISTINCT FROM (%s, %s, %s)",
                                [(p, t, v, o, p, t, v) for o, p, t, v in self.estimates])
        # The counters of the writes above reach the shared statistics first, then all go.
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_reset()")
        mark = self.mark(conn)
        if self._others(conn):
            return None
        return mark

    def _unchanged(self, conn: psycopg.Connection[Any], since: int) -> bool:
        if self._others(conn):
            return False
        found = conn.execute(_catalog_query(list(self.catalog_rows), with_changes=True),
                             {"since": since}).fetchall()
        if any(changed for _, _, changed in found):
            return False
        if {name: count for name, count, _ in found} != self.catalog_rows:
            return False
        row = conn.execute(
            "SELECT d.xmin::text::bigint >= %(since)s"
            " OR EXISTS (SELECT 1 FROM pg_db_role_setting WHERE setdatabase = d.oid)"
            " OR EXISTS (SELECT 1 FROM pg_prepared_xacts WHERE database = d.datname)"
            " FROM pg_database d WHERE d.datname = current_database()", {"since": since}).fetchone()
        return row is not None and not row[0]

    @staticmethod
    def _others(conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                           " AND pid <> pg_backend_pid()").fetchone()
        return row is not None and row[0] > 0


def _catalog_query(names: list[str], *, with_changes: bool) -> sql.Composed:
    """Each catalog's row count (and, with changes, its rows written at or after ``since``)."""
    parts = []
    for name in names:
        changed = (sql.SQL(", count(*) FILTER (WHERE xmin::text::bigint >= %(since)s)")
                   if with_changes else sql.SQL(""))
        parts.append(sql.SQL("SELECT {}::text, count(*){} FROM pg_catalog.{}").format(
            sql.Literal(name), changed, sql.Identifier(name)))
    return sql.SQL(" UNION ALL ").join(parts)
