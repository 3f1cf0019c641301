"""Statements sent straight through libpq, for the few a write runs around each row.

A statement through a psycopg cursor also pays for the cursor's own work (its result
bookkeeping, the query's conversion, the decision to prepare): in a quiet loop a savepoint
took 75-115 µs that way and about 30 µs straight through libpq. A savepoint and a key's
advisory lock take no rows back and are never worth preparing, so they skip the cursor
(BENCHMARKS.md, "Plans kept for writes"). Their errors are psycopg's, as if a cursor had
run them.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import pq

from ._sql import Conn

__all__ = ["command", "statement"]


def command(conn: Conn, text: str) -> None:
    """Run ``text`` (one or more statements without parameters or rows)."""
    _check(conn, conn.pgconn.exec_(text.encode(conn.info.encoding)))


def statement(conn: Conn, text: str, params: Sequence[str]) -> None:
    """Run one statement with text parameters (``$1``, ``$2``...) and drop its rows."""
    encoding = conn.info.encoding
    _check(conn, conn.pgconn.exec_params(text.encode(encoding),
                                         [p.encode(encoding) for p in params]))


def _check(conn: Conn, result: pq.abc.PGresult) -> None:
    if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
        error = psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
        if conn.pgconn.status == pq.ConnStatus.BAD and \
                not isinstance(error, psycopg.OperationalError):
            # A connection lost with no error from the server carries no SQLSTATE, which
            # libpq's result turns into a bare DatabaseError; a cursor says OperationalError.
            # What the server said before closing it (FATAL: terminating connection due to
            # idle-in-transaction timeout...) is in the connection's message, not the result's.
            said = conn.pgconn.error_message.decode(conn.info.encoding, "replace").strip()
            raise psycopg.OperationalError(said or str(error)) from error
        raise error
