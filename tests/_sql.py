"""Reading a SQLite store file directly, as an oracle for what the engine wrote."""

from __future__ import annotations

from typing import Any

from ctxslots.stores.sqlite import Connection, open_connection


def raw(store: Any) -> Connection:
    """A separate connection to ``store``'s file (sees what is committed)."""
    return open_connection(store.path, migrate=False)
