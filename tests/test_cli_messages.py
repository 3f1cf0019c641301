"""What the command says when the store cannot be what was asked: each message names the thing
and the cause in one line, and nothing is created or changed on the way."""

from __future__ import annotations

import getpass
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from ctxslots import ANY, FactStore, InvalidArgumentError, StoreError
from ctxslots.cli import cli

BIG = "9" * 5000


def _run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


def _one_error_line(result) -> str:
    assert 1 == result.exit_code, result.output
    lines = result.output.splitlines()
    assert 1 == len(lines) and lines[0].startswith("Error: "), result.output
    return lines[0]


# -- where the store is ------------------------------------------------------------------


@pytest.mark.parametrize("location", ["postgresql:/memory", "postgres:/memory", "postgresql:memory"])
def test_a_postgresql_url_with_one_slash_is_refused_and_creates_nothing(tmp_path, monkeypatch, location):
    """postgresql:/memory used to become a SQLite file under ./postgresql:; it is refused in
    one line saying how the URL is written, and nothing is created."""
    monkeypatch.chdir(tmp_path)
    line = _one_error_line(_run("--db", location, "remember", "user", "x"))
    if location.endswith(":/memory"):
        assert "is not a PostgreSQL URL" in line and "two slashes" in line
    assert [] == os.listdir(tmp_path)
    if location.endswith(":/memory"):
        with pytest.raises(StoreError, match="two slashes"):
            FactStore(location)


@pytest.mark.parametrize("location", ["mysql://ada@db/memory", "sqlite:///memory.db",
                                      "https://example.org/memory.db", "redis:/x"])
def test_another_scheme_names_the_supported_ones(tmp_path, monkeypatch, location):
    """A URL of another kind says what a store can be: a SQLite path or a postgresql:// URL."""
    monkeypatch.chdir(tmp_path)
    line = _one_error_line(_run("--db", location, "stats"))
    assert "a store is a SQLite file path or a postgresql://" in line
    assert "FactStore" not in line and [] == os.listdir(tmp_path)


def test_paths_that_only_look_like_urls_still_open(tmp_path, monkeypatch):
    """A file name with a colon but no slash after it, and a drive-letter-like path, are paths."""
    monkeypatch.chdir(tmp_path)
    for location in ("notes:v2.db", "C:/memory.db"):
        result = _run("--db", location, "remember", "user", "x")
        assert 0 == result.exit_code, result.output
    assert (tmp_path / "notes:v2.db").exists() and (tmp_path / "C:" / "memory.db").exists()


@pytest.mark.parametrize(("option", "shown"), [("sslmode=bogus", 'invalid sslmode value: "bogus"'),
                                               ("foo=bar", 'invalid URI query parameter: "foo"'),
                                               ("target_session_attrs=x", "target_session_attrs")])
def test_an_invalid_postgresql_option_is_named_as_such(option, shown):
    """An option libpq refuses says the URL's option is invalid, not that no server answers."""
    pytest.importorskip("psycopg")
    line = _one_error_line(_run("--db", f"postgresql://ada:pw@127.0.0.1:1/memory?{option}",
                                "stats"))
    assert "has an invalid option" in line and shown in line
    assert "cannot reach" not in line and "pw" not in line


def test_a_url_without_a_user_names_the_role_libpq_used(postgres):
    """With no user in the URL libpq logs in as the system user: the message names that role,
    not None."""
    user = getpass.getuser()
    with postgres.admin() as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone():
            pytest.skip(f"the server has a role named {user!r}")
    url = postgres.empty_database()
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    no_user = f"{parts.scheme}://{host}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    line = _one_error_line(_run("--db", no_user, "stats"))
    assert f"has no role {user!r}" in line and "None" not in line


# -- files that are not stores ------------------------------------------------------------


def test_a_truncated_store_says_it_is_not_a_store_it_can_read(tmp_path):
    """A store file cut short: not a ctxslots store it can read, damaged or cut short."""
    whole = tmp_path / "whole.db"
    with FactStore(whole) as store:
        for n in range(200):
            store.add("agent", f"Memory number {n} of a store that is about to be cut short.")
    half = tmp_path / "half.db"
    half.write_bytes(whole.read_bytes()[:5000])
    line = _one_error_line(_run("--db", str(half), "stats"))
    assert "is not a ctxslots store this can read: the file is damaged or cut short" in line
    assert "cannot prepare" not in line


def test_a_file_that_is_not_sqlite_says_it_is_not_a_store(tmp_path):
    """Plain text at the path: not a ctxslots store (not a SQLite database)."""
    text = tmp_path / "notes.db"
    text.write_text("hello, world\n" * 100, encoding="utf-8")
    line = _one_error_line(_run("--db", str(text), "stats"))
    assert f"{text} is not a ctxslots store (not a SQLite database)" in line
    assert "hello" in text.read_text()


def test_another_program_s_database_is_refused_and_left_as_it_was(tmp_path):
    """A SQLite file with other tables and no ctxslots schema is not migrated: refused, unchanged."""
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    before = other.read_bytes()
    for args in (["stats"], ["remember", "user", "x"]):
        line = _one_error_line(_run("--db", str(other), *args))
        assert "is not a ctxslots store: it is a SQLite database holding other tables (notes)" in line
    with sqlite3.connect(other) as conn:
        assert [("notes",)] == conn.execute("SELECT name FROM sqlite_master").fetchall()
    assert before == other.read_bytes()


# -- numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["get", BIG], ["forget", BIG], ["reinforce", BIG], ["list", "--page", BIG],
    ["search", "x", "--limit", BIG], ["assemble", "x", "--budget", BIG],
    ["prune", "--dry-run", "--cap", f"agent={BIG}"],
], ids=["get", "forget", "reinforce", "list-page", "search-limit", "assemble-budget", "prune-cap"])
def test_a_five_thousand_digit_number_gets_our_own_message(db_path, args):
    """Our check refuses it naming the range, without repeating 5,000 digits or quoting
    Python's advice about sys.set_int_max_str_digits."""
    FactStore(db_path).close()
    result = _run("--db", str(db_path), *args)
    assert 2 == result.exit_code
    assert 1 == len(result.output.splitlines()) and len(result.output) < 300, result.output
    assert "must be a whole number from" in result.output and "(5,000 characters)" in result.output
    assert "set_int_max_str_digits" not in result.output and "Traceback" not in result.output


def test_a_conversation_line_with_a_huge_number_is_one_error_line(db_path, tmp_path):
    """flush reads a message whose id has 5,000 digits as a line it cannot read, in one line."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "hi", "id": ' + BIG + "}\n", encoding="utf-8")
    line = _one_error_line(_run("--db", str(db_path), "flush", str(chat), "--base-url",
                                "http://127.0.0.1:1/v1", "--model", "m"))
    assert f"{chat}:1: not a message this command reads" in line
    assert "set_int_max_str_digits" not in line


# -- files the command cannot write ---------------------------------------------------------


def _read_only_export(db: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """``ctxslots export -o folder/x.jsonl`` where ``folder`` cannot be written: a read-only
    mount in a private mount namespace for root (which ignores permissions), else 0555."""
    cmd = [sys.executable, "-m", "ctxslots", "--db", str(db), "export", "-o",
           str(folder / "facts.jsonl")]
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("root ignores permissions and unshare(1) is missing for a read-only mount")
    shell = 'mount -t tmpfs -o ro tmpfs "$1" && shift && exec "$@"'
    done = subprocess.run([unshare, "-m", "sh", "-c", shell, "sh", str(folder), *cmd],
                          capture_output=True, text=True, timeout=120, check=False)
    if "mount:" in done.stderr or "unshare:" in done.stderr:
        pytest.skip(f"no read-only mount here: {done.stderr.strip()[:200]}")
    return done


def test_an_export_to_a_read_only_directory_names_the_file_and_the_cause(tmp_path):
    """Not "cannot write .": the full path of the file and the system's reason, in one line."""
    db = tmp_path / "memory.db"
    with FactStore(db) as store:
        store.add("agent", "A memory to export.")
    folder = tmp_path / "ro"
    folder.mkdir()
    done = _read_only_export(db, folder)
    assert 1 == done.returncode, done.stderr
    lines = done.stderr.splitlines()
    assert 1 == len(lines), done.stderr
    assert lines[0].startswith(f"Error: cannot write {folder / 'facts.jsonl'}: ")
    assert "Read-only file system" in lines[0] or "Permission denied" in lines[0]
    assert "cannot write .:" not in lines[0]


def test_stats_on_a_postgresql_store_names_the_server_and_pgvector(pg_url):
    """stats on a PostgreSQL store shows its versions (it failed on the SQLite ones), no password."""
    with FactStore(pg_url) as store:
        store.add("agent", "A memory on the server.", scope="shop")
        info = store.stats()
    result = _run("--db", pg_url, "stats")
    assert 0 == result.exit_code, result.output
    lines = result.output.splitlines()
    assert lines[1] == (f"PostgreSQL {info['server_version']}, pgvector "
                        f"{info['pgvector_version']}, schema {info['schema_version']}")
    assert "agent" in lines[2] and "shop" in lines[2]
    assert "sqlite" not in result.output.lower()
    password = urlsplit(pg_url).password
    assert not password or password not in result.output


@pytest.mark.parametrize("db", ["", "   "], ids=["empty", "blank"])
def test_an_empty_db_is_refused_rather_than_the_default_store(tmp_path, monkeypatch, db):
    """``--db "$STORE"`` with the variable unset wrote to the user's own default store."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    result = _run("--db", db, "remember", "user", "Written nowhere.")
    assert result.exit_code == 2
    assert "--db is empty" in result.output
    assert not (tmp_path / "data").exists()


def test_an_empty_ctxslots_db_is_refused_rather_than_the_default_store(tmp_path, monkeypatch):
    """``CTXSLOTS_DB=${STORE}`` in an env file, with STORE unset, is read by click as no
    variable at all: the fact went to the user's own default store."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("CTXSLOTS_DB", "")
    result = _run("remember", "user", "Written nowhere.")
    assert result.exit_code == 2
    assert "$CTXSLOTS_DB is set but empty" in result.output
    assert not (tmp_path / "data").exists()
    with pytest.raises(StoreError, match=r"\$CTXSLOTS_DB is set but empty"):
        FactStore()
    assert not (tmp_path / "data").exists()
    given = _run("--db", str(tmp_path / "given.db"), "remember", "user", "Written here.")
    assert given.exit_code == 0, given.output
    with FactStore(tmp_path / "given.db") as store:
        assert ["Written here."] == [f.value for f in store.facts()]



def test_a_blank_ctxslots_db_is_refused_naming_the_variable(tmp_path, monkeypatch):
    """``CTXSLOTS_DB=" "`` (a quoted space in an env file) was blamed on ``--db`` by the
    command, and made ``FactStore()`` create a store file named " " in the working
    directory; ``FactStore(" ")`` did the same."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("CTXSLOTS_DB", " ")
    result = _run("remember", "user", "Written nowhere.")
    assert result.exit_code == 2
    assert "$CTXSLOTS_DB is set but empty" in result.output
    assert "--db is empty" not in result.output
    with pytest.raises(StoreError, match=r"\$CTXSLOTS_DB is set but empty"):
        FactStore()
    for blank in ["", "  ", Path(" ")]:
        with pytest.raises(InvalidArgumentError, match="path is empty"):
            FactStore(blank)
    assert [] == list(tmp_path.iterdir())
    given = _run("--db", str(tmp_path / "given.db"), "remember", "user", "Written here.")
    assert given.exit_code == 0, given.output
    with FactStore(tmp_path / "given.db") as store:
        assert ["Written here."] == [f.value for f in store.facts()]


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_db_under_a_tilde_is_in_the_home_folder_where_no_shell_expanded_it(
        tmp_path, monkeypatch, how):
    """``"--db", "~/memory.db"`` in an MCP client's args (no shell between) made a folder
    named ~ in whatever directory the client started the command in: each project's
    launch had a store of its own."""
    home, launched_in = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    launched_in.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(launched_in)
    if how == "variable":
        monkeypatch.setenv("CTXSLOTS_DB", "~/memory.db")
        args: tuple[str, ...] = ()
    else:
        args = ("--db", "~/memory.db")
    result = _run(*args, "remember", "user", "Sam drinks tea.")
    assert 0 == result.exit_code, result.output
    assert [] == list(launched_in.iterdir())
    with FactStore(home / "memory.db") as store:
        assert ["Sam drinks tea."] == [f.value for f in store.facts()]


def test_a_conversation_that_is_not_utf8_fails_alone_and_the_others_still_run(tmp_path):
    from ctxslots.testing import ScriptedChatServer, ScriptedReply

    bad, good = tmp_path / "bad.jsonl", tmp_path / "good.jsonl"
    bad.write_bytes(b'\xff\xfe{"role": "user", "content": "hi"}\n')
    good.write_text('{"role": "user", "content": "I drink green tea."}\n', encoding="utf-8")
    reply = ScriptedReply('{"operations": [{"op": "upsert", "slot": "user", "key": "drink", '
                          '"value": "The user drinks green tea.", "confidence": 0.9, "tags": []}]}')
    db = tmp_path / "m.db"
    with ScriptedChatServer([reply]) as server:
        result = _run("--db", str(db), "flush", str(bad), str(good), "--base-url",
                      server.base_url, "--model", "m")
    assert result.exit_code == 1
    assert (f"{bad}: Error: {bad}:1: not UTF-8 text (invalid start byte); nothing was sent to "
            "the model") in result.output
    assert "Error: 1 of 2 conversations failed" in result.output
    with FactStore(db) as store:
        assert store.get_by_key("user", "drink").value == "The user drinks green tea."


def test_a_one_line_error_keeps_the_spaces_of_a_quoted_value(tmp_path):
    """Only line breaks are folded: the value is shown as the file gave it."""
    facts = tmp_path / "facts.jsonl"
    facts.write_text('{"format": "ctxslots-facts", "version": 1}\n'
                     '{"slot": "agent", "value": "x", "created_at": "  2020-01-01"}\n',
                     encoding="utf-8")
    line = _one_error_line(_run("--db", str(tmp_path / "m.db"), "import", str(facts)))
    assert line.endswith("not '  2020-01-01'"), line


def test_an_empty_slot_scope_or_conversation_is_refused_not_taken_as_left_out(db_path, tmp_path):
    """`--slot ""`, `--scope ""` and `--conversation ""` (an unset shell variable) are
    refused in one line, as every other empty name is, with nothing written: an import
    had read them as not given (the slot from the file's name, the file's own scope) and
    a flush as the file's own conversation id."""
    notes = tmp_path / "user.md"
    notes.write_text("# user\n\n- The user likes tea.\n", encoding="utf-8")
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "I like tea."}\n', encoding="utf-8")
    cases = [(("import", str(notes), "--slot", ""), "slot must be a non-empty string"),
             (("flush", str(chat), "--conversation", "", "--base-url",
               "http://127.0.0.1:9/v1", "--model", "m"), "conversation must be a non-empty")]
    for args, said in cases:
        result = _run("--db", str(db_path), *args)
        assert 1 == result.exit_code, (args, result.output)
        assert said in _one_error_line(result), args
    result = _run("--db", str(db_path), "import", str(notes), "--scope", "")
    assert 2 == result.exit_code and "Error: --scope must not be blank" in result.output
    with FactStore(db_path) as store:
        assert [] == store.facts()


@pytest.mark.parametrize("args", [
    ("remember", "project", "A note.", "--scope", ""), ("remember", "user", "A note.", "--user", " "),
    ("search", "note", "--scope", " "), ("list", "--agent", ""), ("get", "1", "--scope", ""),
    ("export", "--scope", ""), ("erase", "--user", "", "--yes"), ("assemble", "hi", "--scope", ""),
    ("mcp", "--scope", ""),
])
def test_a_blank_owner_option_is_named_as_the_command_line_names_it(db_path, args):
    """`--scope ""` was refused with "scope must be None or a non-empty string", naming
    Python's None to a command-line user; every command names the option instead."""
    with FactStore(db_path) as store:
        store.add("project", "A note.")
    option = args[args.index("") - 1] if "" in args else args[args.index(" ") - 1]
    result = _run("--db", str(db_path), *args)
    assert 2 == result.exit_code, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert 1 == len(errors) and errors[0].startswith(f"Error: {option} must not be blank: "), \
        result.output
    assert "None" not in result.output
    with FactStore(db_path) as store:
        assert ["A note."] == [f.value for f in store.facts(scope=ANY)]
