"""The ctxslots command over the fact store."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ctxslots import FactStore
from ctxslots.cli import cli


def run(db, *args, ok=True):
    result = CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)
    assert (result.exit_code == 0) == ok, result.output
    return result


def test_remember_search_get(db_path):
    """remember stores a fact; search --json prints it with its trace; get shows it."""
    out = run(db_path, "remember", "project", "Deploys run on Friday.", "--key", "deploy.day",
              "--scope", "shop", "--tags", "ops, release", "--json").output
    fact = json.loads(out)
    assert ["ops", "release"] == fact["tags"]

    hits = json.loads(run(db_path, "search", "when are deploys", "--scope", "shop", "--json").output)
    assert [fact["id"]] == [h["id"] for h in hits]
    assert {"bm25", "bm25_rank", "decay", "reinforcement", "confidence", "final"} <= set(hits[0]["trace"])
    assert "Deploys run on Friday." in run(db_path, "get", str(fact["id"])).output


def test_get_shows_an_expired_fact_and_says_so(db_path):
    """An expired fact is still in the store (stats counts it): get shows it, marked."""
    with FactStore(db_path, clock=lambda: 1_000_000_000.0) as store:
        fact = store.add("agent", "The staging password rotates today.",
                         expires_at=1_000_000_060.0)
    out = run(db_path, "get", str(fact.id)).output
    assert "The staging password rotates today. (expired)" in out
    assert json.loads(run(db_path, "get", str(fact.id), "--json").output)["id"] == fact.id
    assert "(expired)" not in run(db_path, "remember", "agent", "Fresh one.").output


def test_scope_and_slot_options(db_path):
    """search honours --scope and repeated --slot."""
    run(db_path, "remember", "project", "Deploys run on Friday.", "--scope", "a")
    run(db_path, "remember", "agent", "Deploys failed twice last week.")
    assert "no matching facts" in run(db_path, "search", "deploys", "--scope", "b", "--slot", "project").output
    out = run(db_path, "search", "deploys", "--scope", "a", "--slot", "project", "--slot", "agent").output
    assert "Friday" in out and "twice" in out


def test_forget_reinforce_demote_stats(db_path):
    """forget archives, reinforce/demote change the score, stats counts."""
    fid = json.loads(run(db_path, "remember", "agent", "Use ripgrep.", "--json").output)["id"]
    assert '"score": 3.0' in run(db_path, "reinforce", str(fid), "--json").output
    assert '"score": 2.0' in run(db_path, "demote", str(fid), "--json").output
    assert "(archived)" in run(db_path, "forget", str(fid)).output
    found = run(db_path, "search", "ripgrep", "--archive").output
    assert "(archived)" in found
    assert "; archived: cli" in found  # the reason it moved
    stats = json.loads(run(db_path, "stats", "--json").output)
    assert (0, 1) == (stats["facts"], stats["archived"])


def test_errors_are_one_line_without_traceback(db_path):
    """Bad input prints one clear line to stderr and exits non-zero."""
    for args in (["get", "999"], ["forget", "999"], ["remember", "", "x"],
                 ["remember", "user", "x" * 5000], ["search", "q", "--limit", "0"]):
        result = CliRunner().invoke(cli, ["--db", str(db_path), *args])
        assert result.exit_code != 0, args
        assert "Traceback" not in result.output
        errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
        assert 1 == len(errors), result.output


def test_demo_runs_offline(tmp_path):
    """ctxslots demo fills a fresh store and prints what the search found."""
    result = CliRunner().invoke(cli, ["demo", "--db-dir", str(tmp_path)], catch_exceptions=False)
    assert 0 == result.exit_code
    assert "Deploys of shop-api run every Friday" in result.output
    assert (tmp_path / "demo.db").exists()


def test_python_m_ctxslots(db_path):
    """python -m ctxslots runs the same command, with errors on stderr."""
    with FactStore(db_path):
        pass
    proc = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(db_path), "get", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert 1 == proc.returncode
    assert "Error: no fact with id 1" == proc.stderr.strip()
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [["search", "deploy"], ["get", "1"], ["stats"], ["list"],
                                     ["export"], ["doctor"], ["assemble", "hello"],
                                     ["reindex"], ["prune", "--dry-run"]])
def test_reading_a_missing_store_creates_nothing(tmp_path, command):
    """Commands that do not write facts refuse a missing store in one line naming it, creating nothing."""
    path = tmp_path / "nonexistent" / "dir" / "x.db"
    result = CliRunner().invoke(cli, ["--db", str(path), *command])
    assert 1 == result.exit_code
    assert [(f"Error: no store at {path}: write a fact first (`ctxslots --db {path} remember "
             "...`) or pass the path of an existing store")] == result.output.strip().splitlines()
    assert not (tmp_path / "nonexistent").exists()


def test_without_db_a_search_creates_no_default_store(tmp_path, monkeypatch):
    """With no --db and no CTXSLOTS_DB, a search does not create the default store file."""
    monkeypatch.delenv("CTXSLOTS_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["search", "deploy"])
    assert 1 == result.exit_code and "no store at" in result.output
    assert not (tmp_path / "data").exists()


def test_remembering_the_same_memory_twice_says_so_and_writes_one(db_path):
    """A second identical remember answers 'already stored' with the first fact's id; one fact is kept."""
    first = CliRunner().invoke(cli, ["--db", str(db_path), "remember", "agent", "Rerun it once."])
    again = CliRunner().invoke(cli, ["--db", str(db_path), "remember", "agent", "Rerun it once."])
    assert "[id:1] agent Rerun it once.\n" == first.output
    assert "already stored: [id:1] agent Rerun it once.\n" == again.output
    with FactStore(db_path) as store:
        assert 1 == len(store.facts())


def test_remember_with_a_context_is_found_through_it_and_a_bad_one_says_so(db_path):
    """remember --context makes a reply findable by its question; an oversized one is one line."""
    fact = json.loads(run(db_path, "remember", "user", "It was Ilse Varga.", "--context",
                          "Who did you meet at the robotics conference?", "--json").output)
    assert "Who did you meet at the robotics conference?" == fact["context"]
    hits = json.loads(run(db_path, "search", "robotics conference", "--json").output)
    assert [fact["id"]] == [h["id"] for h in hits]
    refused = run(db_path, "remember", "user", "Another.", "--context", "x" * 5000, ok=False)
    assert "context is 5000 bytes, over the limit of 4096" in refused.output
    assert 1 == len(refused.output.strip().splitlines())


@pytest.mark.parametrize("command", [["get"], ["forget"], ["reinforce"], ["demote"],
                                     ["delete", "--yes"]])
def test_a_command_by_id_with_owners_finds_only_a_fact_they_see(db_path, command):
    """With --user (and --agent, --scope) a command reaching a fact by id acts only on a fact
    those owners see, as the library's owner check does: Bob's id answers 'no fact with id'
    for Alice and nothing changes; for Bob it works."""
    with FactStore(db_path) as store:
        bobs = store.upsert("user", "pet", "Bob keeps a turtle.", user="bob").id
    refused = CliRunner().invoke(cli, ["--db", str(db_path), *command[:1], str(bobs),
                                       "--user", "alice", *command[1:]])
    assert 1 == refused.exit_code and 1 == len(refused.output.splitlines()), refused.output
    assert f"no fact with id {bobs}" in refused.output
    with FactStore(db_path) as store:
        fact = store.get(bobs)
        assert fact is not None and (0, 0) == (fact.score, fact.access_count)
    allowed = CliRunner().invoke(cli, ["--db", str(db_path), *command[:1], str(bobs),
                                       "--user", "bob", *command[1:]])
    assert 0 == allowed.exit_code, allowed.output


def test_delete_takes_an_id_as_the_other_commands_do(db_path):
    """delete 0 is a usage error (exit 2) naming what an id is, as get 0 is."""
    run(db_path, "remember", "user", "Tea.")
    outcomes = [CliRunner().invoke(cli, ["--db", str(db_path), *args])
                for args in (["get", "0"], ["delete", "0", "--yes"])]
    assert [2, 2] == [r.exit_code for r in outcomes]
    assert all("it must be a whole number from 1 to" in r.output for r in outcomes)
