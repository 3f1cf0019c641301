"""The PostgreSQL test databases handed out again are indistinguishable from new copies."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

psycopg = pytest.importorskip("psycopg")

from ctxslots import FactStore


def _name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def _state(url: str) -> dict[str, Any]:
    """What a test could see of a database besides its schema."""
    with psycopg.connect(url, autocommit=True) as conn:
        def rows(query: str) -> list[Any]:
            return conn.execute(query).fetchall()

        sequences = [r[0] for r in rows("SELECT relname FROM pg_class WHERE relkind = 'S' ORDER BY 1")]
        return {
            "tables": rows("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"),
            "estimates": rows("SELECT c.relname, c.relpages, c.reltuples, c.relallvisible"
                              " FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace"
                              " ORDER BY 1"),
            "sizes": rows("SELECT relname, pg_relation_size(oid) FROM pg_class"
                          " WHERE relnamespace = 'public'::regnamespace AND relkind <> 'S' ORDER BY 1"),
            "counters": rows("SELECT relname, n_live_tup, n_dead_tup, n_mod_since_analyze,"
                             " n_ins_since_vacuum FROM pg_stat_user_tables ORDER BY 1"),
            "statistics": rows("SELECT count(*) FROM pg_statistic WHERE starelid IN"
                               " (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)"),
            "sequences": [rows(f"SELECT last_value, is_called FROM {name}") for name in sequences],
            "migrations": rows("SELECT version, name FROM schema_migrations ORDER BY 1"),
            "meta": rows("SELECT * FROM store_meta ORDER BY 1"),
            "facts": rows("SELECT count(*) FROM facts"),
        }


@pytest.fixture(name="server")
def fixture_server(postgres: Any) -> Any:
    """The session's server, when the tests started it (reuse needs a superuser)."""
    if not postgres.private:
        pytest.skip("databases are reused only on the tests' own server")
    return postgres


def test_a_used_database_comes_back_as_a_new_copy(server):
    """Rows, sequences, size estimates, statistics and counters: as in a new copy of the template."""
    first = server.database()
    new = _state(first)
    with FactStore(first) as store:
        for n in range(300):
            store.add("agent", f"fact {n} about the build", scope="shop")
    with psycopg.connect(first, autocommit=True) as conn:
        conn.execute("ANALYZE")
        conn.execute("UPDATE schema_migrations SET name = 'changed' WHERE version = 1")
    assert _state(first) != new
    server.release(first)
    again = server.database()
    try:
        assert _name(again) == _name(first)
        assert _state(again) == new
    finally:
        server.release(again)


@pytest.mark.parametrize("change", [
    "ALTER TABLE facts ALTER COLUMN tags DROP NOT NULL",
    "DROP INDEX facts_scope_time",
    "CREATE INDEX facts_extra ON facts (slot)",
    "COMMENT ON TABLE facts IS 'changed'",
    "GRANT SELECT ON facts TO PUBLIC",
    "ALTER TABLE facts SET (fillfactor = 50)",
    "ALTER SEQUENCE fact_ids INCREMENT 5",
    "ALTER DATABASE {name} SET work_mem = '8MB'",
    "SELECT lo_create(0)",
])
def test_a_database_whose_schema_changed_is_dropped(server, change):
    """Any change beyond rows (and tables the template lacks): the database is not handed out again."""
    url = server.database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(change.format(name=_name(url)))
    server.release(url)
    with server.admin() as conn:
        left = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (_name(url),)).fetchone()
    assert left is None
    other = server.database()
    try:
        assert _name(other) != _name(url)
    finally:
        server.release(other)


def test_a_table_the_template_lacks_goes_and_the_database_stays(server):
    """The vector table a store makes on first opening is dropped; the rest is a new copy."""
    url = server.database()
    new = _state(url)
    with FactStore(url) as store:
        store.add("agent", "one fact")
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('fact_vectors')").fetchone()[0] is not None
    server.release(url)
    again = server.database()
    try:
        assert _name(again) == _name(url)
        assert _state(again) == new
    finally:
        server.release(again)
