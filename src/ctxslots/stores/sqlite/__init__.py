"""The SQLite engine: one file, apsw, FTS5 with BM25, sqlite-vec distances."""

from __future__ import annotations

from ._backend import SQLiteBackend
from ._connect import open_connection
from ._connection import Connection, sqlite_version

__all__ = ["Connection", "SQLiteBackend", "open_connection", "sqlite_version"]
