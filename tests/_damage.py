"""A SQLite store file with a damaged page, as a disk fault leaves one."""

from __future__ import annotations

import apsw


def damage_the_facts_table(path: str) -> None:
    """Overwrite every cell of the ``facts`` table's root page (its header kept), so that
    SQLite opens the file and fails on the first read of a fact."""
    conn = apsw.Connection(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'facts'"
                            ).fetchall()[0][0]
        size = conn.execute("PRAGMA page_size").fetchall()[0][0]
    finally:
        conn.close()
    with open(path, "r+b") as fp:
        fp.seek((root - 1) * size + 8)
        fp.write(b"\xee" * (size - 8))
