"""PostgreSQL errors as :class:`~ctxslots.errors.StoreError` messages that say what to do."""

from __future__ import annotations

import psycopg
from psycopg import errors as pgerrors
from psycopg_pool import PoolTimeout

from ...errors import ReadOnlyStoreError, StoreBusyError, StoreError, StoreFullError

__all__ = ["LARGER_POOL", "read_only_role", "store_error"]

#: What to do when every connection of a store's pool stayed busy.
LARGER_POOL = ("give the store a larger pool (FactStore(pool_size=N), or $CTXSLOTS_POOL_SIZE) "
               "or shorten long transactions")


def store_error(exc: psycopg.Error, where: str) -> StoreError:
    """The :class:`StoreError` for an error met while using the store at ``where``."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    busy = _busy(exc, where)
    if busy is not None:
        return StoreBusyError(f"{busy} ({detail})", path=where)
    if isinstance(exc, PoolTimeout):
        what = f"every connection to {where} stayed busy: {LARGER_POOL} ({detail})"
    elif isinstance(exc, (pgerrors.DeadlockDetected, pgerrors.SerializationFailure)):
        what = (f"a transaction at {where} conflicted with another writer and was rolled back "
                f"(inside a batch, the write that met it): run it again ({detail})")
    elif isinstance(exc, pgerrors.UndefinedTable):
        what = (f"the ctxslots tables are missing at {where}: open the store again to create "
                f"them, or check the URL's database and search_path ({detail})")
    elif isinstance(exc, pgerrors.InsufficientPrivilege):
        what = f"the role of {where} lacks a privilege the store needs: {detail}"
    elif isinstance(exc, pgerrors.ReadOnlySqlTransaction):
        return ReadOnlyStoreError(
            f"{where} is read-only (a replica, or a snapshot block): write through the "
            f"primary ({detail})", path=where)
    elif isinstance(exc, pgerrors.DiskFull):
        return StoreFullError(
            f"the disk of {where} is full, and the transaction was rolled back (inside a "
            f"batch, the write that met it): make room on the server ({detail})", path=where)
    elif (exc.sqlstate or "").startswith("53"):  # class 53, insufficient resources
        # Checked before OperationalError, which they are: the server answered, it ran out.
        what = (f"{where} ran out of a resource (shared memory for locks, disk, "
                f"connections), and the transaction was rolled back (inside a batch, the "
                f"write that met it): make it smaller, or raise the server's limit ({detail})")
    elif (exc.sqlstate or "").startswith("54"):  # class 54, program limit exceeded
        # An OperationalError too, though the connection is fine: the statement was too big.
        what = (f"{where} refused the statement: it passes a limit of PostgreSQL (such as the "
                f"2,704 bytes of an index row, which holds a fact's owners and key together), "
                f"and the transaction was rolled back (inside a batch, the write that met "
                f"it): use shorter owner names or a shorter key ({detail})")
    elif isinstance(exc, pgerrors.IdleInTransactionSessionTimeout) \
            or "idle-in-transaction timeout" in detail:
        what = (f"{where} ended the session of a transaction left idle past the server's "
                "idle_in_transaction_session_timeout, and nothing of the transaction was "
                "written: keep slow work (a model's call) out of a batch, or raise the "
                f"setting for the store's role ({detail})")
    elif isinstance(exc, psycopg.OperationalError):
        what = f"lost the connection to {where}: check the server and try again ({detail})"
    else:
        what = f"PostgreSQL error at {where}: {detail}"
    return StoreError(what, path=where)


def _busy(exc: psycopg.Error, where: str) -> str | None:
    """What kept a call from running, when the server made it wait too long."""
    if isinstance(exc, pgerrors.LockNotAvailable):
        return (f"{where} is busy: another session (a long batch, an import, a LOCK) held a "
                "lock this call needs past the lock timeout, and nothing was written; run it "
                "again once that is done (or set CTXSLOTS_BUSY_TIMEOUT to wait longer)")
    if isinstance(exc, pgerrors.QueryCanceled):
        # Checked before OperationalError, which it is: the connection is fine, the
        # server's statement_timeout (of the role, the database or the URL) ran out.
        return (f"{where} cancelled a statement, and nothing was written: most often the "
                "server's statement_timeout (set on the role, the database or the URL's "
                "options) ran out while the statement waited or worked; raise it for the "
                "store's role, or run this again")
    return None


def read_only_role(exc: pgerrors.InsufficientPrivilege, where: str, user: str) -> ReadOnlyStoreError:
    """The error of a role that may read the store but not write what reads count (an
    account granted ``SELECT`` alone): such a store is read-only, as a replica is."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "permission denied"
    return ReadOnlyStoreError(
        f"{where} is read-only for role {user!r} ({detail}): write through a role granted "
        "UPDATE on the store's tables", path=where)
