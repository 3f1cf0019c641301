"""Threads sharing one SQLite connection take turns: none meets another inside the driver."""

from __future__ import annotations

import sys
import threading
from typing import Any

from ctxslots.stores.sqlite import open_connection

#: How long the reading thread, stopped before it reads its columns, gives another thread to
#: get inside SQLite. When the connection takes turns the other thread cannot, so a passing
#: run waits this long once; a slow machine can only make a broken connection pass, not fail.
_CHANCE_S = 2.0


def test_a_thread_between_its_statement_and_its_columns_keeps_the_connection(tmp_path):
    """One thread is stopped right before it reads the column names of the query it ran; a
    second thread then runs a statement on the same connection. Reading the columns must not
    meet the second statement inside apsw (``ThreadingViolationError``): both get their rows."""
    conn = open_connection(tmp_path / "store.db")
    go, inside, done = threading.Event(), threading.Event(), threading.Event()

    def hold(_: Any) -> int:
        inside.set()
        done.wait(60)
        return 7

    conn.raw.create_scalar_function("hold", hold, 1)
    other: list[Any] = []

    def run_other() -> None:
        go.wait(60)
        try:
            other.append(conn.rows("SELECT hold(1) AS held"))
        except Exception as exc:  # reported by the assertion below
            other.append(exc)

    def stop_before_columns(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__name__", "") == "get_description":
            sys.setprofile(None)
            go.set()
            inside.wait(_CHANCE_S)

    second = threading.Thread(target=run_other)
    second.start()
    sys.setprofile(stop_before_columns)
    try:
        mine = conn.rows("SELECT 1 AS one")
    finally:
        sys.setprofile(None)
        go.set()
        done.set()
        second.join(60)
        conn.close()
    assert [{"one": 1}] == mine
    assert [[{"held": 7}]] == other


def test_a_result_read_in_part_leaves_no_read_open_for_a_writer(tmp_path):
    """A caller reads one row of a larger result and leaves the rest; meanwhile another
    connection (the access writer's, another process) commits. A write on the first
    connection must still begin: a statement left open would hold its read transaction on
    the older snapshot, and SQLite would refuse the write at once (``SQLITE_BUSY_SNAPSHOT``)."""
    path = tmp_path / "store.db"
    conn, other = open_connection(path), open_connection(path)
    try:
        with conn.write():
            conn.execute("CREATE TABLE t (n INTEGER)")
            conn.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(5)])
        result = iter(conn.execute("SELECT n FROM t ORDER BY n"))
        assert (0,) == next(result)
        with other.write():
            other.execute("INSERT INTO t VALUES (5)")
        with conn.write():
            conn.execute("INSERT INTO t VALUES (6)")
        assert [(1,), (2,), (3,), (4,)] == list(result)  # the rest, as the statement saw it
        assert list(range(7)) == [n for (n,) in conn.execute("SELECT n FROM t ORDER BY n")]
    finally:
        conn.close()
        other.close()
