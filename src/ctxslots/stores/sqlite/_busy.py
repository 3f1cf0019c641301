"""What to say when another connection holds a store file's write lock too long.

A write waits up to the busy timeout for the lock (``BEGIN IMMEDIATE``); past
it, :func:`busy_error` names the file, how long the write waited, the process
holding the lock when the system says (Linux lists POSIX locks in
``/proc/locks``: in WAL mode the write lock is byte 120 of the ``-shm`` file),
and what to do.
"""

from __future__ import annotations

import os

from ...errors import StoreBusyError

__all__ = ["busy_error", "lock_holder"]

#: Where SQLite's WAL write lock sits in the ``-shm`` file (``WALINDEX_LOCK_OFFSET``).
_WAL_WRITE_LOCK_BYTE = 120


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fp:
            raw = fp.read(400)
    except OSError:
        return ""
    words = raw.rstrip(b"\0").split(b"\0")
    text = " ".join(w.decode("utf-8", "replace") for w in words if w)
    # Printable only: the line ends up in a one-line error message.
    return "".join(c if c.isprintable() else "?" for c in text)[:120]


def lock_holder(path: str) -> str | None:
    """Who holds the WAL write lock of the store at ``path``, as the system lists it
    (``"process 4242 (python agent.py)"``, ``"another connection of this process"``);
    ``None`` where it cannot be told (no ``/proc/locks``, another kind of lock)."""
    try:
        shm = os.stat(path + "-shm")
        with open("/proc/locks", encoding="ascii", errors="replace") as fp:
            lines = fp.read().splitlines()
    except OSError:
        return None
    device = f"{os.major(shm.st_dev):02x}:{os.minor(shm.st_dev):02x}:{shm.st_ino}"
    for line in lines:
        parts = line.split()
        # "9: POSIX  ADVISORY  WRITE 10304 fe:00:2433121 120 120"
        if len(parts) < 8 or parts[1] != "POSIX" or parts[3] != "WRITE" or parts[5] != device:
            continue
        try:
            pid, start, end = int(parts[4]), int(parts[6]), parts[7]
        except ValueError:
            continue
        if start > _WAL_WRITE_LOCK_BYTE or (end != "EOF" and int(end) < _WAL_WRITE_LOCK_BYTE):
            continue
        if pid == os.getpid():
            return "another connection of this process"
        command = _command_line(pid)
        return f"process {pid}" + (f" ({command})" if command else "")
    return None


def busy_error(path: str, waited: float) -> StoreBusyError:
    """The error of a write that waited ``waited`` seconds for the lock of ``path``."""
    holder = lock_holder(path) if path != ":memory:" else None
    who = holder or "another connection (a process in a long batch, or an import)"
    return StoreBusyError(
        f"{path} is busy: {who} has held its write lock for more than {waited:g} s, and "
        "nothing was written; run this again once that writer is done (or set "
        "CTXSLOTS_BUSY_TIMEOUT to wait longer)", path=path, waited=waited, holder=holder)
