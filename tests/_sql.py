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
    from ctxslots.stores.backend.types import FACT_COLUMNS, FactFilter

    scopes = None if scope is ... else ("" if scope is None else scope,)
    flt = FactFilter(scopes=scopes)
    out: list[tuple[Any, ...]] = []
    for archived in (False, True):
        columns = [c for c in FACT_COLUMNS if access or c not in ACCESS_COLUMNS]
        columns += ["archived_at", "reason"] if archived else []
        for row in sorted(store.backend.select(flt, archived=archived), key=lambda r: r["id"]):
            # In column order, as a SELECT * reads them: id, slot, scope, key, value...
            out.append(("archive" if archived else "facts", *(row[c] for c in columns)))
    for entry in store.backend.all_history():
        if scopes is None or entry.scope in scopes:
            out.append(("fact_history", *attrs.astuple(entry)))
    return out
