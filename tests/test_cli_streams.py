"""The ctxslots command where its streams misbehave: stdin closed, stdout full, an output
that is a pipe, and a Markdown export piped to a file. Each is a real process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxslots import FactStore, Limits
from ctxslots.cli import cli


def _ctxslots(*args: str, **options) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxslots", *args], capture_output=True,
                          text=True, timeout=300, check=False, **options)


def _close_stdin() -> None:
    os.close(0)  # as cron, systemd or `<&-` start a command


@pytest.mark.parametrize("command", [["delete", "1"], ["erase", "--user", "bob"], ["reset"]])
def test_with_stdin_closed_a_confirmation_is_a_no_in_one_line(db_path, command):
    """No answer can be read: nothing is erased, and one line says so (not a traceback)."""
    with FactStore(db_path) as store:
        store.upsert("user", "pet", "Bob keeps a turtle.", user="bob")
    done = _ctxslots("--db", str(db_path), *command, stdin=None, preexec_fn=_close_stdin)
    assert 1 == done.returncode
    assert ["Error: nothing erased"] == done.stderr.splitlines()[-1:], done.stderr
    assert "Traceback" not in done.stderr
    with FactStore(db_path) as store:
        assert 1 == len(store.facts(user="bob"))


def _full_device() -> Path:
    full = Path("/dev/full")
    if not full.exists() or not stat.S_ISCHR(full.stat().st_mode):
        pytest.skip("no /dev/full here to make standard output fail")
    return full


@pytest.mark.parametrize("command", [["list"], ["search", "turtle"], ["get", "1"], ["stats"],
                                     ["assemble", "turtle"], ["export"]])
def test_standard_output_that_cannot_be_written_is_one_line(db_path, command):
    """With stdout on a full disk every command prints one error line on stderr and exits 1."""
    full = _full_device()
    with FactStore(db_path) as store:
        store.upsert("user", "pet", "The user keeps a turtle.")
    with full.open("w") as out:
        done = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(db_path),
                               *command], stdout=out, stderr=subprocess.PIPE, text=True,
                              timeout=300, check=False)
    assert 1 == done.returncode
    assert 1 == len(done.stderr.splitlines()), done.stderr
    assert done.stderr.startswith("Error: cannot write") and "No space left" in done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX only")
def test_an_export_onto_a_pipe_or_device_is_refused_and_leaves_it(db_path, tmp_path):
    """-o naming a pipe: replacing it with a file would leave its reader nothing; the export
    is refused in one line and the pipe stays a pipe."""
    with FactStore(db_path) as store:
        store.upsert("user", "pet", "The user keeps a turtle.")
    pipe = tmp_path / "facts.jsonl"
    os.mkfifo(pipe)
    for fmt in ("jsonl", "markdown"):
        target = pipe if fmt == "jsonl" else pipe.with_suffix(".md")
        if fmt == "markdown":
            os.mkfifo(target)
        done = _ctxslots("--db", str(db_path), "export", "--format", fmt, "-o", str(target))
        assert 1 == done.returncode
        said = (f"Error: cannot write {target}: not a regular file (a pipe, a device or a "
                "directory), and it is not replaced; write to standard output and redirect it")
        assert [said] == done.stderr.splitlines()
        assert stat.S_ISFIFO(target.stat().st_mode)


def test_a_markdown_export_to_a_file_reads_back_to_the_same_values(db_path, tmp_path):
    """Standard output is for reading (control and bidi characters escaped, as every
    command prints); -o FILE holds the text itself, and importing it gives back the same
    values."""
    values = ["The user's prompt starts with \x1b[31m in red.",
              "The file name reads gpj.\u202etxt backwards."]
    with FactStore(db_path) as store:
        for n, value in enumerate(values):
            store.upsert("user", f"note.{n}", value)
    exported = tmp_path / "user.md"
    written = CliRunner().invoke(cli, ["--db", str(db_path), "export", "--format", "markdown",
                                       "-o", str(exported)], catch_exceptions=False)
    assert 0 == written.exit_code, written.output
    printed = CliRunner().invoke(cli, ["--db", str(db_path), "export", "--format", "markdown"],
                                 catch_exceptions=False).stdout
    assert "\x1b" not in printed and "\u202e" not in printed
    again = tmp_path / "again.db"
    loaded = CliRunner().invoke(cli, ["--db", str(again), "import", str(exported)],
                                catch_exceptions=False)
    assert 0 == loaded.exit_code, loaded.output
    with FactStore(again) as store:
        assert sorted(values) == sorted(f.value for f in store.facts())


@pytest.mark.parametrize("from_stdin", [False, True], ids=["file", "stdin"])
def test_an_import_names_the_line_of_a_byte_that_is_not_utf8(db_path, tmp_path, from_stdin):
    """Line 5000 of 5001 holds a byte that is not UTF-8: from a file or from standard input,
    one line names line 5000, and nothing is imported."""
    path = tmp_path / "bad.jsonl"
    lines = [b'{"format": "ctxslots-facts", "version": 1}\n']
    lines += [b'{"slot": "user", "value": "Fact number %d."}\n' % n for n in range(2, 5000)]
    lines += [b'{"slot": "user", "value": "bad \xff byte"}\n', b'{"slot": "user", "value": "x"}\n']
    path.write_bytes(b"".join(lines))
    if from_stdin:
        with path.open("rb") as fp:
            done = _ctxslots("--db", str(db_path), "import", "-", stdin=fp)
    else:
        done = _ctxslots("--db", str(db_path), "import", str(path))
    assert 1 == done.returncode
    assert 1 == len(done.stderr.splitlines()), done.stderr
    assert "line 5000: not UTF-8 text" in done.stderr
    with FactStore(db_path) as store:
        assert 0 == store.stats()["facts"]


@pytest.mark.parametrize("fmt", [[], ["--format", "markdown", "--slot", "agent"]],
                         ids=["jsonl", "markdown"])
def test_an_import_from_a_closed_standard_input_is_one_line(db_path, fmt):
    """import - with stdin closed (as cron starts a command) says so in one line, in either
    format (Markdown ended in a traceback)."""
    done = _ctxslots("--db", str(db_path), "import", "-", *fmt, stdin=None,
                     preexec_fn=_close_stdin)
    assert 1 == done.returncode
    assert ["Error: standard input is closed: nothing to import"] == done.stderr.splitlines()


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])
def test_markdown_from_standard_input_that_is_not_utf8_is_refused_as_a_file_is(
        db_path, tmp_path, errors):
    """Markdown piped in with a byte that is not UTF-8 on line 2 is refused in one line naming
    it, and nothing is imported, as from a file, whatever the locale makes of standard input:
    in a UTF-8 locale (strict) it ended in a traceback; in the C locale (surrogateescape)
    the bullet was refused with the lone-surrogate message, and binary input was taken as
    prose lines and exited 0."""
    data = b"- The deploy runs on Fridays.\n- caf\xe9 opens at nine\n"
    (tmp_path / "agent.md").write_bytes(data)
    from_file = _ctxslots("--db", str(db_path), "import", str(tmp_path / "agent.md"))
    assert 1 == from_file.returncode
    assert from_file.stderr.endswith(": line 2: not UTF-8 text (invalid continuation byte)\n")
    env = {**os.environ, "PYTHONIOENCODING": f"utf-8:{errors}"}
    image = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # binary, piped in by mistake
    for piped, line, reason in ((data, 2, "invalid continuation byte"),
                                (image, 1, "invalid start byte")):
        done = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(db_path), "import",
                               "-", "--format", "markdown", "--slot", "agent"], input=piped,
                              capture_output=True, timeout=300, check=False, env=env)
        assert 1 == done.returncode, done.stderr
        assert [f"Error: -: line {line}: not UTF-8 text ({reason})"] == \
            done.stderr.decode().splitlines()
    with FactStore(db_path) as store:
        assert 0 == store.stats()["facts"]


def test_one_line_of_markdown_piped_in_is_text_even_when_it_names_a_file(db_path, tmp_path):
    """``printf 'notes.md' | ctxslots import - --format markdown`` imports the text piped
    in (one line of prose: nothing), never the file that line names; it imported the
    file's bullets. A line naming no file was refused as a missing file."""
    (tmp_path / "notes.md").write_text("- A bullet of the file, not of the pipe.\n",
                                       encoding="utf-8")
    for piped in ("notes.md", "notes/MEMORY.md"):
        done = _ctxslots("--db", str(db_path), "import", "-", "--format", "markdown", "--slot",
                         "agent", "--json", input=piped, cwd=tmp_path)
        assert 0 == done.returncode, done.stderr
        report = json.loads(done.stdout)
        assert 0 == report["added"] and 1 == report["ignored_lines"], report
    bullet = _ctxslots("--db", str(db_path), "import", "-", "--format", "markdown", "--slot",
                       "agent", input="- A bullet piped in without a line break", cwd=tmp_path)
    assert 0 == bullet.returncode, bullet.stderr
    with FactStore(db_path) as store:
        assert ["A bullet piped in without a line break"] == [f.value for f in store.facts()]


def test_markdown_piped_in_without_line_breaks_is_refused_as_a_file_is(db_path, tmp_path):
    """Over Limits.max_import_line_chars bytes with no line break (binary, a minified file)
    piped into a Markdown import is refused naming the line, as from a file, before more
    is read; it was read whole into memory, taken for one prose line, and exited 0."""
    longest = Limits().max_import_line_chars
    data = b"x" * (longest + 1)
    (tmp_path / "agent.md").write_bytes(data)
    from_file = _ctxslots("--db", str(db_path), "import", str(tmp_path / "agent.md"))
    piped = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(db_path), "import",
                            "-", "--format", "markdown", "--slot", "agent"], input=data,
                           capture_output=True, timeout=300, check=False)
    for done, stderr in ((from_file, from_file.stderr), (piped, piped.stderr.decode())):
        assert 1 == done.returncode, stderr
        assert 1 == len(stderr.splitlines()), stderr
        assert f": line 1: the line is longer than {longest:,} bytes" in stderr
    with FactStore(db_path) as store:
        assert 0 == store.stats()["facts"]


@pytest.mark.parametrize("command", [["export"], ["list", "--limit", "1000"]])
def test_a_reader_that_goes_away_ends_the_command_quietly_with_status_141(db_path, command):
    """`ctxslots export | head -1`: the reader closes its end after one line; the command
    stops writing, says nothing, and exits 141, the status a shell gives a program SIGPIPE
    ends. It exited 1, the status of a failure (`doctor` finding problems)."""
    with FactStore(db_path) as store, store.batch():
        for n in range(3000):
            store.add("agent", f"Memory {n}: a line long enough that three thousand of them "
                               "fill the pipe between the command and its reader.")
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(db_path), *command],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # the command is writing; the pipe holds 64 KiB of ~600
    proc.stdout.close()
    assert 141 == proc.wait(timeout=300)
    assert "" == proc.stderr.read()
    proc.stderr.close()


def test_an_mcp_client_that_stops_reading_ends_the_stdio_server_quietly_with_141(db_path):
    """The MCP host closes its end of the server's output, then asks again: the answer
    meets a broken pipe inside the server's task groups, which wrapped it in exception
    groups; a 96-line traceback and status 1 came out instead of the quiet 141 of any
    other command whose reader goes away."""
    FactStore(db_path).close()
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(db_path), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    def send(message: dict[str, object]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()

    send({"id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"}}})
    assert json.loads(proc.stdout.readline())["id"] == 1
    send({"method": "notifications/initialized"})
    proc.stdout.close()  # the host stops reading; its stdin stays open
    send({"id": 2, "method": "tools/list"})
    assert 141 == proc.wait(timeout=300)
    assert "" == proc.stderr.read()
    proc.stdin.close()
    proc.stderr.close()
