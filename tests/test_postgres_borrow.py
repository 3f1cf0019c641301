"""Borrowing a pooled PostgreSQL connection: an idle connection the server said nothing to
is lent without a round trip, and one whose session the server ended is replaced."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")

from ctxslots.stores.postgres._connections import Connections


def _pool(url: str) -> Connections:
    return Connections(url, max_size=1, timeout=10.0, configure=lambda conn: None)


def _traced_borrow(connections: Connections, conn: psycopg.Connection, trace: Path
                   ) -> tuple[bool, int]:
    """Borrow with libpq tracing what ``conn`` sends and receives: whether ``conn`` was
    lent, and the server process of the one lent (asked once the trace is off)."""
    with trace.open("w") as out:
        conn.pgconn.trace(out.fileno())
        try:
            with connections.borrow() as lent:
                conn.pgconn.untrace()
                return lent is conn, lent.execute("SELECT pg_backend_pid()").fetchone()[0]
        finally:
            if not conn.closed:
                conn.pgconn.untrace()


def test_an_idle_connection_the_server_said_nothing_to_is_lent_without_a_round_trip(
        pg_url, tmp_path):
    """Lent again after a query, a healthy connection sends and reads nothing on the way."""
    connections = _pool(pg_url)
    try:
        with connections.borrow() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # The trace records each message: it does see a check that goes to the server.
        checked = tmp_path / "checked"
        with checked.open("w") as out:
            conn.pgconn.trace(out.fileno())
            conn.execute("")
            conn.pgconn.untrace()
        assert "Query" in checked.read_text()

        trace = tmp_path / "borrow"
        assert _traced_borrow(connections, conn, trace) == (True, conn.info.backend_pid)
        assert trace.read_text() == ""
    finally:
        connections.close()


def test_a_connection_whose_session_the_server_ended_is_replaced(pg_url, tmp_path):
    """The server ended the pooled connection's session while it sat idle: the borrow reads
    why, and lends a connection to a new server process instead."""
    connections = _pool(pg_url)
    try:
        with connections.borrow() as conn:
            old = conn.info.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (old,)).fetchone() == (True,)
            # The server process says why and leaves a moment later: wait until it has.
            while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                (old,)).fetchone() != (0,):
                time.sleep(0.05)
        trace = tmp_path / "borrow"
        same, pid = _traced_borrow(connections, conn, trace)
        assert "terminating connection" in trace.read_text()  # what the check read
        assert not same and pid != old
    finally:
        connections.close()
