"""What an operator's server does to a PostgreSQL store: locks held for maintenance,
damaged files, settings imposed on the role or the URL; each met with one clear error."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

import pytest

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")

from click.testing import CliRunner

from _postgres import PostgresServer, with_user
from ctxslots import FactStore, StoreBusyError, StoreError
from ctxslots.cli import cli


def test_doctor_under_a_maintenance_lock_says_busy_and_never_advises_a_restore(
        pg_url, monkeypatch):
    """While another session holds ``LOCK TABLE facts``, the doctor fails as any call does
    (busy, run it again): the facts are not called unreadable, and no restore is advised."""
    monkeypatch.setenv("CTXSLOTS_BUSY_TIMEOUT", "0.2")
    with FactStore(pg_url) as store:
        store.add("project", "The deploy runs on Fridays.")
    with psycopg.connect(pg_url) as holder:
        holder.execute("LOCK TABLE facts IN ACCESS EXCLUSIVE MODE")
        with FactStore(pg_url) as store, pytest.raises(StoreBusyError) as info:
            store.doctor()
        assert "is busy" in str(info.value) and "backup" not in str(info.value)
        result = CliRunner().invoke(cli, ["--db", pg_url, "doctor"])
        holder.rollback()
    assert 1 == result.exit_code
    assert "backup" not in result.output and "unreadable" not in result.output
    (line,) = result.output.splitlines()
    assert line.startswith("Error: ") and "is busy" in line
    with FactStore(pg_url) as store:
        assert store.doctor().ok


def test_doctor_reports_a_missing_table_file_as_unreadable_facts(postgres: PostgresServer):
    """The facts table's file gone from the data directory: the doctor reports the facts
    unreadable in one line (the server's first line) and advises a restore."""
    if not postgres.private or postgres.data_dir is None:
        pytest.skip("needs a private server whose data directory the test may change")
    url = postgres.database()  # dropped afterwards: its files are damaged
    with FactStore(url) as store:
        store.add("project", "The deploy runs on Fridays.")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        (relative,) = conn.execute("SELECT pg_relation_filepath('facts')").fetchone()
        data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])
    (data_dir / relative).unlink()
    with FactStore(url, create=False) as store:
        report = store.doctor()
    assert not report.ok and not report.facts_readable
    (problem,) = report.problems
    assert problem.startswith("the facts cannot be read (could not open file")
    assert problem.endswith("restore the database from a backup") and "\n" not in problem


def test_a_search_path_without_the_vector_schema_is_refused_before_anything_is_created(
        postgres: PostgresServer):
    """The store's schema alone on the URL's search_path, pgvector in ``public``: opening
    says which schema to add, and creates no table."""
    url = postgres.empty_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute("CREATE SCHEMA mem")
    only_mem = f"{url}{'&' if '?' in url else '?'}options=-c%20search_path%3Dmem"
    with pytest.raises(StoreError) as info:
        FactStore(only_mem)
    message = str(info.value)
    assert "vector extension" in message and "schema public" in message
    assert "search_path (mem)" in message and "(nothing was created)" in message
    result = CliRunner().invoke(cli, ["--db", only_mem, "remember", "user", "Likes tea."])
    assert 1 == result.exit_code
    (line,) = result.output.splitlines()
    assert line.startswith("Error: the vector extension of ")
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'mem'"
                            ).fetchone() == (0,)
    both = only_mem.replace("search_path%3Dmem", "search_path%3Dmem,public")
    with FactStore(both) as store:
        store.add("user", "Likes tea.")
        assert ["Likes tea."] == [h.fact.value for h in store.search("tea")]
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM mem.facts").fetchone() == (1,)


@pytest.mark.parametrize("encoding", ["LATIN1", "SQL_ASCII"])
def test_a_database_not_in_utf8_is_refused_at_open_in_one_line(
        postgres: PostgresServer, encoding):
    """A database made with ``ENCODING 'LATIN1'`` cannot hold ``東京``, and a
    ``SQL_ASCII`` one splits its words otherwise: opening either says which encoding to
    use (in one line for the command line) and creates no table."""
    name = f"ctxslots_enc_{uuid.uuid4().hex[:8]}"
    with postgres.admin() as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING '{encoding}' "
                      "LC_COLLATE 'C' LC_CTYPE 'C'")
    url = urlunsplit(urlsplit(postgres.url)._replace(path="/" + name))
    try:
        with pytest.raises(StoreError) as info:
            FactStore(url)
        message = str(info.value)
        assert f"'{name}'" in message and f"has encoding {encoding}" in message
        assert "ENCODING 'UTF8'" in message and "(nothing was created)" in message
        for args in (["doctor"], ["remember", "user", "Lives in 東京."], ["search", "東京"]):
            result = CliRunner().invoke(cli, ["--db", url, *args])
            assert 1 == result.exit_code, args
            (line,) = result.output.splitlines()
            assert line.startswith("Error: the database ") and "ENCODING 'UTF8'" in line
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                                ).fetchone() == (0,)
    finally:
        with postgres.admin() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_latin1_client_encoding_of_the_url_or_environment_keeps_every_character(
        pg_url, tmp_path, monkeypatch):
    """``client_encoding=LATIN1`` in the URL's options, or ``PGCLIENTENCODING=LATIN1``,
    speaks for the user's own tools: the store still writes, reads, finds, exports and
    imports characters Latin-1 lacks, as on any UTF-8 connection."""
    values = ["Lives in 東京.", "Celebrates with 🎉 and Dvořák.", "Pays 5 € for café crème."]
    latin1 = f"{pg_url}{'&' if '?' in pg_url else '?'}options=-c%20client_encoding%3DLATIN1"
    with FactStore(latin1) as store:
        ids = [store.add("user", value).id for value in values]
        assert values == [store.get(fact_id).value for fact_id in ids]
        assert [values[0]] == [h.fact.value for h in store.search("東京")]
        assert [values[1]] == [h.fact.value for h in store.search("Dvořák")]
    monkeypatch.setenv("PGCLIENTENCODING", "LATIN1")
    exported = CliRunner().invoke(cli, ["--db", pg_url, "export", "-o", str(tmp_path / "x.jsonl")])
    assert 0 == exported.exit_code, exported.output
    copy = tmp_path / "copy.db"
    imported = CliRunner().invoke(cli, ["--db", str(copy), "import", str(tmp_path / "x.jsonl")])
    assert 0 == imported.exit_code, imported.output
    with FactStore(copy) as store:
        assert sorted(values) == sorted(f.value for f in store.facts())
    with FactStore(tmp_path / "other.db") as store:
        store.add("user", "Speaks Ελληνικά at home.")
        with (tmp_path / "other.jsonl").open("w", encoding="utf-8") as fp:
            store.export_jsonl(fp)
    imported = CliRunner().invoke(cli, ["--db", pg_url, "import", str(tmp_path / "other.jsonl")])
    assert 0 == imported.exit_code, imported.output
    found = CliRunner().invoke(cli, ["--db", pg_url, "search", "ελληνικα"])
    assert 0 == found.exit_code, found.output
    assert "Speaks Ελληνικά at home." in found.output


def test_floats_read_back_exactly_on_a_database_with_extra_float_digits_zero(
        postgres: PostgresServer):
    """``ALTER DATABASE ... SET extra_float_digits = 0`` makes the server print floats
    rounded to 15 digits: the store still reads back the times and confidence it wrote,
    and a timeline lists its anchor once."""
    url = postgres.empty_database()
    with postgres.admin() as admin:
        admin.execute(f'ALTER DATABASE "{urlsplit(url).path.lstrip("/")}" '
                      "SET extra_float_digits = 0")
    ticks = iter(range(100))
    with FactStore(url, clock=lambda: 1_800_000_000.123456789 + next(ticks) * 1e-6) as store:
        ids = [store.add("project", f"Event number {n}.", scope="log").id for n in range(5)]
        assert ids == [f.id for f in store.timeline(ids[2], scope="log")]
        added = store.add("user", "Prefers tea.", confidence=0.1234567890123456789)
        read = store.get(added.id)
        assert (added.confidence, added.created_at, added.observed_at) == (
            read.confidence, read.created_at, read.observed_at)


@pytest.mark.parametrize(("query", "said"), [
    ("options=-c%20statement_timeout%3Dabc",
     'invalid value for parameter "statement_timeout": "abc"'),
    ("options=-c%20no_such_setting%3D1", 'unrecognized configuration parameter "no_such_setting"'),
    ("options=-c%20shared_buffers%3D1MB",
     'parameter "shared_buffers" cannot be changed without restarting the server'),
])
def test_a_setting_the_server_refuses_in_the_url_options_is_named(pg_url, query, said):
    """The server answered and refused a setting of the URL's ``options``: the error names
    the setting and the URL's options, not an unreachable server or its host and port."""
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}{query}"
    with pytest.raises(StoreError) as info:
        FactStore(url)
    message = str(info.value)
    assert "refused a setting of the URL's options: " + said in message
    assert "cannot reach" not in message and "host and port" not in message
    result = CliRunner().invoke(cli, ["--db", url, "stats"])
    assert 1 == result.exit_code
    (line,) = result.output.splitlines()
    assert said in line and "host and port" not in line


def test_a_setting_the_server_refuses_in_pgoptions_is_named_there(pg_url, monkeypatch):
    """A URL with no options of its own takes libpq's PGOPTIONS: the refused setting is
    said to be there, not in the URL (whose options, given, win over it)."""
    monkeypatch.setenv("PGOPTIONS", "-c statement_timeout=abc")
    with pytest.raises(StoreError) as info:
        FactStore(pg_url)
    message = str(info.value)
    assert message.endswith('refused a setting of PGOPTIONS: invalid value for parameter '
                            '"statement_timeout": "abc"; fix or remove it in PGOPTIONS')
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}options=-c%20lock_timeout%3Dabc"
    with pytest.raises(StoreError) as info:
        FactStore(url)
    assert "refused a setting of the URL's options: " \
           'invalid value for parameter "lock_timeout"' in str(info.value)


def test_a_server_not_of_the_kind_target_session_attrs_asks_for_says_so(pg_url):
    """``target_session_attrs=read-only`` and only a primary to connect to: the error says
    which kind was asked for and not found, not that nothing answers."""
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}target_session_attrs=read-only"
    with pytest.raises(StoreError) as info:
        FactStore(url)
    message = str(info.value)
    assert "target_session_attrs" in message and "session is not read-only" in message
    assert "cannot reach" not in message and "host and port" not in message


def test_target_session_attrs_from_the_environment_is_named_there(pg_url, monkeypatch):
    """libpq's PGTARGETSESSIONATTRS asks for the kind when the URL does not: the error
    names it, not a target_session_attrs the URL does not have."""
    monkeypatch.setenv("PGTARGETSESSIONATTRS", "read-only")
    with pytest.raises(StoreError) as info:
        FactStore(pg_url)
    assert str(info.value).endswith(
        "is of the kind PGTARGETSESSIONATTRS asks for (session is not read-only): point the "
        "URL at such a server, or change PGTARGETSESSIONATTRS")


def _wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_batch_left_idle_past_the_servers_timeout_says_so_and_keeps_nothing(pg_url):
    """``idle_in_transaction_session_timeout`` ends the session of a batch that waits: the
    next write says the server ended an idle transaction (not a lost server), nothing of
    the batch is kept, and the store's next call works."""
    name = f"idle_{uuid.uuid4().hex[:8]}"
    url = (f"{pg_url}{'&' if '?' in pg_url else '?'}application_name={name}"
           "&options=-c%20idle_in_transaction_session_timeout%3D200")

    def sessions(state: str) -> int:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                "application_name = %s AND state = %s", (name, state)
                                ).fetchone()[0]

    with FactStore(url) as store:
        with pytest.raises(StoreError) as info, store.batch():
            store.upsert("user", "first", "Written before the wait.")
            _wait_until(lambda: sessions("idle in transaction") == 0)  # the server ended it
            store.upsert("user", "second", "Written after the wait.")
        message = str(info.value)
        assert "idle_in_transaction_session_timeout" in message
        assert "nothing of the transaction was written" in message
        assert "idle-in-transaction timeout" in message and "lost the connection" not in message
        assert "Written after." == store.upsert("user", "third", "Written after.").value
        assert ["third"] == [f.key for f in store.facts()]


@pytest.mark.parametrize("password", ["Hush%zz-secret", "Hush/secret-word"])
def test_a_password_written_unencoded_is_never_shown_in_the_error(pg_url, password):
    """A password holding a ``%`` not followed by hex digits, or a ``/``, is cut by the URL's
    parser, and libpq names the piece it could not use (a bad percent-encoding, a port):
    the error shows no piece of it and says how to write it."""
    url = with_user(pg_url, "ops", password)
    with pytest.raises(StoreError) as info:
        FactStore(url)
    message = str(info.value)
    for piece in ("Hush", "secret", "zz"):
        assert piece not in message
    assert "percent-encoded" in message and "PGPASSWORD" in message
    result = CliRunner().invoke(cli, ["--db", url, "stats"])
    assert 1 == result.exit_code
    assert "Hush" not in result.output and "secret" not in result.output


def test_a_password_in_the_urls_query_is_never_shown_in_the_error(pg_url):
    """``?password=`` with a ``%`` not followed by hex digits: libpq names the token it could
    not decode; the error does not show it."""
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}password=Hush%zz-secret"
    with pytest.raises(StoreError) as info:
        FactStore(url)
    assert "Hush" not in str(info.value) and "secret" not in str(info.value)
    assert "percent-encoded" in str(info.value)

@pytest.mark.parametrize("tail", ["", "&sslmode=disable"])
def test_a_password_cut_by_an_ampersand_in_the_urls_query_is_never_shown(tail):
    """``?password=Hush&secretword``: libpq reads ``secretword`` as a parameter of its own
    and names it as malformed; the error shows no piece of the password and says how to
    write it."""
    with pytest.raises(StoreError) as info:  # port 1 of the loopback: nothing listens
        FactStore(f"postgresql://ada@127.0.0.1:1/postgres?password=Hush&secretword{tail}")
    message = str(info.value)
    assert "Hush" not in message and "secretword" not in message
    assert "%26 for &" in message and "PGPASSWORD" in message


@pytest.mark.parametrize("user, password", [("postgres", "postgres"), ("ops", "127")])
def test_a_well_formed_password_the_message_names_anyway_is_no_bad_url(user, password):
    """A password written well (``postgres:postgres``, or one that is part of the host) is
    no reason to say the URL is malformed: the message is the one of the failure itself."""
    with pytest.raises(StoreError) as info:  # port 1 of the loopback: nothing listens
        FactStore(f"postgresql://{user}:{password}@127.0.0.1:1/postgres")
    assert str(info.value).startswith("cannot reach a PostgreSQL server")
    assert "percent-encoded" not in str(info.value)


@pytest.mark.parametrize("url", [
    "postgresql://127.0.0.1:1/postgres?user=ada@prod",
    "postgresql://ada@127.0.0.1:1/postgres?sslmode=disable&application_name=etl@night",
    "postgresql://127.0.0.1:1/postgres?user=ada@prod&application_name=etl/night"])
def test_an_at_sign_in_the_urls_query_is_no_password(url):
    """An ``@`` in the query (a user name written ``?user=ada@prod``, an application
    name) with no password anywhere: the message is the one of the failure itself,
    though it names the port that precedes the query."""
    with pytest.raises(StoreError) as info:  # port 1 of the loopback: nothing listens
        FactStore(url)
    assert str(info.value).startswith("cannot reach a PostgreSQL server")
    assert "password" not in str(info.value)


@pytest.mark.parametrize("url, shown", [
    ("postgresql://ada@127.0.0.1/postgres?port=1", "postgresql://ada@127.0.0.1:1/postgres"),
    ("postgresql://ada@/postgres?host=/nonexistent/socket&port=1",
     "postgresql://ada@/postgres?host=/nonexistent/socket&port=1")])
def test_a_port_in_the_urls_query_is_in_the_location_shown(url, shown):
    """``?port=`` is the server's port as much as ``host:port`` is: the location the
    error names (and its path) keeps it, instead of naming the default port's server."""
    with pytest.raises(StoreError) as info:  # port 1: nothing listens
        FactStore(url)
    assert shown == info.value.path
    assert f"cannot reach a PostgreSQL server at {shown}:" in str(info.value)


def test_a_socket_directory_written_as_the_host_prints_a_url_of_the_same_database(
        postgres: PostgresServer):
    """``postgresql://user@%2Fsocket%2Fdir/db``: the location a message prints (and the
    command it suggests) is a URL that reaches the same database, not one whose database
    is named after the socket directory."""
    url = postgres.empty_database()
    parts = urlsplit(url)
    socket = parse_qs(parts.query).get("host", [""])[0]
    if not socket.startswith("/"):
        pytest.skip("needs a server reached through a Unix socket")
    netloc = f"{parts.netloc.rpartition('@')[0]}@{quote(socket, safe='')}"
    if parts.port:
        netloc += f":{parts.port}"
    encoded = urlunsplit(parts._replace(netloc=netloc, query=""))
    with pytest.raises(StoreError) as info:
        FactStore(encoded, create=False)
    suggested = re.search(r"`ctxslots --db (\S+) remember", str(info.value)).group(1)
    assert suggested == info.value.path
    with FactStore(suggested) as store:
        store.add("user", "Likes tea.")
    with FactStore(encoded, create=False) as store:
        assert ["Likes tea."] == [f.value for f in store.facts()]
