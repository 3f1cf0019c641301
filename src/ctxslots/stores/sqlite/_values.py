"""Stored numbers no read can use, times out of order and text that is not UTF-8, found
and reset (``doctor`` and ``reindex``).

Every way in checks times and numbers (:data:`~ctxslots.stores.backend.READABLE_RANGES`,
:data:`~ctxslots.stores.backend.TIME_ORDERS`), but a row written before those
checks existed, or by hand, can still hold a time no datetime represents, a
count beyond what a float counts, or an update before the fact's creation; and
another program can write bytes that are not UTF-8 into a text column, which no
read can decode.
"""

from __future__ import annotations

import apsw

from ...errors import StoreError
from ..backend import READABLE_RANGES, TIME_ORDERS, BadValue, MisorderedTimes, ValueRange
from ._connection import Connection

__all__ = ["bad_texts", "bad_values", "misordered_times", "repair_texts", "repair_times",
           "repair_values"]

_ID = {"fact_history": "fact_id"}

#: Rows read at once when looking for text that is not UTF-8.
_TEXT_CHUNK = 5000


def _outside(rule: ValueRange) -> tuple[str, list[float]]:
    """The condition of a value outside ``rule`` (text or a blob in a number column too)."""
    col = rule.column
    kinds = "'integer', 'real', 'null'" if rule.nullable else "'integer', 'real'"
    wrong_type = f"typeof({col}) NOT IN ({kinds})"
    return (f"({wrong_type} OR {col} < ? OR {col} > ?)", [rule.low, rule.high])


def _tables(conn: Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}


def bad_values(conn: Connection, limit: int) -> list[BadValue]:
    """Up to ``limit`` values outside their range, and texts that are not UTF-8, by table,
    column and fact id."""
    found: list[BadValue] = bad_texts(conn, limit)
    tables = _tables(conn)
    for rule in READABLE_RANGES:
        if len(found) >= limit or rule.table not in tables:
            continue
        cond, params = _outside(rule)
        id_column = _ID.get(rule.table, "id")
        for fact_id, value in conn.execute(
                f"SELECT {id_column}, {rule.column} FROM {rule.table} WHERE {cond} "
                f"ORDER BY {id_column} LIMIT ?", (*params, limit - len(found))).fetchall():
            found.append(BadValue(rule.table, int(fact_id), rule.column, value))
    return found


def _text_columns(conn: Connection) -> list[tuple[str, bool, list[str]]]:
    """Each table of rows (not the full-text index's own, not SQLite's), whether it has
    rowids, and its columns that hold text."""
    found = []
    for table, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' "
            "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name").fetchall():
        if "_fts_" in table:
            continue
        columns = [str(c[1]) for c in conn.execute(f"PRAGMA table_info({table})").fetchall()
                   if "TEXT" in str(c[2]).upper()]
        if columns:
            found.append((str(table), "WITHOUT ROWID" not in str(sql).upper(), columns))
    return found


def _undecodable(conn: Connection, limit: int | None) -> list[tuple[str, int, str, bytes]]:
    """``(table, rowid, column, bytes)`` of stored text that is not UTF-8 (written by
    another program, or damage) or holds a NUL (written before sources and reasons were
    checked: no PostgreSQL store, nor an import, takes it), up to ``limit``; read as bytes, which always decode. A
    table without rowids (the flush progress, read at once: a row per conversation) gives
    0 for the row."""
    found: list[tuple[str, int, str, bytes]] = []
    for table, has_rowid, columns in _text_columns(conn):
        blobs = ", ".join(f"CAST({c} AS BLOB)" for c in columns)
        after = -(2**63)
        while limit is None or len(found) < limit:
            rows = conn.execute(
                f"SELECT rowid, {blobs} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (after, _TEXT_CHUNK)).fetchall() if has_rowid else [
                (0, *row) for row in conn.execute(f"SELECT {blobs} FROM {table}").fetchall()]
            for rowid, *values in rows:
                for column, value in zip(columns, values):
                    if isinstance(value, bytes) and (b"\x00" in value or not _is_utf8(value)):
                        found.append((table, int(rowid), column, value))
            if not has_rowid or len(rows) < _TEXT_CHUNK:
                break
            after = rows[-1][0]
    return found if limit is None else found[:limit]


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def bad_texts(conn: Connection, limit: int) -> list[BadValue]:
    """Up to ``limit`` stored texts that are not UTF-8, by table, column and row (the
    fact's id in the tables of facts)."""
    return [BadValue(table, _fact_id(conn, table, rowid), column, value)
            for table, rowid, column, value in _undecodable(conn, limit)]


def _fact_id(conn: Connection, table: str, rowid: int) -> int:
    if table in _ID:
        found = conn.scalar(f"SELECT {_ID[table]} FROM {table} WHERE rowid = ?", (rowid,))
        return rowid if found is None else int(found)
    return rowid


def repair_texts(conn: Connection) -> int:
    """Rewrite every stored text that is not UTF-8 or holds a NUL with its undecodable
    bytes and NULs as U+FFFD;
    how many texts were rewritten (each row holding the same bytes in that column is).

    Where the readable text is another row's (two keys that differ only in their
    undecodable bytes), the row's id is added to it: `` #12``.

    :raises StoreError: Such a clash in a table without rowids (the flush progress).
    """
    changed = 0
    found = _undecodable(conn, None)
    for table, column, value in dict.fromkeys((t, c, v) for t, _, c, v in found):
        readable = value.decode("utf-8", "replace").replace("\x00", "\ufffd")
        try:
            changed += conn.changed(
                f"UPDATE {table} SET {column} = ? WHERE CAST({column} AS BLOB) = ?",
                (readable, value))
        except apsw.ConstraintError:
            rows = [r for t, r, c, v in found if (t, c, v) == (table, column, value)]
            if not all(rows):
                raise StoreError(f"{conn.path}: {table}.{column} holds text that is not UTF-8 "
                                 "and whose readable form another row has; delete one of "
                                 "them by hand", path=conn.path) from None
            for rowid in rows:
                changed += conn.changed(f"UPDATE {table} SET {column} = ? WHERE rowid = ?",
                                        (f"{readable} #{rowid}", rowid))
    return changed


def repair_values(conn: Connection, now: float) -> int:
    """Set every value outside its range to the range's fallback, and text that is not
    UTF-8 to its readable part; how many were set."""
    changed = repair_texts(conn)
    tables = _tables(conn)
    for rule in READABLE_RANGES:
        if rule.table not in tables:
            continue
        cond, params = _outside(rule)
        fallback = now if rule.fallback == "now" else rule.fallback
        changed += conn.changed(f"UPDATE {rule.table} SET {rule.column} = ? WHERE {cond}",
                                (fallback, *params))
    return changed


def misordered_times(conn: Connection, limit: int) -> list[MisorderedTimes]:
    """Up to ``limit`` rows whose times break a :data:`TIME_ORDERS` rule."""
    found: list[MisorderedTimes] = []
    tables = _tables(conn)
    for rule in TIME_ORDERS:
        if len(found) >= limit or rule.table not in tables:
            continue
        id_column = _ID.get(rule.table, "id")
        for fact_id, earlier, later in conn.execute(
                f"SELECT {id_column}, {rule.earlier}, {rule.later} FROM {rule.table} "
                f"WHERE {rule.later} < {rule.earlier} ORDER BY {id_column} LIMIT ?",
                (limit - len(found),)).fetchall():
            found.append(MisorderedTimes(rule, int(fact_id), float(earlier), float(later)))
    return found


def repair_times(conn: Connection) -> int:
    """Set the later time of every row breaking a :data:`TIME_ORDERS` rule to its earlier
    time; how many rows were set."""
    changed = 0
    tables = _tables(conn)
    for rule in TIME_ORDERS:
        if rule.table in tables:
            changed += conn.changed(f"UPDATE {rule.table} SET {rule.later} = {rule.earlier} "
                                    f"WHERE {rule.later} < {rule.earlier}")
    return changed
