"""PostgreSQL migrations that rebuild an index let searches read meanwhile."""

from __future__ import annotations

import threading

import pytest

from ctxslots import FactStore


def test_rebuilding_the_owners_index_keeps_no_read_waiting(pg_url: str) -> None:
    """Schema 11 rebuilds ``facts_owners``: it builds the new index before it drops the old
    one, so while the build waits or runs, reads of ``facts`` go on (dropping first asked
    for a lock that queues every read behind the build until the migration commits).

    A writer's open transaction makes the build wait; a read then gets its rows at once
    (the read's lock timeout is reached only when the read is queued behind the drop)."""
    psycopg = pytest.importorskip("psycopg")
    from ctxslots.stores.postgres._schema import m011_owners_key

    with FactStore(pg_url, embedder=False) as store:
        store.add("user", "Ada edits code in Helix.", user="ada")
    with psycopg.connect(pg_url) as writer, psycopg.connect(pg_url) as migrating, \
            psycopg.connect(pg_url, autocommit=True) as reader, \
            psycopg.connect(pg_url, autocommit=True) as watcher:
        # The lock every writer of the table holds until it commits.
        writer.execute("LOCK TABLE facts IN ROW EXCLUSIVE MODE")
        pid = migrating.info.backend_pid
        failure: list[BaseException] = []

        def migrate() -> None:
            try:
                m011_owners_key(migrating)
            except BaseException as exc:  # reported by the test below
                failure.append(exc)

        thread = threading.Thread(target=migrate)
        thread.start()
        try:
            # Wait for the event: the migration waiting for the writer's lock.
            while not watcher.execute(
                    "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted",
                    (pid,)).fetchone()[0]:
                if not thread.is_alive():
                    break
                watcher.execute("SELECT pg_sleep(0.01)")
            reader.execute("SET lock_timeout = '2s'")
            rows = reader.execute("SELECT count(*) FROM facts WHERE user_id = 'ada'").fetchone()
        finally:
            writer.rollback()
            thread.join()
            migrating.rollback()
    assert not failure, failure
    assert rows is not None and 1 == rows[0]
