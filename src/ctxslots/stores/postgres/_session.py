"""The connections a PostgreSQL store works through: its pool, and the one
connection a thread holds for a transaction or a snapshot."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import psycopg

from ...errors import StoreClosedError, StoreError
from ._connections import Connections
from ._errors import store_error

__all__ = ["Session"]


class _Held(threading.local):
    """The connection this thread holds for a transaction or a snapshot."""

    conn: psycopg.Connection[Any] | None = None
    writing: int = 0


@attrs.define
class Session:
    """Transactions per thread over a pool: a thread's :meth:`transaction` holds one
    pool connection until it ends, and every call that thread makes inside it uses
    that connection; other calls borrow a connection for themselves.

    Attributes:
        location: The store's location without secrets, for error messages.
        pool: The pool; ``None`` once closed.
    """

    location: str
    pool: Connections | None = attrs.field(repr=False)
    _held: _Held = attrs.field(init=False, factory=_Held, repr=False)

    @property
    def writing(self) -> bool:
        """Whether this thread is inside a :meth:`transaction` block (its reads lock)."""
        return self._held.writing > 0

    def open_pool(self) -> Connections:
        """The pool, or :class:`StoreClosedError` once closed."""
        if self.pool is None:
            raise StoreClosedError(f"the store at {self.location} is closed",
                                   path=self.location)
        return self.pool

    @contextlib.contextmanager
    def conn(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's held connection, or one borrowed from the pool for the block."""
        try:
            held = self._held.conn
            if held is not None:
                yield held
                return
            with self.open_pool().borrow() as conn:
                yield conn
        except psycopg.Error as exc:
            raise store_error(exc, self.location) from exc

    def iterate(self, produce: Callable[..., Iterator[Any]], *args: Any) -> Iterator[Any]:
        """Rows from a server-side cursor, inside the held transaction or one of its own."""
        with self.conn() as conn:
            if self._held.conn is conn:
                yield from produce(conn, *args)
                return
            with conn.transaction():
                yield from produce(conn, *args)

    def close(self) -> None:
        """Close the pool (idempotent)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; nested blocks are savepoints."""
        held = self._held
        if held.conn is not None:
            if not held.writing:
                raise StoreError("cannot write inside a snapshot() block", path=self.location)
            try:
                with held.conn.transaction():
                    held.writing += 1
                    try:
                        yield
                    finally:
                        held.writing -= 1
            except psycopg.Error as exc:
                raise store_error(exc, self.location) from exc
            return
        try:
            with self.open_pool().borrow() as conn:
                held.conn, held.writing = conn, 1
                try:
                    with conn.transaction():
                        yield
                finally:
                    held.conn, held.writing = None, 0
        except psycopg.Error as exc:
            raise store_error(exc, self.location) from exc

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one moment of the store (a repeatable-read, read-only transaction)."""
        held = self._held
        if held.conn is not None:
            yield
            return
        try:
            with self.open_pool().borrow() as conn:
                held.conn, held.writing = conn, 0
                try:
                    with conn.transaction():
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                        yield
                finally:
                    held.conn = None
        except psycopg.Error as exc:
            raise store_error(exc, self.location) from exc
