"""Choosing the storage engine from where the store lives.

A ``postgresql://`` (or ``postgres://``) URL selects the PostgreSQL engine;
anything else is the path of a SQLite file.
"""

from __future__ import annotations

import math
import os
import re

from ..errors import InvalidArgumentError, StoreError
from .backend import Backend

__all__ = ["BUSY_TIMEOUT_ENV", "DEFAULT_BUSY_TIMEOUT", "DEFAULT_POOL_SIZE", "MAX_POOL_SIZE",
           "POOL_SIZE_ENV", "busy_timeout", "check_location", "is_url", "open_backend",
           "pool_size"]

#: The variable that sets how long a write waits for another writer's lock, in seconds.
BUSY_TIMEOUT_ENV = "CTXSLOTS_BUSY_TIMEOUT"
#: How long a write waits for another writer's lock when the variable is not set.
DEFAULT_BUSY_TIMEOUT = 30.0
#: The variable that sets how many connections a PostgreSQL store's pool opens at most.
POOL_SIZE_ENV = "CTXSLOTS_POOL_SIZE"
#: Connections a PostgreSQL store's pool opens at most, unless told otherwise: plenty
#: for an agent process (docs/postgres.md, "Pool sizing").
DEFAULT_POOL_SIZE = 4
#: The most a pool may be given: past a server's connection limit in any set-up.
MAX_POOL_SIZE = 1000

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


def pool_size(given: int | None = None) -> int:
    """Connections a PostgreSQL store's pool opens at most: ``given``, else
    ``$CTXSLOTS_POOL_SIZE``, else :data:`DEFAULT_POOL_SIZE`.

    :raises InvalidArgumentError: ``given`` is not a whole number from 1 to 1,000.
    :raises StoreError: The variable is not such a number.
    """
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or \
                not 1 <= given <= MAX_POOL_SIZE:
            raise InvalidArgumentError(f"pool_size must be a whole number from 1 to "
                                       f"{MAX_POOL_SIZE}, not {given!r}", field="pool_size",
                                       value=given)
        return given
    text = os.environ.get(POOL_SIZE_ENV, "").strip()
    if not text:
        return DEFAULT_POOL_SIZE
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_POOL_SIZE:
        raise StoreError(f"{POOL_SIZE_ENV} must be a whole number from 1 to {MAX_POOL_SIZE}, "
                         f"not {text[:40]!r}", path=None)
    return int(text)


def open_backend(location: str, *, create: bool = True, lexical_cache: bool = False,
                 vector_cache: bool = True, pool: int | None = None) -> Backend:
    """Open the engine ``location`` names.

    A write waits :func:`busy_timeout` seconds for another writer's lock, then
    fails with :class:`~ctxslots.errors.StoreBusyError`. ``pool``: the most
    connections a PostgreSQL store opens (see :func:`pool_size`; a SQLite store
    has one connection).

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
        backend: Backend = PostgresBackend(location, create=create, lock_timeout=wait,
                                           pool_size=pool_size(pool))
        return backend
    if pool is not None:
        pool_size(pool)  # a malformed one is refused on either engine
    from .sqlite import SQLiteBackend

    return SQLiteBackend(location, create=create, lexical_cache=lexical_cache,
                         vector_cache=vector_cache, busy_timeout=wait)
