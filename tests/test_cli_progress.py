"""Progress on stderr for long commands (drawn on a terminal, silent otherwise), and flush over
several conversation files or a directory."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxslots import FactStore
from ctxslots.cli import cli
from ctxslots.testing import ScriptedChatServer, ScriptedReply


@pytest.fixture(name="export_file", scope="module")
def fixture_export_file(tmp_path_factory) -> Path:
    """A JSONL export of 3,000 facts."""
    folder = tmp_path_factory.mktemp("progress")
    with FactStore(folder / "source.db") as store, store.batch():
        for i in range(3000):
            store.add("project", f"Fact number {i} about deploy step {i % 17}.", scope="shop")
    path = folder / "facts.jsonl"
    result = CliRunner().invoke(cli, ["--db", str(folder / "source.db"), "export", "-o", str(path)])
    assert 0 == result.exit_code, result.output
    return path


def on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run ``ctxslots ARGS`` with stderr on a pseudo-terminal; exit status, stdout, what the
    terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", *args], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL, env=os.environ.copy())
    os.close(slave)
    shown = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    out = proc.stdout.read().decode()
    proc.wait(timeout=120)
    os.close(master)
    return proc.returncode, out, shown.decode("utf-8", "replace")


def test_long_commands_draw_progress_on_a_terminal(export_file, tmp_path):
    """On a terminal, import, reindex, export, consolidate and prune each draw a progress line
    on stderr that ends in its final state."""
    db = str(tmp_path / "p.db")
    code, out, shown = on_a_terminal("--db", db, "import", str(export_file))
    assert 0 == code and "3000" in out.replace(",", "")
    assert "\r\x1b[Kimporting facts.jsonl [" in shown
    assert "3,000 records" in shown and "\r\x1b[Klinking and committing" in shown

    code, out, shown = on_a_terminal("--db", db, "reindex")
    assert 0 == code and "full-text index rebuilt, 0 facts embedded" in out
    assert "reindexing [########################] 100% 3,000/3,000 facts" in shown

    code, out, shown = on_a_terminal("--db", db, "export", "-o", str(tmp_path / "again.jsonl"))
    assert 0 == code and re.search(r"\r\x1b\[Kexporting 3,00\d lines \d+s\r\n", shown)

    for command, label in (("consolidate", "consolidating"), ("prune", "pruning")):
        code, _out, shown = on_a_terminal("--db", db, command, "--dry-run")
        assert 0 == code and f"\r\x1b[K{label}" in shown


def test_no_progress_when_stderr_is_not_a_terminal(export_file, tmp_path):
    """Piped, the same commands write no progress line at all."""
    db = str(tmp_path / "q.db")
    for args in (["import", str(export_file)], ["reindex"], ["prune", "--dry-run"],
                 ["export", "-o", str(tmp_path / "e.jsonl")]):
        proc = subprocess.run([sys.executable, "-m", "ctxslots", "--db", db, *args],
                              capture_output=True, text=True, timeout=300, check=False)
        assert 0 == proc.returncode, proc.stderr
        assert "\r" not in proc.stderr and "reindexing" not in proc.stderr


UPSERT = {"op": "upsert", "slot": "project", "key": "deploy.day",
          "value": "The shop deploys on Friday.", "confidence": 0.9, "tags": []}


def _conversation(path: Path, text: str) -> Path:
    path.write_text(json.dumps({"role": "user", "content": text}) + "\n", encoding="utf-8")
    return path


def test_flush_reads_several_files_and_directories(tmp_path):
    """Files and each directory's *.jsonl files are flushed as one conversation each; a failed
    one is reported, the others are applied, and the exit status is 1."""
    folder = tmp_path / "chats"
    folder.mkdir()
    a = _conversation(folder / "a.jsonl", "We deploy the shop on Friday.")
    _conversation(folder / "b.jsonl", "Nothing to remember here.")
    (folder / "notes.txt").write_text("not a conversation")
    extra = _conversation(tmp_path / "c.jsonl", "Another chat.")
    empty = json.dumps({"operations": []})
    script = [ScriptedReply(json.dumps({"operations": [UPSERT]})),
              ScriptedReply("down", status=400), ScriptedReply(empty)]
    with ScriptedChatServer(script) as server:
        result = CliRunner().invoke(cli, [
            "--db", str(tmp_path / "f.db"), "flush", str(folder), str(extra), str(a),
            "--base-url", server.base_url, "--model", "m", "--json"])
    assert 1 == result.exit_code
    reports = json.loads(result.stdout)
    assert [str(folder / "a.jsonl"), str(folder / "b.jsonl"), str(extra)] == \
        [r["file"] for r in reports]
    assert ["applied", "failed", "applied"] == [r["status"] for r in reports]
    assert "Error: 1 of 3 conversations failed" in result.stderr
    with FactStore(tmp_path / "f.db") as store:
        assert ["The shop deploys on Friday."] == [f.value for f in store.facts()]


def test_flush_conversation_id_needs_one_file(tmp_path):
    """--conversation with several files is a usage error; an empty directory is one too."""
    one = _conversation(tmp_path / "one.jsonl", "hi")
    two = _conversation(tmp_path / "two.jsonl", "hi")
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, message in (([one, two, "--conversation", "x"], "--conversation names one"),
                          ([empty], "no .jsonl conversation files")):
        result = CliRunner().invoke(cli, ["--db", str(tmp_path / "u.db"), "flush",
                                          *map(str, args), "--client", "openai"])
        assert 2 == result.exit_code and message in result.output
