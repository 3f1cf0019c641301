"""The PostgreSQL engine's own promises: clear errors that write nothing, migrations once, BM25.

Runs against the session's real server (pgserver, or ``CTXSLOTS_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import apsw
import psycopg
import pytest

from _postgres import PostgresServer, with_database, with_user
from _sql import plan_of
from ctxslots import FactStore
from ctxslots.errors import StoreError
from ctxslots.stores.backend import FactFilter

pytest.importorskip("psycopg_pool")

from ctxslots.stores.postgres import PostgresBackend
from ctxslots.stores.postgres._connect import check_server
from ctxslots.stores.postgres._schema import SCHEMA_VERSION

NOW = 1_800_000_000.0


def tables(url: str) -> list[str]:
    """The tables of the public schema of a database."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]


def has_vector(url: str) -> bool:
    """Whether the database has the vector extension."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'"
                            ).fetchone()[0] == 1


@pytest.fixture(name="role")
def fixture_role(postgres: PostgresServer) -> Any:
    """Creates login roles without privileges (dropped afterwards): ``role(password=None)``."""
    made: list[str] = []

    def make(password: str | None = None) -> str:
        name = f"ctxslots_role_{uuid.uuid4().hex[:8]}"
        with postgres.admin() as conn:
            if password is None:
                conn.execute(f"CREATE ROLE {name} LOGIN")
            else:
                conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        made.append(name)
        return name

    yield make
    with postgres.admin() as conn:
        for name in made:
            for db in conn.execute("SELECT datname FROM pg_database WHERE NOT datistemplate"
                                   ).fetchall():
                try:
                    with psycopg.connect(with_database(postgres.url, db[0]),
                                         autocommit=True) as other:
                        other.execute(f"DROP OWNED BY {name}")
                except psycopg.Error:
                    pass
            conn.execute(f"DROP ROLE IF EXISTS {name}")


# -- bad input: one clear error, nothing written -----------------------------------


def test_an_unreachable_server_says_to_start_it():
    """Nothing listening on the URL's port: a StoreError naming the server and what to check."""
    with pytest.raises(StoreError) as info:
        PostgresBackend("postgresql://ada:secret@127.0.0.1:1/memory", connect_timeout=2)
    message = str(info.value)
    assert "cannot reach a PostgreSQL server at postgresql://ada@127.0.0.1:1/memory" in message
    assert "start it, or fix the host and port" in message
    assert "secret" not in message


def test_a_missing_database_says_to_create_it(postgres):
    """A database that does not exist: the error says to create it."""
    url = with_database(postgres.url, "ctxslots_no_such_db")
    with pytest.raises(StoreError, match="does not exist.*create it"):
        PostgresBackend(url)


def test_a_wrong_password_says_so_and_writes_nothing(postgres, role):
    """A refused password: the error names the user and where to put the password; no table made."""
    name = role(password="right-password")
    if not postgres.require_passwords_for(name):
        pytest.skip("the external server's pg_hba.conf cannot be changed by the tests")
    url = postgres.empty_database()
    with psycopg.connect(with_user(url, name, "right-password")):
        pass  # the role logs in with the right password
    with pytest.raises(StoreError) as info:
        PostgresBackend(with_user(url, name, "wrong-password"))
    message = str(info.value)
    assert f"cannot log in to postgresql://{name}@" in message
    assert "password was refused" in message and "PGPASSWORD" in message
    assert "wrong-password" not in message
    assert [] == tables(url)


def test_a_database_without_pgvector_asks_an_administrator(postgres, role):
    """No vector extension and no right to create it: say who must run what; write nothing."""
    url = postgres.empty_database()
    if has_vector(url):
        pytest.skip("the server creates the vector extension in every new database")
    name = role()
    with pytest.raises(StoreError) as info:
        PostgresBackend(with_user(url, name))
    message = str(info.value)
    assert "does not have the vector extension" in message
    assert "have an administrator run CREATE EXTENSION vector" in message
    assert ([], False) == (tables(url), has_vector(url))


def test_a_role_that_may_not_create_tables_is_told_what_to_grant(postgres, role):
    """pgvector present, no CREATE on the schema: the error says what to grant; nothing written."""
    url = postgres.empty_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    name = role()
    with pytest.raises(StoreError, match="may not create the ctxslots tables.*grant it CREATE"):
        PostgresBackend(with_user(url, name))
    assert [] == tables(url)


def test_a_schema_newer_than_the_code_says_to_upgrade(pg_url):
    """A database migrated by a newer ctxslots is refused before anything is written."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, 'm999_future')",
                     (SCHEMA_VERSION + 1,))
    before = tables(pg_url)
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}, newer.*"
                                         "upgrade ctxslots"):
        PostgresBackend(pg_url)
    assert before == tables(pg_url)


@pytest.mark.parametrize(("server", "vector", "available", "expected"), [
    (110022, "0.6.2", "0.6.2", "version 11, too old for the ctxslots schema.*upgrade the server"),
    (160002, None, None, "does not have pgvector installed: install it on the server"),
    (160002, "0.4.4", "0.6.2", "pgvector 0.4.4 .* too old .*ALTER EXTENSION vector UPDATE"),
    (160002, None, "0.4.0", "pgvector 0.4.0 .* too old .*install a newer pgvector"),
])
def test_a_server_too_old_for_the_schema_is_refused(server, vector, available, expected):
    """Server and pgvector versions below what the schema needs give one error saying what to do."""
    with pytest.raises(StoreError, match=expected):
        check_server("postgresql://db", server, vector, available)


def test_supported_versions_pass_the_check():
    """PostgreSQL 12+ with pgvector 0.5+ (created, or only available) is accepted."""
    check_server("postgresql://db", 120000, "0.5.0", None)
    check_server("postgresql://db", 160002, None, "0.6.2")


def test_the_location_never_shows_the_password(pg_url):
    """location and repr leave the password out."""
    url = pg_url.replace("postgres:@", "postgres:hunter2@")
    backend = PostgresBackend(url)
    try:
        assert "hunter2" not in backend.location
        assert "hunter2" not in repr(backend)
        assert backend.location.startswith("postgresql://postgres@")
    finally:
        backend.close()


def test_a_closed_store_says_so(pg_url):
    """Using a closed backend is a StoreError, not a driver error."""
    backend = PostgresBackend(pg_url)
    backend.close()
    with pytest.raises(StoreError, match="closed"):
        backend.counts()


# -- migrations ---------------------------------------------------------------------


def test_hosts_starting_together_migrate_once(postgres):
    """Six openers racing on an empty database: all open, each migration recorded once."""
    url = postgres.empty_database()
    start = threading.Barrier(6)
    opened: list[PostgresBackend] = []
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            start.wait()
            opened.append(PostgresBackend(url, pool_size=1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for backend in opened:
        backend.close()
    assert ([], 6) == (errors, len(opened))
    with psycopg.connect(url, autocommit=True) as conn:
        versions = conn.execute("SELECT version FROM schema_migrations ORDER BY 1").fetchall()
    assert [(n,) for n in range(1, SCHEMA_VERSION + 1)] == versions


def test_every_unique_key_includes_the_scope(pg_url):
    """Each primary key and unique index of a fact-bearing table names the scope column."""
    backend = PostgresBackend(pg_url)
    with backend.transaction():
        backend.reset_vectors("model", 3)
    backend.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        found = conn.execute("""
            SELECT c.relname, i.indexrelid::regclass::text,
                   bool_or(a.attname = 'scope') FROM pg_index i
            JOIN pg_class c ON c.oid = i.indrelid
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
            WHERE i.indisunique AND c.relname = ANY(%s)
            GROUP BY 1, 2 ORDER BY 1, 2""", (
            ["facts", "archive", "fact_history", "fact_links", "fact_vectors"],)).fetchall()
    assert {"facts", "archive", "fact_history", "fact_links", "fact_vectors"} == {
        r[0] for r in found}
    assert all(r[2] for r in found), found


def test_the_full_text_indexes_merge_new_entries_often(pg_url):
    """Both full-text indexes keep a small pending list (searches read all of it)."""
    from ctxslots.stores.postgres._schema import PENDING_LIST_KB

    PostgresBackend(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        options = dict(conn.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s)",
            (["facts_search", "archive_search"],)).fetchall())
    assert {"facts_search", "archive_search"} == set(options)
    assert all(f"gin_pending_list_limit={PENDING_LIST_KB}" in (o or []) for o in options.values())


# -- BM25 against FTS5 ---------------------------------------------------------------


CORPUS = [
    "the cat sat on the mat",
    "a dog and a cat met in the park",
    "the dog barked at the mailman all day long",
    "fish swim in the lake near the old mill",
    "the cat and the dog and the fish",
    "bright lake water under a pale sky",
]


@pytest.mark.parametrize("contexts", [
    [None] * len(CORPUS),
    ["where did the cat go", None, "the dog and the lake", "mill", None, "sky sky"],
], ids=["no-context", "context"])
@pytest.mark.parametrize("counts", ["counted", "kept"])
def test_bm25_scores_equal_fts5(pg_url, contexts, counts, monkeypatch):
    """The PostgreSQL BM25 scores equal SQLite FTS5's bm25() on the same facts and words,
    a context column weighing CONTEXT_WEIGHT: with the document counts made in the
    scoring statement (a small table) and with them counted once and kept (a large one)."""
    from ctxslots.stores.backend import CONTEXT_WEIGHT
    from ctxslots.stores.postgres import _lexical

    if counts == "kept":
        monkeypatch.setattr(_lexical, "_EXACT_BELOW", 0)

    fts = apsw.Connection(":memory:")
    # As a store's index: each fact's owner term in a column of its own, of no weight.
    fts.execute("CREATE VIRTUAL TABLE t USING fts5(key, value, tags, context, owner, "
                "tokenize='porter unicode61')")
    for n, (text, context) in enumerate(zip(CORPUS, contexts), start=1):
        fts.execute("INSERT INTO t (rowid, key, value, tags, context, owner) "
                    "VALUES (?, NULL, ?, '', ?, 'oxx')", (n, text, context))
    backend = PostgresBackend(pg_url)
    try:
        with backend.transaction():
            ids = [backend.insert({"slot": "agent", "scope": "", "key": None, "value": text,
                                   "tags": "", "source": None, "confidence": 1.0, "score": 0.0,
                                   "created_at": NOW, "updated_at": NOW, "observed_at": NOW,
                                   "last_accessed": None, "access_count": 0, "expires_at": None,
                                   "superseded_by": None, "context": context,
                                   "user_id": "", "agent_id": ""})
                   for text, context in zip(CORPUS, contexts)]
        for words in (["cat"], ["dog", "fish"], ["lake", "mill", "cat"], ["the", "sky"],
                      ["cat", "dog"]):
            match = " OR ".join(f'"{w}"' for w in words)
            expected = {ids[rowid - 1]: rank for rowid, rank in fts.execute(
                f"SELECT rowid, bm25(t, 1.0, 1.0, 1.0, {CONTEXT_WEIGHT}, 0.0) FROM t WHERE t MATCH ?",
                (match,))}
            got = {c.row["id"]: c.score for c in backend.lexical(plan_of(words), FactFilter(), 10)}
            assert expected.keys() == got.keys(), words
            for fact_id, score in expected.items():
                assert score == pytest.approx(got[fact_id], rel=1e-9), words
    finally:
        backend.close()


def test_reading_an_empty_database_creates_nothing(postgres):
    """create=False (the reading commands) refuses a database without a store in one line,
    creating no table; once a store is written there, it opens."""
    from click.testing import CliRunner

    from ctxslots import FactStore
    from ctxslots.cli import cli
    from ctxslots.stores.postgres._url import safe_location

    url = postgres.empty_database()
    with pytest.raises(StoreError, match="no store in the database at .*nothing was created"):
        FactStore(url, create=False)
    result = CliRunner().invoke(cli, ["--db", url, "search", "deploy"])
    assert 1 == result.exit_code
    assert [(f"Error: no store in the database at {safe_location(url)}: write a fact first "
             f"(`ctxslots --db {safe_location(url)} remember ...`) or pass the URL of an existing "
             "store (nothing was created)")] == result.output.strip().splitlines()
    with psycopg.connect(url) as conn:
        assert [] == conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = "
                                  "current_schema()").fetchall()
    with FactStore(url) as store:
        store.add("agent", "Deploys run on Friday.")
    with FactStore(url, create=False) as store:
        assert ["Deploys run on Friday."] == [h.fact.value for h in store.search("deploys")]


def test_a_read_only_database_answers_searches_and_refuses_writes(pg_url):
    """On a database whose sessions may only read (a replica, a read-only default), a
    search still answers and says once, as a RuntimeWarning, that it counts no access; a
    write is refused with ReadOnlyStoreError, and nothing is written."""
    from psycopg import sql

    from ctxslots import FactStore, ReadOnlyStoreError

    with FactStore(pg_url) as store:
        fact = store.add("agent", "The deploy runs on Fridays.")
    database = sql.Identifier(psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"])

    def read_only(on: bool) -> None:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SET default_transaction_read_only = off")
            admin.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = {}")
                          .format(database, sql.SQL("on" if on else "off")))

    read_only(True)
    try:
        with pytest.warns(RuntimeWarning, match="read-only") as said, FactStore(pg_url) as store:
            for _ in range(3):
                assert [fact.id] == [h.fact.id for h in store.search("deploy")]
            with pytest.raises(ReadOnlyStoreError, match="read-only"):
                store.add("agent", "The release train leaves on Mondays.")
        assert 1 == sum("read-only" in str(w.message) for w in said)
    finally:
        read_only(False)
    with FactStore(pg_url) as store:
        assert 0 == store.get(fact.id).access_count
        assert [fact.id] == [f.id for f in store.facts(slots=["agent"])]


def _documented_grants() -> list[str]:
    """The statements docs/postgres.md gives a role that only uses the store."""
    text = (Path(__file__).parents[1] / "docs" / "postgres.md").read_text(encoding="utf-8")
    block = text.split("needs only\nthese grants", 1)[1].split("```sql\n", 1)[1]
    return [line for line in block.split("```", 1)[0].splitlines() if line.strip()]


def test_a_role_granted_what_the_docs_list_searches_and_writes(postgres, pg_url, role,
                                                                tmp_path):
    """Once the owner made the schema, a role granted exactly what docs/postgres.md lists
    searches, assembles, writes, forgets, updates, deletes and imports a file keeping its
    ids: what moves or reads the statistics' other sequence runs with the owner's rights."""
    from ctxslots import AssemblyRequest, FactStore, PromptAssembler

    with FactStore(pg_url) as store:
        ids = [store.add("user", f"The user owns cat number {n}.").id for n in range(4)]
    name = role()
    grants = _documented_grants()
    assert len(grants) == 2 and all(g.startswith("GRANT ") for g in grants)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for grant in grants:
            conn.execute(grant.replace("ctxslots_app", f'"{name}"'))
    moved = tmp_path / "moved.jsonl"
    with FactStore(str(tmp_path / "other.db")) as other:
        for n in range(30):  # ids past the store's sequence, which the import moves on
            other.add("agent", f"Lesson number {n} about deploys.")
        with moved.open("w", encoding="utf-8") as out:
            other.export_jsonl(out)
    with FactStore(with_user(pg_url, name)) as app:
        assert len(app.search("cat", track_access=False)) == 4
        prompt = PromptAssembler(app).assemble(AssemblyRequest("which cat"), record_shown=True)
        assert "The user owns cat number" in prompt.text
        app.add("user", "The user owns a dog.")
        app.forget(ids[0])
        app.update(ids[1], value="The user owns a parrot.")
        app.delete(ids[2])
        assert [h.fact.value for h in app.search("parrot", track_access=False)] == [
            "The user owns a parrot."]
        with moved.open(encoding="utf-8") as given:
            assert app.import_jsonl(given).added == 30
        assert app.add("agent", "A lesson written after the import.").id > 30


def test_the_statistics_counter_cannot_be_stood_in_for(pg_url, role):
    """A role's temporary sequence of the same name does not take the store's counter's
    place (the trigger names it by its schema), and the trigger's function is the
    trigger's alone."""
    from psycopg import sql

    from ctxslots import FactStore

    with FactStore(pg_url) as store:
        fact = store.add("user", "The user owns a cat.")
    name = role()
    with psycopg.connect(pg_url, autocommit=True) as owner:
        owner.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
                              "public TO {}").format(sql.Identifier(name)))
        before = owner.execute("SELECT last_value FROM fact_text_changes").fetchone()[0]
    with psycopg.connect(with_user(pg_url, name), autocommit=True) as app:
        app.execute("CREATE TEMP SEQUENCE fact_text_changes")
        app.execute("DELETE FROM facts WHERE id = %s", (fact.id,))
        assert app.execute("SELECT last_value FROM pg_temp.fact_text_changes").fetchone()[0] == 1
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("SELECT ctxslots_text_changed()")
    with psycopg.connect(pg_url, autocommit=True) as owner:
        assert owner.execute("SELECT last_value FROM fact_text_changes").fetchone()[0] > before


def test_the_pools_log_lines_name_the_store_never_its_password(postgres: PostgresServer,
                                                                pg_url: str, caplog):
    """When a store's connections cannot be made again, the pool's warnings say which
    database they are about (a service may hold a store per database on one server),
    and never show the password."""
    import logging
    import time
    from urllib.parse import urlsplit

    from ctxslots import FactStore

    role, password = f"pool_{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    with postgres.admin() as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{password}'")
    try:
        with FactStore(with_user(pg_url, role, password)) as store:
            store.add("user", "The user drinks tea.")
            with postgres.admin() as conn, caplog.at_level(logging.INFO, logger="psycopg.pool"):
                conn.execute(f"ALTER ROLE {role} NOLOGIN")
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE usename = %s", [role])
                with pytest.raises(StoreError):
                    store.search("tea")
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not any(
                        r.getMessage().startswith("error connecting in") for r in caplog.records):
                    threading.Event().wait(0.01)  # the pool's own thread tries again
                conn.execute(f"ALTER ROLE {role} LOGIN")
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")
    database = urlsplit(pg_url).path.lstrip("/")
    said = [r.getMessage() for r in caplog.records if r.name == "psycopg.pool"]
    failed = [m for m in said if m.startswith("error connecting in")]
    assert failed and all(f"{role}@" in m and database in m for m in failed)
    assert not any(password in m for m in said)


def test_owners_too_long_for_the_servers_index_say_so(pg_url):
    """A fact of a slot with all three owners, each at its length limit in four-byte
    characters, is more than a PostgreSQL index row holds: the error names the server's
    limit and the names to shorten (not a lost connection), and the store goes on."""
    from ctxslots import FactStore, Limits
    from ctxslots.stores.owners import BUILTIN_SLOT_OWNERS, SlotOwners

    def name(start: int) -> str:  # distinct characters, so the index cannot compress them
        return "".join(chr(start + n) for n in range(200))

    owners = {**BUILTIN_SLOT_OWNERS, "pair": SlotOwners(user=True, agent=True, scope=True)}
    limits = Limits(slots=("user", "project", "agent", "pair"), slot_owners=owners)
    with FactStore(pg_url, limits=limits) as store:
        with pytest.raises(StoreError) as caught:
            store.upsert("pair", name(0x20000), "A value.", user=name(0x21000),
                         agent=name(0x22000), scope=name(0x23000))
        said = str(caught.value)
        assert "lost the connection" not in said
        assert "passes a limit of PostgreSQL" in said and "shorter owner names" in said
        assert [] == store.facts(slots=["pair"], user=name(0x21000), agent=name(0x22000),
                                 scope=name(0x23000))
        assert "A value." == store.upsert("pair", "short", "A value.", user="alice",
                                          agent="helper", scope="shop").value


@pytest.mark.parametrize("refusal", ["nologin", "no connect"])
def test_a_login_the_server_refuses_is_not_called_unreachable(pg_url, postgres, role, refusal):
    """A role that may not log in, or may not connect to the database: the server answered
    and refused, so the message says so (and what it said), not to start the server or
    fix the host and port."""
    name = role()
    database = urlsplit(pg_url).path.lstrip("/")
    with postgres.admin() as conn:
        if refusal == "nologin":
            conn.execute(f"ALTER ROLE {name} NOLOGIN")
        else:
            conn.execute(f"REVOKE CONNECT ON DATABASE {database} FROM PUBLIC")
    try:
        with pytest.raises(StoreError) as info:
            FactStore(with_user(pg_url, name), create=False)
    finally:
        with postgres.admin() as conn:
            conn.execute(f"GRANT CONNECT ON DATABASE {database} TO PUBLIC")
    message = str(info.value)
    assert message.startswith(f"the PostgreSQL server at {info.value.path} refused the "
                              "connection (")
    assert ("is not permitted to log in" if refusal == "nologin"
            else f'permission denied for database "{database}"') in message
    assert "cannot reach" not in message and "start it" not in message


def test_a_role_granted_select_alone_searches_without_counting_accesses(pg_url, role):
    """A role that may read the store but not write it (an analyst's account): searches
    answer, say once that accesses are not counted, and count none, as on a replica;
    a write it tries is refused in one line."""
    from click.testing import CliRunner

    from ctxslots import FactStore
    from ctxslots.cli import cli

    with FactStore(pg_url) as store:
        fact = store.add("user", "The user drinks green tea.")
    name = role()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {name}")
        conn.execute(f"GRANT SELECT ON ALL SEQUENCES IN SCHEMA public TO {name}")
    url = with_user(pg_url, name)
    with FactStore(url, create=False) as store:
        with pytest.warns(RuntimeWarning, match=f"read-only for role '{name}'.*"
                                                "accesses are not counted"):
            hits = store.search("tea")
        assert [fact.id] == [h.fact.id for h in hits]
        with pytest.raises(StoreError, match="lacks a privilege"):
            store.add("user", "The user drinks coffee.")
    result = CliRunner().invoke(cli, ["--db", url, "search", "tea"])
    assert 0 == result.exit_code, result.output
    assert "The user drinks green tea." in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["--db", url, "remember", "user", "Drinks coffee."])
    assert 1 == result.exit_code
    (line,) = result.output.splitlines()
    assert line.startswith("Error: the role of ") and "lacks a privilege" in line
    with FactStore(pg_url) as store:
        assert 0 == store.get(fact.id).access_count
