"""Choosing the storage engine from where the store lives.

A ``postgresql://`` (or ``postgres://``) URL selects the PostgreSQL engine;
anything else is the path of a SQLite file.
"""

from __future__ import annotations

import math
import os
import re

from ..errors import StoreError
from .backend import Backend

__all__ = ["BUSY_TIMEOUT_ENV", "DEFAULT_BUSY_TIMEOUT", "busy_timeout", "check_location",
           "is_url", "open_backend"]

#: The variable that sets how long a write waits for another writer's lock, in seconds.
BUSY_TIMEOUT_ENV = "CTXSLOTS_BUSY_TIMEOUT"
#: How long a write waits for another writer's lock when the variable is not set.
DEFAULT_BUSY_TIMEOUT = 30.0

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


def busy_timeout() -> float:
    """Seconds a write waits for another writer's lock: ``$CTXSLOTS_BUSY_TIMEOUT``, else 30.

    :raises StoreError: The variable is not a number of seconds from 0 to 86,400.
    """
    text = os.environ.get(BUSY_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_BUSY_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0.0 <= seconds <= 86_400.0:
        raise StoreError(f"{BUSY_TIMEOUT_ENV} must be a number of seconds from 0 to 86400, "
                         f"not {text[:40]!r}", path=None)
    return seconds


def open_backend(location: str, *, create: bool = True, lexical_cache: bool = False,
                 vector_cache: bool = True) -> Backend:
    """Open the engine ``location`` names.

    A write waits :func:`busy_timeout` seconds for another writer's lock, then
    fails with :class:`~ctxslots.errors.StoreBusyError`.

    :raises StoreError: The store cannot be opened (missing with ``create``
        false, unreachable, not a store, or a schema this version cannot read), or
        ``location`` looks like a URL of no engine (:func:`check_location`).
    """
    check_location(location)
    wait = busy_timeout()
    if is_url(location):
        # The PostgreSQL engine is optional (ctxslots[postgres]): its driver is
        # imported only when a URL asks for it.
        from .postgres import PostgresBackend

        # The database must exist; its schema is created on first use.
        backend: Backend = PostgresBackend(location, create=create, lock_timeout=wait)
        return backend
    from .sqlite import SQLiteBackend

    return SQLiteBackend(location, create=create, lexical_cache=lexical_cache,
                         vector_cache=vector_cache, busy_timeout=wait)
