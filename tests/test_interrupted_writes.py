"""Ctrl-C in the middle of a SQLite write: the store stays usable and no transaction stays open."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import apsw
import pytest

from _sql import connection_hook
from ctxslots import FactStore


@contextlib.contextmanager
def interrupted_at(statement: str) -> Iterator[threading.Event]:
    """Once the event the block gets is set, the next ``statement`` this thread runs on a
    connection opened in the block raises ``KeyboardInterrupt`` instead (as Ctrl-C arriving
    just then would)."""
    armed = threading.Event()
    caller = threading.current_thread()

    def trace(_cursor: Any, sql: str, _bindings: Any) -> bool:
        if armed.is_set() and sql.strip() == statement and threading.current_thread() is caller:
            armed.clear()
            raise KeyboardInterrupt
        return True

    def hook(conn: apsw.Connection) -> None:
        conn.exec_trace = trace

    with connection_hook(hook):
        yield armed


@pytest.mark.parametrize("batched", [True, False])
def test_an_interrupt_at_commit_leaves_the_store_writable(tmp_path, batched):
    """A ``KeyboardInterrupt`` as a write commits rolls it back: the next write works and
    another connection can take the write lock (the transaction stayed open, holding the
    lock, and every later write failed with apsw's "cannot start a transaction within a
    transaction")."""
    path = tmp_path / "m.db"
    with interrupted_at("COMMIT") as armed, FactStore(path) as store:
        store.add("agent", "Deploys run on Fridays.")
        armed.set()
        with pytest.raises(KeyboardInterrupt):
            if batched:
                with store.batch():
                    store.add("agent", "The cache warms on Mondays.")
                    store.add("agent", "The cache is cold on Tuesdays.")
            else:
                store.add("agent", "The cache warms on Mondays.")
        store.add("agent", "Tests run before each deploy.")
        with FactStore(path) as other:
            other.add("agent", "The release branch is cut on Thursdays.")
            assert ["Deploys run on Fridays.", "Tests run before each deploy.",
                    "The release branch is cut on Thursdays."] == [
                f.value for f in other.facts(slots=["agent"])]


def test_an_interrupt_at_a_nested_release_undoes_the_batch(tmp_path):
    """A ``KeyboardInterrupt`` as a nested block ends fails the batch around it, which rolls
    back whole: nothing of it stays, and the next write commits on its own."""
    with interrupted_at("RELEASE sp1") as armed, FactStore(tmp_path / "m.db") as store:
        armed.set()
        with pytest.raises(KeyboardInterrupt), store.batch():
            store.add("agent", "Deploys run on Fridays.")
        store.add("agent", "Tests run before each deploy.")
        with FactStore(tmp_path / "m.db") as other:
            assert ["Tests run before each deploy."] == [
                f.value for f in other.facts(slots=["agent"])]
