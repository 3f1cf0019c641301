"""A PostgreSQL server for the benchmarks: the one a URL names, or a private pgserver.

``server(url)`` yields a function that creates a fresh database and returns
its URL. With ``url=None`` it starts PostgreSQL 16 + pgvector from the
``pgserver`` package in a temporary directory (stopped at exit).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@contextlib.contextmanager
def server(url: str | None) -> Iterator[Callable[[str], str]]:
    """Yield ``fresh(name) -> url``: drops and creates database ``name`` on the server."""
    with contextlib.ExitStack() as stack:
        if url is None:
            import pgserver  # type: ignore[import-untyped]

            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxslots-pg-"))
            url = str(pgserver.get_server(folder, cleanup_mode="stop").get_uri())
        admin = url

        def fresh(name: str) -> str:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
            return with_database(admin, name)

        yield fresh
