"""ctxslots assemble: the prompt on stdout, dumps to stdout or a file, one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxslots import ANY, FactStore, count_tokens
from ctxslots.cli import cli


def run(db, *args, ok=True):
    result = CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)
    assert (result.exit_code == 0) == ok, result.output
    return result


def _fill(db):
    run(db, "remember", "user", "The user reads answers in a terminal.", "--key", "ui")
    run(db, "remember", "project", "Deploys of shop run on Friday.", "--scope", "shop")
    run(db, "remember", "project", "Deploys of blog run on push.", "--scope", "blog")


def test_assemble_prints_the_prompt(db_path):
    """assemble prints the prompt text for the message and scope, and nothing else."""
    _fill(db_path)
    out = run(db_path, "assemble", "deploys for the terminal user", "--scope", "shop").output
    assert out == ("## What you know about the user\n- The user reads answers in a terminal.\n\n"
                   "## What you know about this project\n- Deploys of shop run on Friday.\n")


def test_dump_replaces_the_prompt_on_stdout(db_path):
    """With --dump and no -o, stdout carries the dump, whose total counts the prompt exactly."""
    _fill(db_path)
    prompt = run(db_path, "assemble", "deploys", "--scope", "shop").output
    data = json.loads(run(db_path, "assemble", "deploys", "--scope", "shop", "--budget", "500",
                          "--dump", "json").output)
    assert (500, count_tokens(prompt), prompt) == (data["budget"], data["total_tokens"], data["text"])
    markdown = run(db_path, "assemble", "deploys", "--scope", "shop", "--dump", "markdown").output
    assert markdown.startswith("# ctxslots prompt dump\n")


def test_dump_to_file_keeps_the_prompt_on_stdout(db_path, tmp_path):
    """With -o the dump goes to the file and the prompt still goes to stdout."""
    _fill(db_path)
    target = tmp_path / "dump.html"
    out = run(db_path, "assemble", "deploys terminal", "--scope", "shop", "--dump", "html",
              "-o", str(target)).output
    assert out.startswith("## What you know about the user\n")
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Deploys of shop run on Friday." in page


def test_small_budget_drops_sections(db_path):
    """--budget limits the prompt; what did not fit is in the dump with its reason."""
    _fill(db_path)
    data = json.loads(run(db_path, "assemble", "deploys terminal", "--scope", "shop",
                          "--budget", "20", "--dump", "json").output)
    assert data["total_tokens"] <= 20
    project = next(s for s in data["sections"] if s["name"] == "project_memory")
    assert ("dropped", "header_does_not_fit") == (project["status"], project["reason"])


def test_assemble_errors_are_one_line(db_path):
    """Bad arguments and a budget the sticky sections exceed print one line, no traceback."""
    _fill(db_path)
    cases = [(["assemble", "x", "--budget", "0"], "Invalid value for '--budget'"),
             (["assemble", "x", "--dump", "yaml"], "Invalid value for '--dump'"),
             (["assemble", "x", "-o", "out.json"], "-o/--output needs --dump"),
             (["assemble", "x", "--scope", " "], "scope must not be blank"),
             (["assemble", "terminal", "--budget", "5"], "do not fit into 5 tokens"),
             (["assemble", "x", "--dump", "json", "-o", str(db_path / "f.json")],
              "cannot write")]  # under a file: missing folders are made (0700), this cannot be
    for args, message in cases:
        result = CliRunner().invoke(cli, ["--db", str(db_path), *args])
        assert result.exit_code != 0, args
        assert message in result.output, (args, result.output)
        assert "Traceback" not in result.output
        assert 1 == len([l for l in result.output.splitlines() if l.startswith("Error")])


def test_a_dump_path_under_a_file_is_refused_before_the_store_is_read(db_path, tmp_path):
    """-o under a file: one line naming the file in the way, and no fact counted as shown
    (an assembly counts its facts as accessed; a failed command must not)."""
    _fill(db_path)
    in_the_way = tmp_path / "notes.txt"
    in_the_way.write_text("a file, not a folder\n")
    target = in_the_way / "dumps" / "dump.html"
    with FactStore(db_path) as store:
        before = {f.id: f.access_count for f in store.facts(scope=ANY)}
    result = CliRunner().invoke(cli, ["--db", str(db_path), "assemble", "deploys terminal",
                                      "--scope", "shop", "--dump", "html", "-o", str(target)])
    assert 1 == result.exit_code
    assert [f"Error: cannot write {target}: {in_the_way} is not a folder"] == \
        result.output.splitlines()
    with FactStore(db_path) as store:
        assert before == {f.id: f.access_count for f in store.facts(scope=ANY)}
    run(db_path, "assemble", "deploys terminal", "--scope", "shop")  # the same, printed:
    with FactStore(db_path) as store:  # counted, so the check above could fail
        assert before != {f.id: f.access_count for f in store.facts(scope=ANY)}


@pytest.mark.parametrize("kind", ["link", "fifo", "folder name"])
def test_a_dump_path_no_file_can_replace_is_refused_before_the_store_is_read(
        db_path, tmp_path, kind):
    """-o naming a symbolic link, a pipe or a folder: one line saying why, nothing written
    there, and no fact counted as shown."""
    _fill(db_path)
    aimed_at = tmp_path / "elsewhere.html"
    target = tmp_path / "dump.html"
    if kind == "link":
        target.symlink_to(aimed_at)
        why = "is a symbolic link: ctxslots never writes a file through one"
    elif kind == "fifo":
        os.mkfifo(target)
        why = "not a regular file (a pipe, a device or a directory)"
    else:
        target = tmp_path / "dumps" / ".."
        why = "names a folder, not a file"
    with FactStore(db_path) as store:
        before = {f.id: f.access_count for f in store.facts(scope=ANY)}
    result = CliRunner().invoke(cli, ["--db", str(db_path), "assemble", "deploys terminal",
                                      "--scope", "shop", "--dump", "html", "-o", str(target)])
    assert 1 == result.exit_code
    [line] = result.output.splitlines()
    assert line.startswith("Error: cannot write ") and why in line, line
    assert not aimed_at.exists() and not (tmp_path / "dumps").exists()
    with FactStore(db_path) as store:
        assert before == {f.id: f.access_count for f in store.facts(scope=ANY)}


@pytest.mark.parametrize("name", ["store", "wal", "link", "hard link"])
def test_a_dump_is_never_written_over_the_store(db_path, tmp_path, name):
    """-o naming the store's own file (or its -wal, or it through a link) is refused in one
    line before anything is read or written, and the store keeps every fact."""
    _fill(db_path)
    target = {"store": db_path, "wal": Path(f"{db_path}-wal"),
              "link": tmp_path / "alias.db", "hard link": tmp_path / "hard.db"}[name]
    if name == "link":
        target.symlink_to(db_path)
    elif name == "hard link":
        os.link(db_path, target)
    result = CliRunner().invoke(cli, ["--db", str(db_path), "assemble", "deploys terminal",
                                      "--scope", "shop", "--dump", "json", "-o", str(target)])
    assert 1 == result.exit_code
    assert [(f"Error: cannot write {target}: it is the store's own file ({db_path}); writing "
            "it would replace the memory, so name another file")] == result.output.splitlines()
    with FactStore(db_path) as store:
        assert 3 == len(store.facts(scope=ANY))
        assert {0} == {f.access_count for f in store.facts(scope=ANY)}


def test_a_sticky_overflow_still_writes_its_dump(db_path, tmp_path):
    """The sticky sections alone overflow the budget: the command fails in one line
    (exit 1), but with --dump the dump of what was tried is written first, to stdout or
    to the -o file, marked as a sticky overflow."""
    _fill(db_path)
    result = CliRunner().invoke(
        cli, ["--db", str(db_path), "assemble", "terminal", "--budget", "5", "--dump", "json"])
    assert 1 == result.exit_code
    (said,) = result.stderr.splitlines()
    assert said.startswith("Error: the sticky sections (user_memory) do not fit into 5 tokens")
    data = json.loads(result.stdout)
    assert data["sticky_overflow"] is True and data["budget"] == 5
    user = next(s for s in data["sections"] if s["name"] == "user_memory")
    assert "The user reads answers in a terminal." in json.dumps(user)
    target = tmp_path / "overflow.html"
    result = CliRunner().invoke(
        cli, ["--db", str(db_path), "assemble", "terminal", "--budget", "5", "--dump", "html",
              "-o", str(target)])
    assert 1 == result.exit_code and "" == result.stdout
    assert "do not fit into 5 tokens" in result.stderr
    assert "The user reads answers in a terminal." in target.read_text(encoding="utf-8")


def test_demo_shows_an_assembled_prompt_and_its_dump(tmp_path):
    """ctxslots demo prints the assembled prompt and its markdown dump, and writes the HTML dump."""
    result = CliRunner().invoke(cli, ["demo", "--db-dir", str(tmp_path)], catch_exceptions=False)
    assert 0 == result.exit_code
    assert "Assembled prompt with a budget of " in result.output
    assert "## What you know about this project\n- Deploys of shop-api run every Friday" \
        in result.output
    assert "# ctxslots prompt dump" in result.output
    assert "dropped: budget" in result.output
    assert (tmp_path / "dump.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_dumps_as_of_one_moment_are_byte_identical_and_why_reads_them(db_path):
    """--now ranks as of a moment: two dumps of the same request are byte-identical (the
    ages count from the moment, not from when each ran), the dump names it, a fact said
    after it is left out, and ``why --now`` explains that; a moment that is not ISO 8601
    is one error line."""
    with FactStore(db_path, clock=lambda: 1_700_000_000.0) as store:
        early = store.add("agent", "Deploys of shop need the cache warmed first.").id
    with FactStore(db_path, clock=lambda: 1_800_000_000.0) as store:
        late = store.add("agent", "Deploys of shop now run on Thursdays.").id
    args = ["assemble", "deploys of shop", "--now", "2024-01-10T00:00:00Z", "--dump", "json"]
    first, second = run(db_path, *args).output, run(db_path, *args).output
    assert first == second
    data = json.loads(first)
    assert "2024-01-10T00:00:00+00:00" == data["now"]
    items = {i["fact"]["id"]: i for s in data["sections"] for i in s["items"]}
    assert [early] == list(items) and 0 < items[early]["trace"]["age_days"] < 60
    why = run(db_path, "why", str(late), "deploys of shop", "--now", "2024-01-10", "--json")
    assert "not_visible" == json.loads(why.output)["outcome"]
    result = CliRunner().invoke(cli, ["--db", str(db_path), "assemble", "x", "--now", "soon"])
    assert 2 == result.exit_code
    assert [("Error: Invalid value for '--now': it must be a moment in ISO 8601 "
            "(2024-01-10T09:30:00Z), not 'soon' (see 'cli assemble --help')")] == \
        result.output.splitlines()
