"""Ctrl-C at the end of a large import: what it reports is what the store holds."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
from typing import Any

import pytest

from ctxslots import FactStore
from ctxslots.stores.transfer.import_writer import RECOUNT_AFTER

HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})

#: A lock of fact_history that the engine's count of its tables (ANALYZE) waits for.
_COUNT_LOCK = "SHARE UPDATE EXCLUSIVE"


def _lock_waits(watch: Any, *, granted: bool, query: str) -> bool:
    """Whether a session of this database whose statement starts with ``query`` holds
    (``granted``) or waits for (not ``granted``) a lock of fact_history."""
    row = watch.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "JOIN pg_stat_activity a ON a.pid = l.pid WHERE c.relname = 'fact_history' "
        "AND l.granted = %s AND a.datname = current_database() AND a.query ILIKE %s",
        (granted, query + "%")).fetchone()
    return bool(row[0])


def test_ctrl_c_as_a_postgresql_import_of_many_facts_ends_finds_it_whole_or_not_at_all(pg_url):
    """An import of a thousand facts has PostgreSQL count its tables again. A Ctrl-C during
    that count must not report an import the store holds as interrupted: here the count
    waits for a lock another session queued while the import ran, and Ctrl-C arrives then."""
    psycopg = pytest.importorskip("psycopg")
    # With their ids (free in the store), the records are written as their batch is read.
    text = "".join([HEADER + "\n", *(json.dumps({"id": i, "slot": "project", "value": f"Step {i}."})
                                     + "\n" for i in range(1, RECOUNT_AFTER + 1))])
    done = threading.Event()
    with FactStore(pg_url, embedder=False) as store, \
            psycopg.connect(pg_url, autocommit=True) as watch, psycopg.connect(pg_url) as holder:

        def hold() -> None:
            holder.execute(f"LOCK TABLE fact_history IN {_COUNT_LOCK} MODE")

        def queue_a_lock(_handled: int) -> None:
            # The import's count of a thousand facts holds the lock until it commits:
            # queue another session's behind it, granted as the import commits.
            threading.Thread(target=hold, daemon=True).start()
            while not _lock_waits(watch, granted=False, query="LOCK TABLE fact_history"):
                done.wait(0.005)

        def ctrl_c_when_a_count_waits() -> None:
            while not done.is_set():
                if _lock_waits(watch, granted=False, query="ANALYZE"):
                    os.kill(os.getpid(), signal.SIGINT)
                    return
                done.wait(0.005)

        interrupter = threading.Thread(target=ctrl_c_when_a_count_waits, daemon=True)
        interrupter.start()
        report = None
        try:
            report = store.import_jsonl(io.StringIO(text), progress=queue_a_lock)
        except KeyboardInterrupt:
            pass
        finally:
            done.set()
            interrupter.join()
            holder.rollback()
        stored = watch.execute("SELECT count(*) FROM facts").fetchone()[0]
        assert stored == RECOUNT_AFTER  # the import committed before anything could stop it
        assert report is not None, "the import was written, yet it raised KeyboardInterrupt"
        assert report.added == stored


def test_postgresql_counts_every_fact_of_a_large_import_before_it_commits(pg_url):
    """The last count of the tables, now inside the import's transaction, counts the facts the
    import wrote since the one before (at 1,000): the planner sees the store as it is."""
    psycopg = pytest.importorskip("psycopg")
    size = RECOUNT_AFTER + RECOUNT_AFTER // 2
    text = "".join([HEADER + "\n", *(json.dumps({"id": i, "slot": "project", "value": f"Step {i}."})
                                     + "\n" for i in range(1, size + 1))])
    with FactStore(pg_url, embedder=False) as store:
        assert store.import_jsonl(io.StringIO(text)).added == size
    with psycopg.connect(pg_url, autocommit=True) as watch:
        counted = watch.execute("SELECT reltuples FROM pg_class WHERE relname = 'facts'").fetchone()
    assert counted[0] == size
