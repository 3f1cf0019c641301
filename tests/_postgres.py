"""A real PostgreSQL for the tests: a private pgserver, or ``$CTXSLOTS_TEST_POSTGRES_URL``.

One server per test session. Each test gets a database of its own, created
in about 0.1 s by copying a template that already holds the migrated schema
(``empty_database`` gives one without it). On a private server, a database
whose test changed nothing but rows is emptied and handed to the next test
instead (``_pg_reuse``). Databases are dropped at the end of the session on
an external server; a private server is deleted whole.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import attrs
import psycopg

from _pg_reuse import TemplateState

__all__ = ["PostgresServer", "start_server", "with_database", "with_user"]

ENV = "CTXSLOTS_TEST_POSTGRES_URL"


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name``."""
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def with_user(url: str, user: str, password: str | None = None) -> str:
    """``url`` logging in as ``user`` (with ``password`` when given)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    login = user if password is None else f"{user}:{password}"
    return urlunsplit(parts._replace(netloc=f"{login}@{host}"))


@attrs.define
class PostgresServer:
    """The session's server.

    Attributes:
        url: An administrator's URL (a superuser on a private server).
        private: Whether the tests started it (so they may edit its pg_hba.conf).
        data_dir: Its data directory when private.
    """

    url: str
    private: bool
    data_dir: Path | None = None
    _prefix: str = attrs.field(factory=lambda: f"ctxslots_test_{uuid.uuid4().hex[:8]}")
    _numbers: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _created: list[str] = attrs.Factory(list)
    _template: str | None = None
    _state: TemplateState | None = None
    _marks: dict[str, int] = attrs.Factory(dict)
    _clean: list[str] = attrs.Factory(list)

    def admin(self) -> psycopg.Connection:
        """An autocommit administrator connection (close it)."""
        return psycopg.connect(self.url, autocommit=True)

    def empty_database(self) -> str:
        """The URL of a new database without the ctxslots schema."""
        return self._create(None)

    def database(self) -> str:
        """The URL of a database of its own holding the migrated, empty ctxslots schema
        (give it back with ``release``)."""
        if self._template is None:
            name = f"{self._prefix}_template"
            url = self._create(None, name)
            from ctxslots.stores.postgres import PostgresBackend

            PostgresBackend(url, pool_size=1).close()
            self._template = name
            if self.private:
                with psycopg.connect(url, autocommit=True) as conn:
                    self._state = TemplateState.read(conn)
        if self._clean:
            return with_database(self.url, self._clean.pop())
        url = self._create(self._template)
        if self._state is not None:
            with psycopg.connect(url, autocommit=True) as conn:
                self._marks[urlsplit(url).path.lstrip("/")] = self._state.mark(conn)
        return url

    def release(self, url: str) -> None:
        """Give back a database of ``database()``: emptied for the next test when its test
        changed nothing but rows (on a private server), dropped otherwise."""
        name = urlsplit(url).path.lstrip("/")
        since = self._marks.pop(name, None)
        if self._state is not None and since is not None:
            try:
                with psycopg.connect(url, autocommit=True) as conn:
                    mark = self._state.reset(conn, since)
            except psycopg.Error:
                mark = None
            if mark is not None:
                self._marks[name] = mark
                self._clean.append(name)
                return
        self.drop(url)

    def _create(self, template: str | None, name: str | None = None) -> str:
        name = name or f"{self._prefix}_{next(self._numbers)}"
        # FILE_COPY copies a small template faster; on a shared server its
        # checkpoints would cost everyone, so only on the private one.
        strategy = " STRATEGY FILE_COPY" if template and self.private else ""
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"'
                         + (f' TEMPLATE "{template}"{strategy}' if template else ""))
        self._created.append(name)
        return with_database(self.url, name)

    def drop(self, url: str) -> None:
        """Drop the database of ``url`` (made by this session), closing its connections."""
        name = urlsplit(url).path.lstrip("/")
        if name in self._created:
            with self.admin() as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self._created.remove(name)

    def drop_all(self) -> None:
        """Drop every database this session created (external servers)."""
        with self.admin() as conn:
            for name in reversed(self._created):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._created.clear()

    def require_passwords_for(self, role: str) -> bool:
        """Make the private server ask ``role`` for a password; whether it could."""
        if not self.private or self.data_dir is None:
            return False
        hba = self.data_dir / "pg_hba.conf"
        rule = f"local all {role} scram-sha-256\nhost all {role} 127.0.0.1/32 scram-sha-256\n"
        text = hba.read_text()
        if rule not in text:
            hba.write_text(rule + text)
            with self.admin() as conn:
                conn.execute("SELECT pg_reload_conf()")
        return True


def start_server() -> tuple[PostgresServer, object | None]:
    """The external server of ``CTXSLOTS_TEST_POSTGRES_URL``, or a new pgserver.

    Returns the server and the pgserver handle, whose ``cleanup()`` stops the
    server and deletes its directory (``None`` when external). The directory
    is not under pytest's temporary folder: pgserver runs the server as its
    own user when started as root, and pytest's folders are private to root.
    """
    external = os.environ.get(ENV)
    if external:
        return PostgresServer(url=external, private=False), None
    import pgserver  # type: ignore[import-untyped]

    data = Path(tempfile.mkdtemp(prefix="ctxslots-pg-"))
    handle = pgserver.get_server(str(data), cleanup_mode="delete")
    with psycopg.connect(str(handle.get_uri()), autocommit=True) as conn:
        # A throwaway server: durability buys the tests nothing.
        for setting in ("fsync = off", "synchronous_commit = off", "full_page_writes = off"):
            conn.execute(f"ALTER SYSTEM SET {setting}")
        conn.execute("SELECT pg_reload_conf()")
    return PostgresServer(url=str(handle.get_uri()), private=True, data_dir=data), handle
