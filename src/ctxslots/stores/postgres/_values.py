"""Stored numbers no read can use, found and reset (``doctor`` and ``reindex``).

PostgreSQL keeps ``NaN`` and ``Infinity`` in a ``double precision`` column;
both sort above every number, so a range test catches them.
"""

from __future__ import annotations

from ..backend import READABLE_RANGES, TIME_ORDERS, BadValue, MisorderedTimes, ValueRange
from ._sql import Conn, relation_exists

__all__ = ["bad_values", "misordered_times", "repair_times", "repair_values"]

_ID = {"fact_history": "fact_id"}


def _outside(rule: ValueRange) -> tuple[str, list[float]]:
    col = rule.column
    return f"({col} < %s OR {col} > %s)", [rule.low, rule.high]


def bad_values(conn: Conn, limit: int) -> list[BadValue]:
    """Up to ``limit`` values outside their range, by table, column and fact id."""
    found: list[BadValue] = []
    for rule in READABLE_RANGES:
        if len(found) >= limit or not relation_exists(conn, rule.table):
            continue
        cond, params = _outside(rule)
        id_column = _ID.get(rule.table, "id")
        for fact_id, value in conn.execute(
                f"SELECT {id_column}, {rule.column} FROM {rule.table} WHERE {cond} "
                f"ORDER BY {id_column} LIMIT %s", (*params, limit - len(found))).fetchall():
            found.append(BadValue(rule.table, int(fact_id), rule.column, value))
    return found


def repair_values(conn: Conn, now: float) -> int:
    """Set every value outside its range to the range's fallback; how many were set."""
    changed = 0
    for rule in READABLE_RANGES:
        if not relation_exists(conn, rule.table):
            continue
        cond, params = _outside(rule)
        fallback = now if rule.fallback == "now" else rule.fallback
        cursor = conn.execute(f"UPDATE {rule.table} SET {rule.column} = %s WHERE {cond}",
                              (fallback, *params))
        changed += max(0, int(cursor.rowcount))
    return changed


def misordered_times(conn: Conn, limit: int) -> list[MisorderedTimes]:
    """Up to ``limit`` rows whose times break a :data:`TIME_ORDERS` rule."""
    found: list[MisorderedTimes] = []
    for rule in TIME_ORDERS:
        if len(found) >= limit or not relation_exists(conn, rule.table):
            continue
        id_column = _ID.get(rule.table, "id")
        for fact_id, earlier, later in conn.execute(
                f"SELECT {id_column}, {rule.earlier}, {rule.later} FROM {rule.table} "
                f"WHERE {rule.later} < {rule.earlier} ORDER BY {id_column} LIMIT %s",
                (limit - len(found),)).fetchall():
            found.append(MisorderedTimes(rule, int(fact_id), float(earlier), float(later)))
    return found


def repair_times(conn: Conn) -> int:
    """Set the later time of every row breaking a :data:`TIME_ORDERS` rule to its earlier
    time; how many rows were set."""
    changed = 0
    for rule in TIME_ORDERS:
        if relation_exists(conn, rule.table):
            cursor = conn.execute(f"UPDATE {rule.table} SET {rule.later} = {rule.earlier} "
                                  f"WHERE {rule.later} < {rule.earlier}")
            changed += max(0, int(cursor.rowcount))
    return changed
