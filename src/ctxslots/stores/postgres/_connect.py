"""Reaching a PostgreSQL server: URLs, the first connection, the checks, the pool.

Every failure to connect becomes one :class:`~ctxslots.errors.StoreError`
whose message says what to do (start the server, fix the password, create
the database, install pgvector...). libpq reports these failures as text
only (no SQLSTATE), so they are told apart by the words libpq uses.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from ...errors import StoreError
from ._schema import migrate, schema_version
from ._url import safe_location

__all__ = [
    "CLIENT_ENCODING",
    "MIN_SERVER_VERSION",
    "MIN_VECTOR_VERSION",
    "check_encoding",
    "check_server",
    "connect_error",
    "open_pool",
]

#: The oldest PostgreSQL the schema runs on (generated columns: 12).
MIN_SERVER_VERSION = 120000
#: The oldest pgvector with HNSW indexes.
MIN_VECTOR_VERSION = (0, 5, 0)
#: The encoding every connection speaks, whatever the URL's options or PGCLIENTENCODING
#: say: facts are Python strings, and any other encoding cannot carry all of them.
CLIENT_ENCODING = "UTF8"

def connect_error(exc: psycopg.Error, url: str) -> StoreError:
    """A :class:`StoreError` naming what to do about a failed connection attempt."""
    where = safe_location(url)
    params = _params(url)
    text = str(exc)
    detail = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if "password authentication failed" in text or "no password supplied" in text:
        what = (f"cannot log in to {where} as {params.get('user') or 'the default user'}: the "
                "password was refused; put the right one in the URL, PGPASSWORD or ~/.pgpass")
    elif re.search(r'database "[^"]*" does not exist', text):
        what = (f"the database {params.get('dbname')!r} does not exist on {where}: create it "
                "(createdb, or CREATE DATABASE) or fix the URL")
    elif (role := re.search(r'role "([^"]*)" does not exist', text)) is not None:
        what = (f"the server at {where} has no role {role.group(1)!r}: create it "
                "(CREATE ROLE ... LOGIN) or fix the user in the URL")
    elif re.search(r"invalid [\w ]+ value|invalid URI query parameter", text):
        what = (f"the URL of {where} has an invalid option: "
                f"{detail.removeprefix('connection is bad: ')}; fix it in the URL")
    elif (said := re.search(r'FATAL:\s+(.*(?:configuration parameter|parameter "[^"]*").*)',
                            text)) is not None:
        # libpq reads PGOPTIONS when the URL gives no options of its own.
        named, fix = (("PGOPTIONS", "PGOPTIONS")
                      if not params.get("options") and os.environ.get("PGOPTIONS")
                      else ("the URL's options", "the URL's options=-c ..."))
        what = (f"the PostgreSQL server at {where} refused a setting of {named}: "
                f"{said.group(1).strip()}; fix or remove it in {fix}")
    elif (kind := re.search(r"(session|server) is (not )?(read-only|in hot standby mode)",
                            text)) is not None:
        # libpq reads PGTARGETSESSIONATTRS when the URL does not say.
        named, asking = (("PGTARGETSESSIONATTRS", "PGTARGETSESSIONATTRS")
                         if not params.get("target_session_attrs")
                         and os.environ.get("PGTARGETSESSIONATTRS")
                         else ("the URL's target_session_attrs", "target_session_attrs"))
        what = (f"no server at {where} is of the kind {named} asks for ({kind.group(0)}): "
                f"point the URL at such a server, or change {asking}")
    elif "Hot standby mode is disabled" in text:
        what = (f"the PostgreSQL server at {where} is a standby that takes no connections "
                "while it replays (its hot_standby is off): point the URL at the primary, or "
                "turn hot_standby on")
    elif (state := re.search(r"the database system is ([\w ]+)", text)) is not None:
        what = (f"the PostgreSQL server at {where} answered but takes no connections now "
                f"(the database system is {state.group(1).strip()}): try again once it is "
                "up")
    elif re.search(r"too many (clients|connections)|remaining connection slots", text):
        what = (f"the PostgreSQL server at {where} takes no more connections ({detail}): close "
                "idle clients, give the stores smaller pools (pool_size), or raise the "
                "server's max_connections or the role's connection limit")
    elif "timeout expired" in text or "timed out" in text:
        what = (f"the PostgreSQL server at {where} did not answer in time: check that it runs "
                "and that the host and port in the URL are right")
    elif (fatal := re.search(r"FATAL:\s+(.*)", text)) is not None:
        # The server answered, and refused this login: no reason to look for another one.
        what = (f"the PostgreSQL server at {where} refused the connection "
                f"({fatal.group(1).strip()}): fix the user or database in the URL, or have "
                "an administrator let the role in (its LOGIN, CONNECT on the database, an "
                "entry in pg_hba.conf)")
    elif isinstance(exc, psycopg.OperationalError) and (
            "connection" in text or "could not" in text or "failed" in text):
        what = (f"cannot reach a PostgreSQL server at {where}: start it, or fix the host and "
                f"port in the URL ({detail})")
    else:
        what = f"cannot connect to {where}: {detail}"
    if _shows_password(url, what):
        what = (f"cannot read the URL of {where}: its password holds a character the URL "
                "gives a meaning to (@ / # ?, & in the query) or a % not followed by two hex "
                "digits; write it percent-encoded (%40 for @, %2F for /, %23 for #, %3F for "
                "?, %26 for &, %25 for %), or put it in PGPASSWORD or ~/.pgpass")
    return StoreError(what, path=where)


def _shows_password(url: str, text: str) -> bool:
    """Whether ``text`` shows the password written in ``url``, or a piece of it.

    A password written with a character the URL gives a meaning to is cut in pieces by
    libpq's parser, which then names a piece in its error (as a host, a port, a bad
    percent-encoding).
    """
    rest = url.partition("://")[2]
    # An ``@`` of the query (``?user=ada@prod``, ``application_name=etl@night``) ends no
    # user name: the user's part is looked for before it. One that a host and database
    # follow (``@host/db``) ends a password that holds ``?name=value`` itself.
    if "/" not in rest.rpartition("@")[2].partition("&")[0]:
        rest = _QUERY.sub("", rest)
    userinfo = rest.rpartition("@")[0]
    written = [(userinfo.partition(":")[2], _CUT)]
    # In the query an ``&`` cuts it too: what follows reads as a parameter of its own
    # (up to the next ``name=``), which libpq names as malformed.
    written += [(each, _QUERY_CUT) for each in re.findall(
        r"(?:^|&)password=((?:[^&]|&(?!\w+=))*)", url.partition("?")[2])]
    # Only a password the parser cuts: a well-formed one is never named by libpq, and
    # may well be a word the message holds anyway (the user's name, a number of the host).
    pieces = {piece for each, cut in written if cut.search(each)
              for piece in (each, unquote(each), *cut.split(each))}
    return any(len(piece) >= 2 and piece in text for piece in pieces)


#: What cuts a password written in a URL into pieces: a character the URL gives a meaning
#: to, or a ``%`` not followed by two hex digits.
_CUT = re.compile(r"[@/#?]|%(?![0-9A-Fa-f]{2})")

#: What cuts a password written in the URL's query (``?password=...``) into pieces.
_QUERY_CUT = re.compile(_CUT.pattern + "|&")

#: The URL's query at its end, ``?name=value&...``: where a password is never written.
_QUERY = re.compile(r"\?\w+=[^&]*(?:&\w+=[^&]*)*$")


def _params(url: str) -> dict[str, Any]:
    try:
        return dict(conninfo_to_dict(url))
    except psycopg.Error:
        return {}


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def check_server(where: str, server_version: int, vector_version: str | None,
                 vector_available: str | None) -> None:
    """Refuse a server too old for the schema, or without a usable pgvector.

    :param server_version: ``server_version_num`` (160002 for 16.2).
    :param vector_version: The ``vector`` extension's version in the database,
        or ``None`` when it is not created there.
    :param vector_available: The version the server could create, or ``None``
        when pgvector is not installed on the server.
    :raises StoreError: Saying what to upgrade or install.
    """
    if server_version < MIN_SERVER_VERSION:
        major = server_version // 10000
        raise StoreError(
            f"the PostgreSQL server at {where} is version {major}, too old for the ctxslots "
            f"schema (it needs {MIN_SERVER_VERSION // 10000} or later): upgrade the server",
            path=where)
    minimum = ".".join(map(str, MIN_VECTOR_VERSION))
    if vector_version is None and vector_available is None:
        raise StoreError(
            f"the PostgreSQL server at {where} does not have pgvector installed: install it on "
            "the server (package postgresql-NN-pgvector, or from source), then run "
            "CREATE EXTENSION vector in the database", path=where)
    version = vector_version if vector_version is not None else vector_available
    assert version is not None
    if _version_tuple(version) < MIN_VECTOR_VERSION:
        step = ("ALTER EXTENSION vector UPDATE" if vector_version is not None
                else "install a newer pgvector on the server")
        raise StoreError(
            f"pgvector {version} at {where} is too old (HNSW indexes need {minimum} or later): "
            f"{step}", path=where)


def check_encoding(conn: psycopg.Connection[Any], location: str) -> None:
    """Refuse a database whose encoding is not UTF-8.

    A ``LATIN1`` (or any other single-byte) database cannot hold every character a fact
    may hold, and a ``SQL_ASCII`` one stores the bytes but splits the words of scripts
    beyond ASCII differently, so a search would not find what it finds elsewhere.

    :raises StoreError: Naming the database's encoding and how to make a UTF-8 one.
    """
    encoding = conn.info.parameter_status("server_encoding") or "unknown"
    if encoding.upper() not in ("UTF8", "UTF-8"):
        dbname = conn.info.dbname
        raise StoreError(
            f"the database {dbname!r} at {location} has encoding {encoding}, which cannot "
            "hold or search every character a fact may hold: keep the store in a UTF-8 "
            "database, made with CREATE DATABASE ... TEMPLATE template0 ENCODING 'UTF8' "
            "(nothing was created)", path=location)


def prepare_database(conn: psycopg.Connection[Any], location: str, *, create: bool) -> int:
    """Check the database's encoding, the server and pgvector, bring the schema up to
    date; the ``vector`` type's oid.

    :raises StoreError: The database is not UTF-8, the server or pgvector is too old,
        or (``create`` false) the database holds no store; nothing is created then.
    """
    check_encoding(conn, location)
    versions = conn.execute(
        "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
        "(SELECT default_version FROM pg_available_extensions WHERE name = 'vector')"
    ).fetchone()
    assert versions is not None
    check_server(location, conn.info.server_version, versions[0], versions[1])
    if versions[0] is not None:
        _check_vector_visible(conn, location)
    if not create and schema_version(conn) == 0:
        raise StoreError(
            f"no store in the database at {location}: write a fact first "
            f"(`ctxslots --db {location} remember ...`) or pass the URL of an existing "
            "store (nothing was created)", path=location)
    migrate(conn, location)
    oid = conn.execute("SELECT 'vector'::regtype::oid").fetchone()
    assert oid is not None
    return int(oid[0])


def _check_vector_visible(conn: psycopg.Connection[Any], location: str) -> None:
    """Refuse a connection whose ``search_path`` does not reach the ``vector`` type.

    :raises StoreError: Naming the extension's schema and the search_path, before
        anything is created.
    """
    found = conn.execute(
        "SELECT to_regtype('vector') IS NOT NULL, e.extnamespace::regnamespace::text, "
        "current_setting('search_path') FROM pg_extension e WHERE e.extname = 'vector'"
    ).fetchone()
    assert found is not None
    visible, schema, search_path = found
    if not visible:
        raise StoreError(
            f"the vector extension of {location} is in schema {schema}, which the role "
            f"does not reach through its search_path ({search_path}): put {schema} on it "
            f"(in the URL, options=-c search_path=...,{schema}; or ALTER ROLE ... SET "
            f"search_path) and grant the role USAGE on {schema} (nothing was created)",
            path=location)


def open_pool(url: str, *, min_size: int, max_size: int, timeout: float,
              configure: Callable[[psycopg.Connection[Any]], None]) -> ConnectionPool:
    """A connection pool on ``url`` whose connections are in autocommit mode.

    Transactions are opened explicitly (``conn.transaction()``), so a
    connection handed back to the pool never holds one. The pool does not check
    the connections it hands out: the borrower does (see ``_connections``), so a
    dead one is reported at once instead of retried until the timeout.
    """
    pool = ConnectionPool(
        url, min_size=min_size, max_size=max_size, timeout=timeout, open=False,
        kwargs={"autocommit": True, "client_encoding": CLIENT_ENCODING}, configure=configure,
        # psycopg_pool names the pool in its log lines: say which store they are about.
        name=f"ctxslots {safe_location(url)}")
    try:
        pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        pool.close()
        raise StoreError(f"cannot open connections to {safe_location(url)}: {exc}",
                         path=safe_location(url)) from exc
    return pool
