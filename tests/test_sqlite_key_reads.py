"""Inside a write transaction, the SQLite engine reads a key once for a read and the write
after it (a flush's pattern), and never answers from a read that a statement, a rollback
or another transaction may have made stale."""

from __future__ import annotations

import pytest

from _sql import traced
from ctxslots import FactStore


def _key_reads(sql: str, _bindings: object) -> bool:
    return sql.startswith("SELECT id,") and "key = ?" in sql


def test_a_flush_reads_each_key_once_whether_or_not_it_is_stored(tmp_path):
    """A key read and then written in one batch is read once, stored or not."""
    path = tmp_path / "keys.db"
    with FactStore(path) as store:
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
    with traced(_key_reads) as seen, FactStore(path) as store:
        with store.batch(savepoints=False):
            for key, value in (("city", "Ada lives in Lyon."), ("town", "Ada grew up in Arles.")):
                store.get_by_key("user", key, user="ada")
                store.upsert("user", key, value, user="ada")
        assert 2 == sum(seen)
        assert "Ada lives in Lyon." == store.get_by_key("user", "city", user="ada").value
        assert ["Ada lives in Nice."] == [h.value for h in store.history(
            store.get_by_key("user", "city", user="ada").id)]
        assert "Ada grew up in Arles." == store.get_by_key("user", "town", user="ada").value


def test_a_write_between_two_reads_of_a_key_is_seen(tmp_path):
    """Any statement after a read forgets it: the key's next read is the written row."""
    with FactStore(tmp_path / "keys.db") as store, store.batch():
        assert store.get_by_key("user", "city", user="ada") is None
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        assert "Ada lives in Nice." == store.get_by_key("user", "city", user="ada").value
        first = store.get_by_key("user", "city", user="ada")
        store.forget(first.id)
        assert store.get_by_key("user", "city", user="ada") is None


def test_a_rolled_back_block_leaves_the_key_as_it_was(tmp_path):
    """A nested block that wrote the key and failed is undone; the key reads as before."""
    with FactStore(tmp_path / "keys.db") as store:
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        with store.batch():
            assert "Ada lives in Nice." == store.get_by_key("user", "city", user="ada").value
            with pytest.raises(RuntimeError), store.batch():
                store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
                raise RuntimeError("undone")
            assert "Ada lives in Nice." == store.get_by_key("user", "city", user="ada").value


def test_a_read_in_an_earlier_transaction_is_not_trusted(tmp_path):
    """A read of the last transaction is read again: another connection may have written
    the key in between."""
    path = tmp_path / "keys.db"
    with FactStore(path) as store, FactStore(path) as other:
        with store.batch():
            assert store.get_by_key("user", "city", user="ada") is None
        other.upsert("user", "city", "Ada lives in Nice.", user="ada")
        with store.batch():
            assert "Ada lives in Nice." == store.get_by_key("user", "city", user="ada").value
            store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
        assert "Ada lives in Lyon." == other.get_by_key("user", "city", user="ada").value


def test_an_expired_key_reads_as_absent_inside_a_batch_as_outside(tmp_path):
    """A key whose fact expired is absent to a read inside a batch, as outside one, and an
    upsert of it stores the new value."""
    now = [1_800_000_000.0]
    with FactStore(tmp_path / "keys.db", clock=lambda: now[0]) as store:
        store.upsert("user", "visa", "Ada's visa runs out soon.", user="ada",
                     expires_at=now[0] + 60)
        now[0] += 120
        assert store.get_by_key("user", "visa", user="ada") is None
        with store.batch():
            assert store.get_by_key("user", "visa", user="ada") is None
            store.upsert("user", "visa", "Ada's visa was renewed.", user="ada")
            assert "Ada's visa was renewed." == store.get_by_key("user", "visa", user="ada").value
        assert "Ada's visa was renewed." == store.get_by_key("user", "visa", user="ada").value
