"""The SQLite engine: one file, apsw, FTS5 with BM25, sqlite-vec distances."""

from __future__ import annotations

from ._backend import SQLiteBackend
from ._connection import Connection, open_connection, sqlite_version

__all__ = ["Connection", "SQLiteBackend", "open_connection", "sqlite_version"]
