"""A PostgreSQL server for the benchmarks: the one a URL names, or a private pgserver.

``server(url)`` yields a :class:`Server` whose ``fresh(name)`` creates a new
database and returns its URL, and whose ``database(name)`` returns the URL of
a database, created only when missing. With ``url=None`` it starts
PostgreSQL 16 + pgvector from the ``pgserver`` package in ``folder`` (kept
between runs, so built databases are reused) or in a temporary directory; the
server stops at exit. A URL no server answers at ends the run with one line
(:func:`reachable`).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

__all__ = ["Server", "reachable", "server", "with_database"]


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def reachable(url: str) -> str:
    """``url``, once a server there has accepted a connection.

    :raises SystemExit: None answers, or it refuses the connection (one line: libpq's reason,
        which names the host and port, never the password).
    """
    try:
        psycopg.connect(url, autocommit=True).close()
    except psycopg.OperationalError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SystemExit(f"cannot reach PostgreSQL: {reason}") from None
    return url


@dataclass(frozen=True)
class Server:
    """An administrator's URL on a running server."""

    admin: str

    def fresh(self, name: str) -> str:
        """Drop database ``name`` if it exists, create it empty; its URL."""
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return with_database(self.admin, name)

    def database(self, name: str) -> str:
        """The URL of database ``name``, created empty when missing."""
        with psycopg.connect(self.admin, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                 (name,)).fetchone()
            if found is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        return with_database(self.admin, name)

    def __call__(self, name: str) -> str:
        """:meth:`fresh` (the form older scripts call)."""
        return self.fresh(name)


@contextlib.contextmanager
def server(url: str | None, folder: Path | None = None) -> Iterator[Server]:
    """Yield the server at ``url``, or a private one kept in ``folder`` (default: temporary)."""
    with contextlib.ExitStack() as stack:
        if url is None:
            import pgserver  # type: ignore[import-untyped]

            if folder is None:
                folder = Path(stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="ctxslots-pg-")))
            folder.mkdir(parents=True, exist_ok=True)
            url = str(pgserver.get_server(folder, cleanup_mode="stop").get_uri())
        yield Server(reachable(url))
