"""Choosing the storage engine from where the store lives.

A ``postgresql://`` (or ``postgres://``) URL selects the PostgreSQL engine;
anything else is the path of a SQLite file.
"""

from __future__ import annotations

from .backend import Backend

__all__ = ["is_url", "open_backend"]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL server rather than a file."""
    return location.lower().startswith(_POSTGRES_SCHEMES)


def open_backend(location: str, *, create: bool = True, lexical_cache: bool = False,
                 vector_cache: bool = True) -> Backend:
    """Open the engine ``location`` names.

    :raises StoreError: The store cannot be opened (missing with ``create``
        false, unreachable, not a store, or a schema this version cannot read).
    """
    if is_url(location):
        # The PostgreSQL engine is optional (ctxslots[postgres]): its driver is
        # imported only when a URL asks for it.
        from .postgres import PostgresBackend

        # The database must exist; its schema is created on first use.
        backend: Backend = PostgresBackend(location, create=create)
        return backend
    from .sqlite import SQLiteBackend

    return SQLiteBackend(location, create=create, lexical_cache=lexical_cache,
                         vector_cache=vector_cache)
