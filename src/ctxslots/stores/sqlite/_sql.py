"""SQL fragments shared by the SQLite modules: column lists and filters."""

from __future__ import annotations

from typing import Any

from ..backend import FACT_COLUMNS, FactFields, FactFilter
from ..stemming import STEM_COLUMNS, stems_of

__all__ = [
    "ARCHIVE_READ",
    "COLUMNS",
    "COPIED",
    "COPY",
    "INSERTED",
    "LIMIT",
    "READ",
    "STEM_COLUMNS",
    "WRITABLE",
    "filter_clause",
    "insert_values",
    "marks",
]

#: The fact columns to store into, by name.
COLUMNS = ", ".join(FACT_COLUMNS)
#: The fact columns to read: a fact written before ``observed_at`` existed was
#: observed when it was written.
_OBSERVED = "coalesce(observed_at, created_at)"
READ = COLUMNS.replace("observed_at", f"{_OBSERVED} AS observed_at")
#: The columns of an archived fact, to read.
ARCHIVE_READ = READ + ", archived_at, reason"
#: The fact columns to copy into another table (the archive), their stems included.
COPY = COLUMNS.replace("observed_at", _OBSERVED) + ", " + ", ".join(STEM_COLUMNS)
#: The columns :data:`COPY` writes into.
COPIED = COLUMNS + ", " + ", ".join(STEM_COLUMNS)
#: The columns an update may set.
WRITABLE = frozenset(c for c in FACT_COLUMNS if c != "id")
#: The columns an insert writes (the id is handed out), the stems last.
INSERTED = (*(c for c in FACT_COLUMNS if c != "id"), *STEM_COLUMNS)


#: A row limit given as a parameter. The unary plus keeps the bound value from SQLite's
#: planner: a statement whose plan read a bound value (as a plain ``LIMIT ?`` under an
#: ``ORDER BY`` does) is planned again each time its parameters are bound, every run.
LIMIT = "LIMIT +?"


def insert_values(row: FactFields) -> list[Any]:
    """``row``'s values in :data:`INSERTED` order (a row may leave out its context),
    its stems made from them."""
    context = row.get("context")
    values = [context if c == "context" else row[c]  # type: ignore[literal-required]
              for c in INSERTED[:-len(STEM_COLUMNS)]]
    return [*values, *stems_of(row["key"], row["value"], row["tags"], context)]


def marks(count: int) -> str:
    """``count`` parameter marks: ``?,?,?``."""
    return ",".join("?" * count)


def filter_clause(flt: FactFilter, alias: str = "") -> tuple[str, list[Any]]:
    """``flt`` as a WHERE condition on the table ``alias`` (``"1"`` when it keeps all)."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, values in (("user_id", flt.users), ("agent_id", flt.agents),
                           ("slot", flt.slots), ("scope", flt.scopes)):
        if values is not None:
            clauses.append(f"{alias}{column} IN ({marks(len(values))})")
            params.extend(values)
    if not flt.include_superseded:
        clauses.append(f"{alias}superseded_by IS NULL")
    if flt.live_at is not None:
        clauses.append(f"({alias}expires_at IS NULL OR {alias}expires_at > ?)")
        params.append(flt.live_at)
    if flt.narrowed:
        _narrow(flt, alias, clauses, params)
    return " AND ".join(clauses) or "1", params


def _narrow(flt: FactFilter, alias: str, clauses: list[str], params: list[Any]) -> None:
    for tag in flt.tags:  # tags are stored one per line
        clauses.append(f"instr(char(10) || {alias}tags || char(10), ?) > 0")
        params.append(f"\n{tag}\n")
    if flt.source is not None:
        clauses.append(f"{alias}source = ?")
        params.append(flt.source)
    if flt.observed_after is not None:
        clauses.append(f"coalesce({alias}observed_at, {alias}created_at) >= ?")
        params.append(flt.observed_after)
    if flt.observed_before is not None:
        clauses.append(f"coalesce({alias}observed_at, {alias}created_at) < ?")
        params.append(flt.observed_before)
