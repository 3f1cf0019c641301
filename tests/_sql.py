"""Reading a SQLite store file directly, as an oracle for what the engine wrote."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import apsw
import attrs
import pytest

from ctxslots.stores.backend import FACT_COLUMNS, Backend, FactFilter, QueryPlan
from ctxslots.stores.engines import open_backend
from ctxslots.stores.sanitize import to_match
from ctxslots.stores.sqlite import Connection, open_connection


@contextlib.contextmanager
def engine_of(store: Any) -> Iterator[Backend]:
    """A second engine on ``store``'s file or database, for the block (sees what is committed)."""
    backend = open_backend(str(store.path), create=False, vector_cache=False)
    try:
        yield backend
    finally:
        backend.close()


_Seen = TypeVar("_Seen")


@contextlib.contextmanager
def connection_hook(hook: Callable[[apsw.Connection], None]) -> Iterator[None]:
    """``hook(conn)`` run on each apsw connection opened in the block."""
    apsw.connection_hooks.append(hook)
    try:
        yield
    finally:
        apsw.connection_hooks.remove(hook)


@contextlib.contextmanager
def traced(note: Callable[[str, Any], _Seen]) -> Iterator[list[_Seen]]:
    """``note(sql, bindings)`` of every statement run, in order, by the apsw connections
    opened in the block (a store opened before it is not traced)."""
    seen: list[_Seen] = []

    def trace(_cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        seen.append(note(sql, bindings))
        return True

    def hook(conn: apsw.Connection) -> None:
        conn.exec_trace = trace

    with connection_hook(hook):
        yield seen


@contextlib.contextmanager
def rows_read() -> Iterator[dict[str, int]]:
    """How many rows the statements reading the facts table returned, on the apsw
    connections opened in the block (``"facts"``; the caller clears it)."""
    read: dict[str, int] = {}
    running: dict[int, str] = {}

    def exec_trace(cursor: apsw.Cursor, sql: str, _bindings: Any) -> bool:
        running[id(cursor)] = sql
        return True

    def row_trace(cursor: apsw.Cursor, row: Any) -> Any:
        if " FROM facts WHERE " in running.get(id(cursor), ""):
            read["facts"] = read.get("facts", 0) + 1
        return row

    def hook(conn: apsw.Connection) -> None:
        conn.exec_trace, conn.row_trace = exec_trace, row_trace

    with connection_hook(hook):
        yield read


def plan_of(words: list[str]) -> QueryPlan:
    """The query plan of a search for ``words`` (already sanitized)."""
    return QueryPlan(text=" ".join(words), words=tuple(words), match=to_match(list(words)))


def raw(store: Any) -> Connection:
    """A separate connection to ``store``'s file (sees what is committed).

    A test that reads the SQLite file this way checks the SQLite engine only:
    on another engine it is skipped.
    """
    if store.engine != "sqlite":
        pytest.skip("reads the SQLite engine's file directly")
    return open_connection(store.path, migrate=False)


#: The columns that change when a fact is only shown to a model.
ACCESS_COLUMNS = ("access_count", "last_accessed")


def stored_rows(store: Any, *, access: bool = True, scope: Any = ...) -> list[tuple[Any, ...]]:
    """Every stored fact, archived fact and history entry, on any engine, in a fixed order.

    For "nothing was written" checks. ``access=False`` leaves out access counts;
    ``scope`` (a scope name, ``None`` for global) keeps one scope's rows only.
    """
    scopes = None if scope is ... else ("" if scope is None else scope,)
    flt = FactFilter(scopes=scopes)
    out: list[tuple[Any, ...]] = []
    with engine_of(store) as backend:
        return _stored_rows(backend, flt, scopes, access, out)


def _stored_rows(backend: Backend, flt: Any, scopes: Any, access: bool,
                 out: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    for archived in (False, True):
        columns = [c for c in FACT_COLUMNS if access or c not in ACCESS_COLUMNS]
        columns += ["archived_at", "reason"] if archived else []
        for row in sorted(backend.select(flt, archived=archived), key=lambda r: r["id"]):
            # In column order, as a SELECT * reads them: id, slot, scope, key, value...
            out.append(("archive" if archived else "facts", *(row[c] for c in columns)))
    for entry in backend.all_history():
        if scopes is None or entry.scope in scopes:
            out.append(("fact_history", *attrs.astuple(entry)))
    return out
