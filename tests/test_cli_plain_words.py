"""What the command says reads as plain words: a warning is one line without Python's file,
line and source; Ctrl-C during an import says nothing was written; counts and states read
right."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from _powers import ordinary_child, run_on_read_only_file
from ctxslots import FactStore, FlushPolicy, MemoryFlusher, OpenAIChatClient
from ctxslots.cli import cli
from ctxslots.testing import ScriptedChatServer, ScriptedReply

HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})


def _run(db, *args):
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file permissions")
def test_the_read_only_warning_is_one_plain_line(tmp_path):
    """Searching a store its user may not write: one 'warning: ...' line on stderr, without
    'facts.py:71: RuntimeWarning' and the source line Python adds."""
    ordinary_child()  # skips, with the reason, where permissions cannot hold
    db = tmp_path / "ro" / "memory.db"
    db.parent.mkdir()
    with FactStore(db) as store:
        store.add("agent", "The VPN needs a fresh token.")
    done = run_on_read_only_file(db, ["-m", "ctxslots", "--db", str(db), "search", "vpn token"])
    assert 0 == done.returncode, done.stderr
    assert "The VPN needs a fresh token." in done.stdout
    lines = done.stderr.splitlines()
    assert 1 == len(lines), done.stderr
    assert lines[0].startswith("warning: ") and "accesses are not counted" in lines[0]
    assert "RuntimeWarning" not in lines[0] and ".py:" not in lines[0]


#: The CLI in a child that takes Ctrl-C as Python does from a terminal, whatever it inherits.
_CLI_WITH_CTRL_C = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                    "runpy.run_module('ctxslots', run_name='__main__', alter_sys=True)")


@pytest.mark.skipif(sys.platform == "win32", reason="named pipes and POSIX signals")
@pytest.mark.parametrize(("sent", "status", "said"), [
    (signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "stopped (SIGTERM)")])
def test_ctrl_c_during_an_import_says_nothing_was_written(tmp_path, sent, status, said):
    """SIGINT (or SIGTERM) while an import is reading (thousands of records already read and
    written in its transaction): one line saying nothing was imported, exit 130 (143), and
    the store as it was. SIGTERM killed the process there, saying nothing."""
    db = tmp_path / "memory.db"
    with FactStore(db) as store:
        store.add("agent", "A memory from before the import.")
    fifo = tmp_path / "facts.jsonl"
    os.mkfifo(fifo)
    # A process that inherits SIGINT ignored (as a test runner's worker may have it) never
    # sees Ctrl-C: the child takes it as Python does from a terminal, then runs the CLI.
    child = subprocess.Popen([sys.executable, "-c", _CLI_WITH_CTRL_C, "--db", str(db), "import",
                              str(fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with fifo.open("w", encoding="utf-8") as pipe:
            pipe.write(HEADER + "\n")
            for n in range(5000):
                pipe.write(json.dumps({"slot": "agent", "value": f"Imported memory {n} holds "
                                       "some words so that the lines fill the pipe."}) + "\n")
            pipe.flush()
            # The pipe holds 64 KiB; 5,000 lines are about 500 KB, so the writes above
            # returned only once the importer had read all but the last few hundred lines.
            child.send_signal(sent)
            out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert status == child.returncode, err
    assert [f"Error: {said}: nothing was imported, the store is as it was"] == \
        err.splitlines()
    assert "Aborted" not in err and "" == out
    with FactStore(db) as store:
        assert ["A memory from before the import."] == [f.value for f in store.facts()]


class _Held:
    """A scripted reply's gate: says the request arrived, then holds the answer."""

    def __init__(self) -> None:
        self.arrived, self.release = threading.Event(), threading.Event()

    def wait(self) -> None:
        self.arrived.set()
        self.release.wait()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
def test_ctrl_c_during_a_flush_exits_130_in_one_line(tmp_path):
    """SIGINT while the flush waits for the model: one line and exit 130 (as an import's,
    and as a shell reports SIGINT), not click's "Aborted!" and the status of any error;
    the store as it was and no progress recorded."""
    db = tmp_path / "memory.db"
    with FactStore(db) as store:
        store.add("agent", "A memory from before the flush.")
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "I moved to Lisbon."}\n', encoding="utf-8")
    held = _Held()
    with ScriptedChatServer([ScriptedReply('{"operations": []}', gate=held)]) as server:
        child = subprocess.Popen(
            [sys.executable, "-c", _CLI_WITH_CTRL_C, "--db", str(db), "flush", str(chat),
             "--conversation", "chat", "--base-url", server.base_url, "--model", "m"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert held.arrived.wait(timeout=300), "the flush never asked the model"
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=120)
        finally:
            held.release.set()
            if child.poll() is None:
                child.kill()
                child.wait()
    assert 130 == child.returncode, err
    assert ["Error: interrupted (Ctrl-C)"] == err.splitlines()
    assert "" == out
    with FactStore(db) as store:
        assert ["A memory from before the flush."] == [f.value for f in store.facts()]
        assert store.flush_progress("chat") is None


def test_an_empty_reply_is_said_plainly(db_path, tmp_path):
    """An empty model reply reads 'the reply is empty', not 'the reply holds an empty reply'."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "Hi."}\n', encoding="utf-8")
    with ScriptedChatServer(["", ""]) as server:
        result = _run(db_path, "flush", str(chat), "--base-url", server.base_url, "--model", "m")
    assert 1 == result.exit_code
    assert "the reply is empty; send one JSON object" in result.output
    assert "holds an empty reply" not in result.output


def test_a_markdown_export_of_one_slot_says_one_file(db_path, tmp_path):
    """One slot exported as Markdown files: 'wrote 1 file to', not 'wrote 1 files'."""
    _run(db_path, "remember", "user", "The user likes tea.")
    result = _run(db_path, "export", "--format", "markdown", "-o", str(tmp_path / "md"))
    assert 0 == result.exit_code, result.output
    assert f"wrote 1 file to {tmp_path / 'md'}" in result.output


def test_a_flush_not_due_counts_the_unread_messages(store):
    """Not due with one unread message: '(1 unread message, 0 read in all)', not
    '(no messages, 0 read in all)'."""
    with ScriptedChatServer([]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"),
                                policy=FlushPolicy(every_n_turns=2, token_threshold=None))
        report = flusher.flush([{"role": "user", "content": "Hi."}], conversation="c")
    assert "not_due" == report.status and 1 == report.remaining
    head = report.summary().splitlines()[0]
    assert head.endswith("not_due (1 unread message, 0 read in all)"), head
    assert "token cap" not in report.summary()


def test_nothing_new_says_no_new_messages(store):
    """A second flush of the same messages: '(no new messages, 1 read in all)'."""
    reply = '{"operations": []}'
    with ScriptedChatServer([reply]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"))
        messages = [{"role": "user", "content": "Hi."}]
        flusher.flush(messages, conversation="c", force=True)
        report = flusher.flush(messages, conversation="c", force=True)
    assert report.summary().splitlines()[0].endswith("nothing_new (no new messages, 1 read in all)")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_is_taken_only_where_nobody_else_took_it():
    """The command takes SIGTERM while it runs, and gives the default back; a program
    that set its own handler before running the command keeps it."""
    from ctxslots.cli._signals import Terminated, sigterm_as_interrupt

    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with sigterm_as_interrupt(), pytest.raises(Terminated):
            signal.raise_signal(signal.SIGTERM)
        assert signal.SIG_DFL == signal.getsignal(signal.SIGTERM)

        def own(signum, frame):
            own.seen = signum

        signal.signal(signal.SIGTERM, own)
        with sigterm_as_interrupt():
            signal.raise_signal(signal.SIGTERM)
        assert signal.SIGTERM == own.seen
        assert own == signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_stops_the_stdio_mcp_server_with_one_line_whichever_task_it_meets(tmp_path):
    """SIGTERM is handled in whichever task of the server's event loop runs when it comes.
    Raised there, it left the loop half-way: the command still said its line and exited
    143, but asyncio's shutdown first printed a traceback of the task group it failed (now
    and then with the real server; here each time, the signal sent by a task of the
    server's own task group, as the SDK's reader and writer are)."""
    program = f"""
import os, signal
import anyio
from ctxslots.cli import main
from ctxslots.tools import mcp_server

# Ctrl-C taken as a terminal gives it (a test runner's worker, a background job, may have it
# ignored, which a child inherits): asyncio.run then answers it, and SIGTERM, its way.
signal.signal(signal.SIGINT, signal.default_int_handler)

serve = mcp_server.serve_stdio

async def serve_and_meet_sigterm(tools):
    async def send_it():
        os.kill(os.getpid(), signal.SIGTERM)  # handled here, in this task
        sum(range(100_000))
        await anyio.sleep(60)

    async with anyio.create_task_group() as group:
        group.start_soon(send_it)
        await serve(tools)

mcp_server.serve_stdio = serve_and_meet_sigterm
main(["--db", {str(tmp_path / "memory.db")!r}, "mcp"])
"""
    proc = subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert 143 == proc.wait(timeout=120)  # stdin stays open: the signal stops it
        assert ["Error: stopped (SIGTERM)"] == proc.stderr.read().splitlines()
    finally:
        proc.kill()
        proc.communicate()
