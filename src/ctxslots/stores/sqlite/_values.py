"""Stored numbers no read can use, found and reset (``doctor`` and ``reindex``).

Every way in checks times and numbers (:data:`~ctxslots.stores.backend.READABLE_RANGES`),
but a row written before those checks existed, or by hand, can still hold a
time no datetime represents or a count beyond what a float counts.
"""

from __future__ import annotations

from ..backend import READABLE_RANGES, BadValue, ValueRange
from ._connection import Connection

__all__ = ["bad_values", "repair_values"]

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
        changed += len(conn.execute(
            f"UPDATE {rule.table} SET {rule.column} = ? WHERE {cond} RETURNING 1",
            (fallback, *params)).fetchall())
    return changed
