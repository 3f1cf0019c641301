"""Every error of the ctxslots command is one line: usage errors, library errors, a dead model server."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from ctxslots.cli import cli
from ctxslots.testing import ScriptedChatServer


def _invoke(db_path, *args):
    return CliRunner().invoke(cli, ["--db", str(db_path), *args], prog_name="ctxslots",
                              catch_exceptions=False)


@pytest.mark.parametrize(("args", "words", "help_of"), [
    (["serach", "deploy"], "No such command 'serach'", "ctxslots --help"),
    (["get", "abc"], "it must be a whole number from 1 to", "ctxslots get --help"),
    (["assemble", "hi", "--budget", "0"], "from 1 to 9,223,372,036,854,775,807, not '0'",
     "ctxslots assemble --help"),
    (["flush", "missing.jsonl", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"],
     "Path 'missing.jsonl' does not exist", "ctxslots flush --help"),
    (["import", "missing.jsonl"], "File 'missing.jsonl' does not exist", "ctxslots import --help"),
    (["remember", "user"], "Missing argument 'VALUE'", "ctxslots remember --help"),
    (["search", "x", "--limit", "lots"], "from 1 to 1,000, not 'lots'", "ctxslots search --help"),
], ids=["typo", "get-abc", "budget-0", "flush-missing-file", "import-missing-file",
        "missing-argument", "bad-limit"])
def test_a_usage_error_is_one_line_naming_the_help(db_path, tmp_path, monkeypatch, args, words, help_of):
    """A mistyped command, a bad value or a missing file prints one line and exits 2."""
    monkeypatch.chdir(tmp_path)
    result = _invoke(db_path, *args)
    assert 2 == result.exit_code
    assert 1 == len(result.output.splitlines()), result.output
    assert result.output.startswith("Error: ") and words in result.output
    assert f"(see '{help_of}')" in result.output


def test_a_bare_command_group_still_shows_its_help():
    """``ctxslots`` with no arguments prints the help, not an error."""
    result = CliRunner().invoke(cli, [], prog_name="ctxslots", catch_exceptions=False)
    assert "Usage: ctxslots" in result.output and "Error" not in result.output


def test_flush_against_a_dead_server_fails_once_in_one_line(db_path, tmp_path):
    """A refused connection is not retried: one line naming the URL, exit 1, and no retry warning
    (a retry would print "try 2 of 4" on stderr first)."""
    conversation = tmp_path / "chat.jsonl"
    conversation.write_text('{"role": "user", "content": "I moved to Lisbon."}\n', encoding="utf-8")
    server = ScriptedChatServer([])
    url = server.base_url
    server.close()  # nothing listens on that port now
    result = _invoke(db_path, "flush", str(conversation), "--base-url", url, "--model", "m")
    assert 1 == result.exit_code
    assert [f"Error: {result.output[7:].strip()}"] == result.output.splitlines(), result.output
    assert 1 == result.output.count("connection refused") and url in result.output
    assert "try 2" not in result.output and "tries" not in result.output


def test_a_failed_flush_with_json_prints_the_report_and_one_error_line(db_path, tmp_path):
    """With --json the failed report goes to stdout as JSON; the error is still one line."""
    conversation = tmp_path / "chat.jsonl"
    conversation.write_text('{"role": "user", "content": "I moved to Lisbon."}\n', encoding="utf-8")
    with ScriptedChatServer(["not json", "still not json"]) as server:
        result = CliRunner().invoke(cli, ["--db", str(db_path), "flush", str(conversation),
                                          "--base-url", server.base_url, "--model", "m", "--json"],
                                    catch_exceptions=False)
    assert 1 == result.exit_code
    assert '"status": "failed"' in result.stdout
    assert 1 == len(result.stderr.splitlines()) and result.stderr.startswith("Error: ")


def test_a_library_warning_with_an_error_is_one_line_naming_the_error(db_path, capsys):
    """A warning the library logs with its exception (a count that could not be written)
    shows on the command line as what went wrong, on one line: no traceback folded in."""
    import logging

    assert 0 == _invoke(db_path, "remember", "user", "Tea.").exit_code  # adds the handler
    capsys.readouterr()
    try:
        raise ValueError("the disk\nwent away")
    except ValueError:
        logging.getLogger("ctxslots.assembler").warning("the counts were not written",
                                                        exc_info=True)
    shown = capsys.readouterr().err.splitlines()
    assert ["warning: the counts were not written: ValueError: the disk went away"] == shown


def _quoting_error_cpu_seconds(tmp_path, blanks: int) -> tuple[float, str]:
    """CPU time of `ctxslots import` refusing a Markdown file whose line (a title of another
    slot, which the error quotes) holds a run of ``blanks`` spaces."""
    path = tmp_path / f"agent-{blanks}.md"
    path.write_text("# agent\n\n- A fact.\n# user (scope: a" + " " * blanks + "b)\n")
    started = time.process_time()
    result = _invoke(tmp_path / "m.db", "import", str(path), "--slot", "agent")
    return time.process_time() - started, result.output


def test_an_error_quoting_a_long_run_of_spaces_is_shown_in_linear_time(tmp_path):
    """Four times the spaces in a line an error quotes cost under five times the CPU time to
    put the error on one line (they cost ten to sixteen: 40,000 spaces took 10 s, each
    space tried as the start of the blanks around a line break), and the error is still
    one line with the spaces as given."""
    small, _ = _quoting_error_cpu_seconds(tmp_path, 10_000)
    large, output = _quoting_error_cpu_seconds(tmp_path, 40_000)
    assert large < 5 * max(small, 0.05), (small, large)
    assert 1 == len(output.splitlines()) and output.startswith("Error: ")
    assert "a" + " " * 40_000 + "b" in output
