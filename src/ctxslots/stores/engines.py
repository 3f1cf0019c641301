"""Choosing the storage engine from where the store lives.

A ``postgresql://`` (or ``postgres://``) URL selects the PostgreSQL engine;
anything else is the path of a SQLite file.
"""

from __future__ import annotations

import re

from ..errors import StoreError
from .backend import Backend

__all__ = ["check_location", "is_url", "open_backend"]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# A scheme (two characters or more, so a Windows drive letter is a path) and a slash.
_URL_LIKE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")
_POSTGRES_LIKE = re.compile(r"^postgres(?:ql)?:", re.IGNORECASE)


def is_url(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL server rather than a file."""
    return location.lower().startswith(_POSTGRES_SCHEMES)


def check_location(location: str) -> None:
    """Refuse a location that looks like a URL but names no engine: a ``postgresql:/``
    with one slash, or another scheme (``mysql://``); either would otherwise become a
    SQLite file under a folder named after the scheme.

    :raises StoreError: It is such a location.
    """
    if is_url(location):
        return
    if _POSTGRES_LIKE.match(location):
        raise StoreError(f"{location[:60]!r} is not a PostgreSQL URL: write it with two "
                         "slashes, postgresql://[user@]host[:port]/database", path=None)
    found = _URL_LIKE.match(location)
    if found is None:
        return
    scheme = found.group(1)
    raise StoreError(f"cannot open a {scheme}: store ({location.split('/')[0][:40]}/...): a "
                     "store is a SQLite file path or a postgresql:// (or postgres://) URL",
                     path=None)


def open_backend(location: str, *, create: bool = True, lexical_cache: bool = False,
                 vector_cache: bool = True) -> Backend:
    """Open the engine ``location`` names.

    :raises StoreError: The store cannot be opened (missing with ``create``
        false, unreachable, not a store, or a schema this version cannot read), or
        ``location`` looks like a URL of no engine (:func:`check_location`).
    """
    check_location(location)
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
