"""PostgreSQL: two writers adding the same memory at once store it once. No unique index
covers a memory without a key, so the first writer's transaction holds its value: the
second waits (seen in ``pg_locks``), then finds it."""

from __future__ import annotations

import threading
import time

import pytest

from ctxslots import ANY, FactStore

psycopg = pytest.importorskip("psycopg")

VALUE = "The deploy window is Friday after 16:00."


def test_a_memory_added_by_two_writers_at_once_is_stored_once(pg_url):
    with FactStore(pg_url) as first, FactStore(pg_url) as second, \
            psycopg.connect(pg_url, autocommit=True) as watch:
        added: list[int] = []
        other = threading.Thread(
            target=lambda: added.append(second.add("project", VALUE, scope="shop").id))
        with first.batch():
            mine = first.add("project", VALUE, scope="shop").id
            other.start()
            # Until the other writer waits on this transaction, or has written without waiting.
            while other.is_alive() and not watch.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                time.sleep(0.01)
        other.join()
        assert added == [mine]
        assert [f.id for f in first.facts(slots=["project"], scope="shop")] == [mine]


def test_different_memories_do_not_wait_for_each_other(pg_url):
    with FactStore(pg_url) as first, FactStore(pg_url) as second:
        with first.batch():
            mine = first.add("project", VALUE, scope="shop").id
            # Another value, and the same value of another scope, are written at once.
            theirs = [second.add("project", "Deploys need a second reviewer.", scope="shop").id,
                      second.add("project", VALUE, scope="billing").id]
        assert len({mine, *theirs}) == 3
        assert len(first.facts(slots=["project"], scope=ANY)) == 3
