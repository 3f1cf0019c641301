"""The command line says what it does: help on every option, counted nouns, warnings, listing, the demo."""

from __future__ import annotations

import json
import tempfile
import uuid

import click
import pytest
from click.testing import CliRunner

from _sql import raw
from ctxslots import FactStore, RankingPolicy
from ctxslots.cli import cli
from ctxslots.stores.embedders import HashingEmbedder
from ctxslots.stores.sqlite._vector_cache import TABLE


def _invoke(*args, **kwargs):
    return CliRunner().invoke(cli, list(args), prog_name="ctxslots", catch_exceptions=False, **kwargs)


def _commands():
    return sorted(cli.commands.items())


@pytest.mark.parametrize(("name", "command"), _commands(), ids=[n for n, _ in _commands()])
def test_every_option_has_help(name, command):
    """Every option of every command says what it does in --help."""
    missing = [p.opts[0] for p in command.params
               if isinstance(p, click.Option) and not p.help and p.name != "help"]
    assert [] == missing
    assert command.help


@pytest.mark.parametrize("path", [[], *([n] for n, _ in _commands())],
                         ids=["ctxslots", *(n for n, _ in _commands())])
def test_every_option_read_from_a_variable_names_it_in_help(path):
    """--embedder, --embed-base-url, --free-slots and mcp --tokens are read from
    CTXSLOTS_EMBEDDER, CTXSLOTS_EMBED_BASE_URL, CTXSLOTS_FREE_SLOTS and
    CTXSLOTS_MCP_TOKENS_FILE, and their --help did not say so."""
    output = " ".join(_invoke(*path, "--help").output.split())
    command = cli if not path else cli.commands[path[0]]
    variables = [p.envvar for p in command.params if isinstance(p, click.Option) and p.envvar]
    assert [] == [name for name in variables if name not in output]


def test_flush_help_names_the_api_key_variable():
    """``flush --help`` names the variable the API key is read from."""
    assert "$OPENAI_API_KEY" in _invoke("flush", "--help").output


def test_counts_read_in_the_right_number(db_path, tmp_path):
    """One exported fact reads '1 fact', not '1 facts'."""
    _invoke("--db", str(db_path), "remember", "user", "The user likes tea.")
    result = _invoke("--db", str(db_path), "export", "-o", str(tmp_path / "one.jsonl"))
    assert "exported 1 fact to" in result.output
    assert "0 facts embedded\n" in _invoke("--db", str(db_path), "reindex").output


def test_stats_reset_and_doctor_count_one_in_the_singular(db_path):
    """`stats` and `reset` said "1 facts", "1 replaced values", doctor "1 facts have no
    vector" and "1 vectors have no direction": one thing is named in the singular, with
    its verb, two in the plural."""
    with FactStore(db_path) as store:
        store.upsert("user", "tea", "The user likes tea.")
        store.upsert("user", "tea", "The user likes green tea.")
    line = _invoke("--db", str(db_path), "stats").output.splitlines()[0]
    assert ": 1 fact (0 expired), 0 archived, 1 replaced value, " in line
    asked = _invoke("--db", str(db_path), "reset", input="n\n").output
    assert "erase all 1 fact and 0 archived facts of " in asked
    fused = RankingPolicy(vector_weight=1.0)
    with FactStore(db_path, embedder=HashingEmbedder(dimension=64), ranking=fused) as store:
        store.reindex()
        store.add("agent", "A second fact.")
        conn = raw(store)
        with conn.write():
            conn.execute(f"DELETE FROM {TABLE} WHERE rowid = (SELECT MIN(rowid) FROM {TABLE})")
        assert ["1 fact has no vector: run `ctxslots reindex` to embed it (only it)"] == \
            list(store.doctor().problems)
        with conn.write():
            conn.execute(f"DELETE FROM {TABLE}")
        conn.close()
        assert ["2 facts have no vector: run `ctxslots reindex` to embed them (only them)"] == \
            list(store.doctor().problems)


def test_list_shows_newest_first_a_page_at_a_time(db_path, clock):
    """``list`` shows facts of every scope, the last written first, paged, filtered by slot and scope."""
    with FactStore(db_path, clock=clock) as store:
        for n in range(5):
            store.add("agent", f"Lesson number {n}.", scope="shop" if n % 2 else None)
            clock.advance(days=1)
        store.add("agent", "A lesson about the blog.", scope="blog")
        clock.advance(days=1)
        store.upsert("user", "tea", "The user likes tea.")
        clock.advance(days=1)
        store.upsert("user", "tea", "The user likes green tea.")  # rewritten: now the newest
    first = _invoke("--db", str(db_path), "list", "--limit", "2").output.splitlines()
    assert first[0].startswith("[id:7] user tea: The user likes green tea.")
    assert first[1].startswith("[id:6] agent@blog A lesson about the blog.")
    assert "page 1 of 4 (7 facts); next: --page 2" == first[-1]
    last = _invoke("--db", str(db_path), "list", "--limit", "2", "--page", "4").output
    assert "[id:1] agent Lesson number 0." in last and "page 4 of 4 (7 facts)" in last
    scoped = _invoke("--db", str(db_path), "list", "--scope", "shop", "--slot", "agent").output
    assert ["[id:5]", "[id:4]", "[id:3]", "[id:2]", "[id:1]"] == [
        line.split()[0] for line in scoped.splitlines()[:-1]]
    data = json.loads(_invoke("--db", str(db_path), "list", "--json", "--limit", "1").output)
    assert (7, 7, [7]) == (data["total"], data["pages"], [f["id"] for f in data["facts"]])
    past = _invoke("--db", str(db_path), "list", "--page", "9")
    assert 1 == past.exit_code and "Error: page 9 is past the last page (1)" in past.output
    past_json = _invoke("--db", str(db_path), "list", "--page", "9", "--json")
    assert (1, past.output) == (past_json.exit_code, past_json.output)  # the same failure


def test_list_of_an_empty_store_says_so(db_path):
    """An empty store lists as 'no facts stored'."""
    FactStore(db_path).close()
    assert "no facts stored\n" == _invoke("--db", str(db_path), "list").output


def test_an_allow_list_naming_no_installed_plugin_warns_once(db_path, monkeypatch):
    """``CTXSLOTS_LOAD_PLUGINS=nosuch`` says, once, that no installed plugin is called that."""
    name = f"nosuch{uuid.uuid4().hex[:8]}"  # each allow-list is warned about once per process
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", name)
    FactStore(db_path).close()
    result = _invoke("--db", str(db_path), "assemble", "hello")
    assert 0 == result.exit_code
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert [f"warning: CTXSLOTS_LOAD_PLUGINS names {name}, which no installed plugin provides"] == [
        w.split(" (installed")[0] for w in warnings]


def test_demo_leaves_nothing_behind(tmp_path, monkeypatch):
    """``ctxslots demo`` without --db-dir removes its temporary store when done."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = _invoke("demo")
    assert 0 == result.exit_code and "Deploys of shop-api run every Friday" in result.output
    assert [] == list(tmp_path.iterdir())
    assert "--db-dir DIR" in result.output.splitlines()[-1]


def test_demo_with_a_directory_keeps_the_store_and_the_html_dump(tmp_path):
    """``ctxslots demo --db-dir DIR`` keeps demo.db and dump.html there."""
    result = _invoke("demo", "--db-dir", str(tmp_path / "demo"))
    assert 0 == result.exit_code
    assert {"demo.db", "dump.html"} <= {p.name for p in (tmp_path / "demo").iterdir()}
