"""Another process or session holding a store's write lock until released, for tests of
what writers see meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import ctxslots
from ctxslots import FactStore

HOLDER = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


class SQLiteHolder:
    """Another process holding the write lock of a SQLite store until released;
    ``arguments`` are put on its command line after the path."""

    def __init__(self, path: Path, *arguments: str) -> None:
        src = str(Path(ctxslots.__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
        self.child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), *arguments],
                                      env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True)
        assert self.child.stdout is not None and self.child.stdin is not None
        assert "held" == self.child.stdout.readline().strip()

    def release(self) -> None:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write("\n")
        self.child.stdin.close()
        assert 0 == self.child.wait(60)
        self.child.stdout.close()


class PostgresHolder:
    """Another session holding a lock on the facts table that every write needs."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url)
        self.conn.execute("BEGIN")
        self.conn.execute("LOCK TABLE facts IN SHARE MODE")

    def release(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def holder_of(store: FactStore, *arguments: str) -> SQLiteHolder | PostgresHolder:
    """A holder of ``store``'s write lock, on its engine."""
    if store.engine == "sqlite":
        return SQLiteHolder(Path(str(store.path)), *arguments)
    return PostgresHolder(str(store.path))


def inside_a_sqlite_write(threads: list[threading.Thread]) -> bool:
    """Whether one of ``threads`` is inside a SQLite connection's write block, as a write
    waiting for another process's lock is."""
    frames = sys._current_frames()
    for thread in threads:
        frame = frames.get(thread.ident or 0)
        while frame is not None:
            code = frame.f_code
            if code.co_name == "write" and code.co_filename.endswith("_connection.py"):
                return True
            frame = frame.f_back
    return False

