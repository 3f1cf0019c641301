"""A store written before facts had owners opens unchanged: nothing lost, every fact its
default user's or agent's or shared, on each engine.

The old store is made at the schema just before owners (SQLite 11, PostgreSQL 3) and
filled with raw SQL, as the release before wrote it: facts of every slot (a user fact
with a scope among them), an archived fact, an earlier value, a co-recall link, a flush
record and a vector.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from typing import Any

import pytest

from ctxslots import ANY, AssemblyRequest, FactStore, PromptAssembler

NOW = 1_800_000_000.0

#: ``(id, slot, scope, key, value)`` of the live facts.
FACTS = [
    (1, "user", "", "editor", "The user edits code in Helix."),
    (2, "user", "atlas-api", "vacation", "Priya is on vacation until Dec 5."),
    (3, "project", "shop", "deploy.day", "The shop deploys on Fridays."),
    (4, "agent", "", None, "Rerun test_refund_retry once when it flakes."),
    (5, "agent", "shop", "cache", "Warm the shop's build cache before a release."),
]
ARCHIVED = (6, "user", "", None, "The user used Vim for years.")
HISTORY = (1, "user", "", "editor", "The user edits code in Vim.")
COLUMNS = ("id, slot, scope, key, value, tags, source, confidence, score, created_at, "
           "updated_at, observed_at, access_count")


def _row(fact: tuple[Any, ...]) -> tuple[Any, ...]:
    return (*fact, "", "seed", 1.0, 0.0, NOW - 100, NOW - 50, NOW - 100, 2)


def _old_sqlite(db: str) -> None:
    from ctxslots.stores.sqlite import open_connection
    from ctxslots.stores.sqlite._migrations import migrate

    conn = open_connection(db, migrate=False)
    try:
        assert migrate(conn, target=11)[-1] == "m011_context"
        marks = ", ".join("?" * 13)
        for fact in FACTS:
            conn.execute(f"INSERT INTO facts ({COLUMNS}) VALUES ({marks})", _row(fact))
        conn.execute(f"INSERT INTO archive ({COLUMNS}, archived_at, reason) VALUES "
                     f"({marks}, ?, ?)", (*_row(ARCHIVED), NOW - 10, "replaced"))
        conn.execute("INSERT INTO fact_history (fact_id, slot, scope, key, value, tags, "
                     "source, confidence, valid_from, valid_to) VALUES (?, ?, ?, ?, ?, '', "
                     "'seed', 1.0, ?, ?)", (*HISTORY, NOW - 200, NOW - 100))
        conn.execute("INSERT INTO fact_links (a, b, strength, updated_at) VALUES "
                     "(1, 3, 2.0, ?), (3, 1, 2.0, ?)", (NOW, NOW))
        conn.execute("INSERT INTO flush_progress VALUES ('chat-1', 4, 'f00d', ?)", (NOW,))
        conn.execute("INSERT INTO vectors (fact_id, scope, slot, embedding) VALUES "
                     "(1, '', 'user', ?)", (struct.pack("4f", 1, 0, 0, 0),))
    finally:
        conn.close()


def _sqlite_owners(db: str) -> dict[str, list[tuple[Any, ...]]]:
    from ctxslots.stores.sqlite import open_connection

    conn = open_connection(db, migrate=False)
    try:
        return {"vectors": conn.execute(
            "SELECT fact_id, user_id, agent_id FROM vectors").fetchall(),
            "progress": conn.execute(
            "SELECT user_id, agent_id, conversation FROM flush_progress").fetchall()}
    finally:
        conn.close()


def _old_postgres(url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from ctxslots.stores.postgres._schema import migrate

    with psycopg.connect(url, autocommit=True) as conn:
        assert migrate(conn, url, target=3)[-1] == "m003_context"
        marks = ", ".join(["%s"] * 13)
        with conn.transaction():
            for fact in FACTS:
                conn.execute(f"INSERT INTO facts ({COLUMNS}) VALUES ({marks})", _row(fact))
            conn.execute(f"INSERT INTO archive ({COLUMNS}, archived_at, reason) VALUES "
                         f"({marks}, %s, %s)", (*_row(ARCHIVED), NOW - 10, "replaced"))
            conn.execute("SELECT setval('fact_ids', 100)")
            conn.execute("INSERT INTO fact_history (fact_id, slot, scope, key, value, tags, "
                         "source, confidence, valid_from, valid_to) VALUES (%s, %s, %s, %s, "
                         "%s, '', 'seed', 1.0, %s, %s)", (*HISTORY, NOW - 200, NOW - 100))
            conn.execute("INSERT INTO fact_links (scope, a, b, strength, updated_at) VALUES "
                         "('', 1, 3, 2.0, %s), ('shop', 3, 1, 2.0, %s)", (NOW, NOW))
            conn.execute("INSERT INTO flush_progress VALUES ('chat-1', 4, 'f00d', %s)", (NOW,))


def _postgres_owners(url: str) -> dict[str, list[tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {"vectors": [], "progress": conn.execute(
            "SELECT user_id, agent_id, conversation FROM flush_progress").fetchall()}


@pytest.fixture(name="old_store", params=["sqlite", "postgresql"])
def fixture_old_store(request, db_path) -> tuple[str, Callable[[str], Any]]:
    """The location of a store as the release before wrote it, and how to read its
    owner columns raw once migrated."""
    if request.param == "sqlite":
        _old_sqlite(str(db_path))
        return str(db_path), _sqlite_owners
    postgres = request.getfixturevalue("postgres")
    url = postgres.empty_database()
    request.addfinalizer(lambda: postgres.drop(url))
    _old_postgres(url)
    return url, _postgres_owners


def test_an_old_store_opens_with_nothing_lost(old_store):
    location, raw_owners = old_store
    with FactStore(location, clock=lambda: NOW, embedder=False) as store:
        everything = store.facts(user=ANY, agent=ANY, scope=ANY)
        assert [(f.id, f.slot, f.scope or "", f.key, f.value) for f in everything] == FACTS
        owners = {f.id: (f.user, f.agent) for f in everything}
        assert owners == {1: ("default", None), 2: ("default", None), 3: (None, None),
                          4: (None, "default"), 5: (None, "default")}
        archived = store.get(6, include_archive=True)
        assert (archived.archived, archived.user, archived.value) == (True, "default",
                                                                       ARCHIVED[4])
        assert [f.value for f in store.history(1)] == [HISTORY[4]]
        assert store.links(1) == {3: 2.0}
        assert store.flush_progress("chat-1") == (4, "f00d")
        # With no argument at all, a single-user store reads as before.
        assert [h.fact.id for h in store.search("which editor does the user use")] == [1]
        assert {f.id for f in store.facts()} == {1, 4}
        assert {f.id for f in store.facts(scope="shop")} == {1, 3, 4, 5}
        prompt = PromptAssembler(store).assemble(
            AssemblyRequest("is Priya on vacation?", scope="atlas-api", budget=400))
        assert "Priya is on vacation until Dec 5." in prompt.text
        buf = io.StringIO()
        store.export_jsonl(buf)
        records = [json.loads(line) for line in buf.getvalue().splitlines()[1:]]
        assert sorted(r["id"] for r in records) == [1, 2, 3, 4, 5, 6]
        assert {r["id"]: r.get("user") for r in records}[1] == "default"
    raw = raw_owners(location)
    assert raw["progress"] == [("default", "default", "chat-1")]
    assert raw["vectors"] in ([], [(1, "default", "")])


def test_a_user_fact_an_old_store_kept_in_a_scope_can_be_changed_and_moved(old_store, tmp_path):
    """A user fact an older release stored in a scope is updated by id, keeping its owners,
    and the store's export imports into a new store whole: both failed with "user facts
    belong to a user, not to a workspace (scope)", the import writing nothing."""
    location, _ = old_store
    with FactStore(location, clock=lambda: NOW, embedder=False) as store:
        changed = store.update(2, value="Priya is on vacation until Dec 12.")
        assert ("atlas-api", "default") == (changed.scope, changed.user)
        assert ["Priya is on vacation until Dec 5."] == [f.value for f in store.history(2)]
        buf = io.StringIO()
        store.export_jsonl(buf)
    with FactStore(tmp_path / "moved.db", clock=lambda: NOW, embedder=False) as moved:
        report = moved.import_jsonl(io.StringIO(buf.getvalue()))
        assert (5, 1) == (report.added, report.archived)
        fact = moved.get(2)
        assert ("atlas-api", "default", "Priya is on vacation until Dec 12.") == \
            (fact.scope, fact.user, fact.value)
        assert [2] == [h.fact.id for h in moved.search("Priya vacation", scope="atlas-api")]
        assert [] == moved.search("Priya vacation")
