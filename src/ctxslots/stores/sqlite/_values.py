"""Stored numbers no read can use, and times out of order, found and reset (``doctor``
and ``reindex``).

Every way in checks times and numbers (:data:`~ctxslots.stores.backend.READABLE_RANGES`,
:data:`~ctxslots.stores.backend.TIME_ORDERS`), but a row written before those
checks existed, or by hand, can still hold a time no datetime represents, a
count beyond what a float counts, or an update before the fact's creation.
"""

from __future__ import annotations

from ..backend import READABLE_RANGES, TIME_ORDERS, BadValue, MisorderedTimes, ValueRange
from ._connection import Connection

__all__ = ["bad_values", "misordered_times", "repair_times", "repair_values"]

_ID = {"fact_history": "fact_id"}


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
    """Up to ``limit`` values outside their range, by table, column and fact id."""
    found: list[BadValue] = []
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


def repair_values(conn: Connection, now: float) -> int:
    """Set every value outside its range to the range's fallback; how many were set."""
    changed = 0
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
