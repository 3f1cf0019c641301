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
from ..backend import KeptRead, failed_batch_error
from ._connections import Connections
from ._errors import store_error
from ._libpq import command
from ._rows import reserve_name

__all__ = ["READ_PREPARE_THRESHOLD", "WRITE_PREPARE_THRESHOLD", "Session", "plan_settings"]

#: psycopg prepares a statement once it ran this many times on a connection, inside a write
#: transaction: its statements find their rows by id, key or owners and value through
#: unique or narrow indexes, where a plan kept serves any parameters (planning them again
#: took about a fifth of a flush; BENCHMARKS.md, "Plans kept for writes").
WRITE_PREPARE_THRESHOLD = 5
#: Outside one, a statement is prepared only when it asks to be (``prepare=True``: a
#: search's match by owner terms and its statements by id); any other is planned for its
#: own parameters each time, as an unnamed statement is. A plan made once for any user
#: read every fact of the scopes asked in the profile's statement ("Many users in one
#: store"). psycopg has no setting for "only when asked" (``None`` refuses even that), so
#: the count is one no connection reaches.
READ_PREPARE_THRESHOLD = 2**62


def plan_settings(conn: psycopg.Connection[Any]) -> None:
    """Set up a new connection's plans: PostgreSQL's own choice (``plan_cache_mode =
    auto``) for what is prepared, and nothing prepared outside a write transaction unless
    it asks (:data:`READ_PREPARE_THRESHOLD`)."""
    conn.execute("SET plan_cache_mode = auto")
    conn.prepare_threshold = READ_PREPARE_THRESHOLD


@contextlib.contextmanager
def _kept_plans(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A transaction on an autocommit connection whose statements run often keep their
    plans: committed when the block ends, rolled back when it raises (unless the
    connection is lost, which ends it)."""
    conn.execute(b"BEGIN")
    conn.prepare_threshold = WRITE_PREPARE_THRESHOLD
    try:
        yield
    except BaseException:
        if not conn.broken:
            conn.rollback()  # which also forgets statements prepared inside it
        raise
    finally:
        conn.prepare_threshold = READ_PREPARE_THRESHOLD
    conn.commit()


@contextlib.contextmanager
def _no_transaction(_conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Statements on the held connection, each committed on its own."""
    yield


@contextlib.contextmanager
def _one_moment(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A repeatable-read, read-only transaction: every read inside sees one moment."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


class _Held(threading.local):
    """The connection this thread holds for a transaction or a snapshot, and the names
    its transaction holds advisory locks on (each with the depth of the savepoint that
    took it: a savepoint rolled back releases what it took)."""

    conn: psycopg.Connection[Any] | None = None
    writing: int = 0
    reserved: dict[tuple[str, ...], int] | None = None
    #: The depths whose last block ended and left its savepoint to be released.
    kept: frozenset[int] = frozenset()
    #: Whether a block open on the connection says its blocks take no savepoints.
    unsaved: bool = False
    #: The first error a block inside that one raised (the whole block then fails).
    failure: BaseException | None = None

    def __init__(self) -> None:
        #: The row (or absence) of the name last read under lock, until the next statement
        #: or a savepoint left.
        self.kept_read = KeptRead()


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

    def reserve(self, conn: psycopg.Connection[Any], kind: str, *parts: str) -> None:
        """Hold the transaction's advisory lock on a name (a store setting), taken once a
        transaction: a setting read and then written is reserved once."""
        held, name = self._held, (kind, *parts)
        assert held.reserved is not None, "reserve() runs inside a transaction()"
        if name not in held.reserved:
            reserve_name(conn, kind, *parts)
            held.reserved[name] = held.writing

    @property
    def kept_read(self) -> KeptRead:
        """This thread's last read under lock, kept until this transaction runs another
        statement or leaves a savepoint. The row lock keeps other writers of a row out;
        an absence may be filled by another writer meanwhile, which the insert that
        trusts it finds (the key is taken) and reports."""
        return self._held.kept_read

    def _leave_savepoint(self, rolled_back: bool) -> None:
        """What the savepoint just left took: released with it, or now its parent's."""
        held = self._held
        held.kept_read.forget()
        if not held.reserved:
            return
        taken = [name for name, depth in held.reserved.items() if depth > held.writing]
        for name in taken:
            if rolled_back:
                del held.reserved[name]
            else:
                held.reserved[name] = held.writing

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"the store at {self.location} is closed", path=self.location)

    def open_pool(self) -> Connections:
        """The pool, or :class:`StoreClosedError` once closed."""
        if self.pool is None:
            raise self._closed_error()
        return self.pool

    @contextlib.contextmanager
    def conn(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's held connection, or one borrowed from the pool for the block."""
        try:
            held = self._held.conn
            if held is not None:
                if self.pool is None:  # closed under the block: none of it commits
                    raise self._closed_error()
                # After a failed statement the server refuses all but a rollback; after
                # any failure nothing more of the block is run.
                if self._held.failure is not None:
                    raise failed_batch_error(self._held.failure, self.location)
                self._held.kept_read.forget()  # a statement that may change it
                yield held
                return
            with self.open_pool().borrow() as conn:
                yield conn
        except psycopg.Error as exc:
            if self.pool is None:  # the pool closed while the call waited or ran
                raise self._closed_error() from exc
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
    def transaction(self, *, savepoints: bool = True) -> Iterator[None]:
        """One write transaction; nested blocks are savepoints, except inside a block
        with ``savepoints=False`` (see :meth:`Lifecycle.transaction
        <ctxslots.stores.backend.Lifecycle.transaction>`)."""
        held = self._held
        if held.conn is None:
            with self._holding(_kept_plans, writing=True), self._unsaved(savepoints):
                yield
            return
        if not held.writing:
            raise StoreError("cannot write inside a snapshot() block", path=self.location)
        if held.unsaved:
            with self._unsaved_block():
                yield
            return
        try:
            with self._savepoint(held.conn, held.writing):
                held.writing += 1
                rolled_back = True  # until the block ends without an exception
                try:
                    with self._unsaved(savepoints):
                        yield
                    rolled_back = False
                finally:
                    held.writing -= 1
                    self._leave_savepoint(rolled_back)
        except psycopg.Error as exc:
            raise store_error(exc, self.location) from exc

    @contextlib.contextmanager
    def _unsaved(self, savepoints: bool) -> Iterator[None]:
        """The block just opened at this depth: with ``savepoints=False`` its blocks take
        none, and it fails at its end once one of them failed."""
        held = self._held
        if savepoints:
            yield
            return
        held.unsaved, held.failure = True, None
        try:
            yield
            if held.failure is not None:
                raise failed_batch_error(held.failure, self.location)
        finally:
            held.unsaved, held.failure = False, None

    @contextlib.contextmanager
    def _unsaved_block(self) -> Iterator[None]:
        """A block inside one that takes no savepoints: its first failure fails that one."""
        held = self._held
        if held.failure is not None:
            raise failed_batch_error(held.failure, self.location)
        held.writing += 1
        try:
            yield
        except BaseException as exc:
            if held.failure is None:
                held.failure = exc
            raise
        finally:
            held.writing -= 1
            # Nothing to undo alone: what it took stays until the failing block's end.
            self._leave_savepoint(rolled_back=False)

    @contextlib.contextmanager
    def _savepoint(self, conn: psycopg.Connection[Any], depth: int) -> Iterator[None]:
        """A nested block at ``depth``: a savepoint, rolled back to when the block raises.

        A block that ends leaves its savepoint in place, and the next block at its depth
        releases it in the statement that takes its own (``RELEASE; SAVEPOINT``): one
        round trip a block instead of two, and never more than one savepoint left over
        a depth. Releasing a savepoint releases every one taken after it, so a block that
        ends forgets what its own blocks left. Each depth has one name, which always means
        the savepoint of the block open at that depth.
        """
        held = self._held
        name = f'"ctxslots_{depth}"'
        if depth in held.kept:
            command(conn, f"RELEASE SAVEPOINT {name}; SAVEPOINT {name}")
        else:
            command(conn, f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            if not conn.broken:  # a lost connection took the transaction with it
                command(conn, f"ROLLBACK TO SAVEPOINT {name}")
            raise
        finally:
            # Its savepoint is left, and whatever its blocks left below it goes with that
            # savepoint's release (or went with the rollback).
            held.kept = frozenset(kept for kept in held.kept if kept < depth) | {depth}

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """One search's reads and access count on a connection this thread holds until it
        ends, with no transaction: each statement commits on its own, and those that ask
        to be prepared keep their plans (:data:`READ_PREPARE_THRESHOLD`). Inside a
        transaction or a snapshot this thread holds, that one."""
        return self._holding(_no_transaction)

    def snapshot(self) -> contextlib.AbstractContextManager[None]:
        """Reads inside see one moment of the store (a repeatable-read, read-only transaction)."""
        return self._holding(_one_moment)

    @contextlib.contextmanager
    def _holding(self, opened: Callable[[psycopg.Connection[Any]],
                                        contextlib.AbstractContextManager[None]], *,
                 writing: bool = False) -> Iterator[None]:
        """A transaction ``opened`` on a connection this thread holds for the block: a
        write transaction when ``writing``, else one where no write block may start;
        inside one this thread holds already, that one."""
        held = self._held
        if held.conn is not None:
            yield
            return
        try:
            with self.open_pool().borrow() as conn:
                held.conn, held.writing = conn, int(writing)
                held.reserved = {} if writing else None
                try:
                    with opened(conn):
                        yield
                        if self.pool is None:  # closed inside the block: none of it commits
                            raise self._closed_error()
                finally:
                    held.conn, held.writing, held.reserved = None, 0, None
                    held.kept_read.forget()
                    held.kept = frozenset()
        except psycopg.Error as exc:
            raise store_error(exc, self.location) from exc
