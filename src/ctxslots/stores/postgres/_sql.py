"""SQL fragments shared by the PostgreSQL modules: column lists and filters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backend import FACT_COLUMNS, FactFilter

__all__ = [
    "ARCHIVE_COLUMNS",
    "COLUMNS",
    "Conn",
    "fact_columns",
    "filter_clause",
    "id_list",
    "live_clause",
    "relation_exists",
]

#: The fact columns, in :data:`~ctxslots.stores.backend.FACT_COLUMNS` order.
COLUMNS = ", ".join(FACT_COLUMNS)
#: The columns of an archived fact.
ARCHIVE_COLUMNS = COLUMNS + ", archived_at, reason"

#: A psycopg connection (any row type).
Conn = Any


def fact_columns(alias: str) -> str:
    """The fact columns prefixed with ``alias.``."""
    return ", ".join(f"{alias}.{name}" for name in FACT_COLUMNS)


def filter_clause(flt: FactFilter, alias: str = "f") -> tuple[str, list[Any]]:
    """``flt`` as a WHERE condition on the table ``alias`` (``TRUE`` when it keeps all)."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, values in (("user_id", flt.users), ("agent_id", flt.agents),
                           ("slot", flt.slots), ("scope", flt.scopes)):
        if values is not None:
            clauses.append(f"{alias}.{column} = ANY(%s)")
            params.append(list(values))
    if flt.live_at is not None:
        clauses.append(f"({alias}.expires_at IS NULL OR {alias}.expires_at > %s)")
        params.append(float(flt.live_at))
    if not flt.include_superseded:
        clauses.append(f"{alias}.superseded_by IS NULL")
    for tag in flt.tags:  # tags are stored one per line
        clauses.append(f"strpos(chr(10) || {alias}.tags || chr(10), %s) > 0")
        params.append(f"\n{tag}\n")
    if flt.source is not None:
        clauses.append(f"{alias}.source = %s")
        params.append(flt.source)
    if flt.observed_after is not None:
        clauses.append(f"{alias}.observed_at >= %s")
        params.append(float(flt.observed_after))
    if flt.observed_before is not None:
        clauses.append(f"{alias}.observed_at < %s")
        params.append(float(flt.observed_before))
    return (" AND ".join(clauses) or "TRUE"), params


def live_clause(live_at: float | None, alias: str = "f") -> tuple[str, list[Any]]:
    """``expires_at`` after ``live_at`` (``TRUE`` when ``live_at`` is ``None``)."""
    if live_at is None:
        return "TRUE", []
    return f"({alias}.expires_at IS NULL OR {alias}.expires_at > %s)", [float(live_at)]


def relation_exists(conn: Conn, name: str) -> bool:
    """Whether a table or index ``name`` exists in the schemas on the search path.

    Read from ``pg_class`` under the statement's snapshot: ``to_regclass``
    answers from a per-session cache that, inside a transaction, can still
    miss a table another session created meanwhile.
    """
    found = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relname = %s "
        "AND n.nspname = ANY(pg_catalog.current_schemas(false)))", (name,)).fetchone()
    return bool(found and found[0])


def id_list(values: Sequence[int]) -> list[int]:
    """Distinct ids as plain ints (a bigint[] parameter)."""
    return list(dict.fromkeys(int(v) for v in values))
