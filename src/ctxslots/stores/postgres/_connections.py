"""Borrowing connections, and coming back promptly after the server was away.

A connection taken from the pool is asked whether it still answers only when the
server has sent it something while it sat idle: a server that stops or restarts, or
ends the session, says so on each connection before closing it, while a healthy idle
connection receives nothing. So the usual borrow costs no round trip.

A pool left to itself reconnects with a backoff that doubles up to minutes, so
calls kept failing long after a restarted server answered again, each waiting
the whole pool timeout and then advising a larger pool. Here a connection found
broken marks the server as lost; while it is lost, each call first tries one
direct connection: refused, the call fails at once saying the server does not
answer; accepted, the pool is replaced by a fresh one and the call goes on. A call
the pool keeps waiting past a second asks the server the same way, so a pool that
cannot reconnect does not hold it for the whole timeout either.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ...errors import StoreError
from ._connect import connect_error, open_pool
from ._errors import LARGER_POOL
from ._url import safe_location

__all__ = ["Connections", "connection_lost"]

# The pool logs each failed reconnection attempt and each broken connection it
# drops as a warning, and psycopg a pipeline it could not close on a lost
# connection; with no logging configured Python prints them to stderr (hundreds of
# lines while every call succeeds). What matters reaches the caller as a
# StoreError; an application that configures logging still gets them.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

#: SQLSTATEs of a server that went away (class 08: connection exception;
#: 57P01-57P03: shut down by an administrator, crashed, cannot connect now).
_LOST_STATES = ("57P01", "57P02", "57P03")

#: Seconds the old pool's threads get to stop once a fresh pool replaced it.
_OLD_POOL_GRACE = 1.0

#: Seconds a borrower waits for the pool before it asks the server directly whether
#: it answers (a pool that cannot reconnect would otherwise hold it the whole timeout).
_FIRST_WAIT = 1.0


def connection_lost(exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> bool:
    """Whether ``exc`` (met on ``conn``) means the connection or the server is gone."""
    if conn is not None and conn.broken:
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _LOST_STATES


def _quiet(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` is idle, open, and the server has sent it nothing since its last
    reply (nothing to read on its socket): then it answers as well as a ping would say."""
    if conn.closed or conn.broken \
            or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return False
    try:
        fd = conn.fileno()
    except psycopg.Error:
        return False
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)  # errors and hang-ups are always reported
    readable, _, failed = select.select([fd], [], [fd], 0)
    return not readable and not failed


@attrs.define
class Connections:
    """The pool of a PostgreSQL store, replaced by a fresh one after an outage.

    Attributes:
        url: The server's URL.
        max_size: Most connections the pool opens.
        timeout: Seconds to wait for a connection (the pool's, and one direct
            attempt's while the server is lost).
        configure: Run on each new connection.
    """

    url: str = attrs.field(repr=False)
    max_size: int
    timeout: float
    configure: Callable[[psycopg.Connection[Any]], None] = attrs.field(repr=False)
    location: str = attrs.field(init=False, default="")
    _pool: ConnectionPool | None = attrs.field(init=False, default=None, repr=False)
    _lost: bool = attrs.field(init=False, default=False)
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock, repr=False)

    def __attrs_post_init__(self) -> None:
        self.location = safe_location(self.url)
        self._pool = self._new_pool()

    def _new_pool(self) -> ConnectionPool:
        return open_pool(self.url, min_size=1, max_size=self.max_size, timeout=self.timeout,
                         configure=self.configure)

    def _current(self) -> ConnectionPool:
        pool = self._pool
        if pool is None:
            raise StoreError(f"the store at {self.location} is closed", path=self.location)
        return pool

    @contextlib.contextmanager
    def borrow(self) -> Iterator[psycopg.Connection[Any]]:
        """A working connection for the block, returned to its pool after it.

        :raises StoreError: The server does not answer (at once, not after the
            pool's timeout), or every connection stayed busy.
        """
        if self._lost:
            self._recover()
        pool = self._current()
        conn = self._checked_out(pool)
        if conn is None:  # the pool's connection was dead: the server went away or restarted
            self._lost = True
            self._recover()
            pool = self._current()
            conn = self._checked_out(pool)
            if conn is None:
                self._lost = True
                raise StoreError(f"lost the connection to {self.location} again as soon as "
                                 "it was made: check the server", path=self.location)
        try:
            yield conn
        except psycopg.Error as exc:
            if connection_lost(exc, conn):
                self._lost = True
            raise
        finally:
            pool.putconn(conn)

    def _checked_out(self, pool: ConnectionPool) -> psycopg.Connection[Any] | None:
        """A connection from ``pool`` that answers, or ``None`` when the one it gave
        was broken (given back: the pool drops it)."""
        try:
            conn = pool.getconn(timeout=min(_FIRST_WAIT, self.timeout))
        except PoolTimeout:
            self._probe()  # the server away: fail now, not at the end of the timeout
            try:
                conn = pool.getconn(timeout=max(0.0, self.timeout - _FIRST_WAIT))
            except PoolTimeout as exc:
                raise self._timed_out(exc) from None
        if _quiet(conn):
            return conn
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            pool.putconn(conn)
            return None
        return conn

    def _probe(self) -> None:
        """One direct connection, closed at once.

        :raises StoreError: The server does not take it (marked as lost).
        """
        try:
            psycopg.connect(self.url, connect_timeout=max(2, int(self.timeout))).close()
        except psycopg.Error as exc:
            self._lost = True
            raise self._away(exc) from None

    def _timed_out(self, exc: PoolTimeout) -> StoreError:
        """Why no connection came in time: the server is away (its error), or every
        connection stayed busy."""
        try:
            self._probe()
        except StoreError as away:
            return away
        return StoreError(f"every connection to {self.location} stayed busy for "
                          f"{self.timeout:g} s: {LARGER_POOL} ({exc})", path=self.location)

    def _away(self, exc: psycopg.Error) -> StoreError:
        """The error of a server that does not take a connection now."""
        error = connect_error(exc, self.url)
        # Stopped, or shutting down or starting up: for a store in use, both are away.
        if str(error).startswith("cannot reach") or "takes no connections now" in str(error):
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "no answer"
            return StoreError(f"the PostgreSQL server at {self.location} does not answer "
                              f"({detail}): calls work again as soon as it is back",
                              path=self.location)
        return error

    def _recover(self) -> None:
        """While the server is lost: one direct attempt; accepted, a fresh pool.

        :raises StoreError: The server still does not take a connection.
        """
        with self._lock:
            if not self._lost:
                return  # another thread recovered first
            try:
                psycopg.connect(self.url, connect_timeout=max(2, int(self.timeout))).close()
            except psycopg.Error as exc:
                raise self._away(exc) from None
            old, self._pool = self._current(), self._new_pool()
            self._lost = False
        old.close(timeout=_OLD_POOL_GRACE)

    @property
    def pool(self) -> ConnectionPool:
        """The pool now in use (for its statistics)."""
        return self._current()

    def close(self) -> None:
        """Close the pool (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
