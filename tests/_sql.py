"""Reading a SQLite store file directly, as an oracle for what the engine wrote."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from ctxslots.stores.sqlite import Connection, open_connection


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
    from ctxslots.stores.backend import FactFilter

    scopes = None if scope is ... else ("" if scope is None else scope,)
    flt = FactFilter(scopes=scopes)
    out: list[tuple[Any, ...]] = []
    for archived in (False, True):
        for row in sorted(store.backend.select(flt, archived=archived), key=lambda r: r["id"]):
            out.append(("archive" if archived else "facts", *(
                (k, row[k]) for k in sorted(row) if access or k not in ACCESS_COLUMNS)))
    for entry in store.backend.all_history():
        if scopes is None or entry.scope in scopes:
            out.append(("fact_history", *attrs.astuple(entry)))
    return out
