"""The MCP server as a subprocess, driven by the official SDK's client over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _installed_plugin import install_plugin
from ctxslots import ANY, FactStore, Limits
from ctxslots.tools import TOOL_SPECS


async def _session_calls(db: Path, scope: str, calls: list[tuple[str, dict]],
                         *extra: str) -> tuple[list, list]:
    # The whole environment (the SDK passes only a safe subset), so the server imports
    # the same ctxslots as the test, PYTHONPATH included.
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
        "-m", "ctxslots", "--db", str(db), "mcp", "--scope", scope, *extra])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        results = [await session.call_tool(name, args) for name, args in calls]
    return listed.tools, results


def _text(result) -> str:
    return "".join(block.text for block in result.content)


def test_tools_over_mcp(tmp_path):
    """Every tool, listed with its title and hints, answers through the official client over stdio."""
    db = tmp_path / "memory.db"
    with FactStore(db) as store:
        other = store.add("project", "The blog deploys on every push.", scope="blog")
    calls = [
        ("memory_store", {"slot": "project", "value": "The shop deploys on Fridays.",
                          "key": "deploy.day", "tags": ["ops"]}),
        ("memory_query", {"query": "when does the shop deploy"}),
        ("memory_reinforce", {"id": 2}),
        ("memory_demote", {"id": 2}),
        ("memory_update", {"id": 2, "value": "The shop deploys on Thursdays."}),
        ("memory_timeline", {"id": 2, "before": 1, "after": 1}),
        ("memory_query", {"query": "deploy"}),
        ("memory_forget", {"id": other.id}),                    # another scope: not found
        ("memory_reinforce", {"id": "2"}),                      # wrong type
        ("memory_store", {"slot": "project"}),                  # missing argument
        ("memory_nope", {}),                                    # unknown tool
        ("memory_forget", {"id": 2, "reason": "moved"}),
    ]
    tools, results = anyio.run(_session_calls, db, "shop", calls)
    assert [t.name for t in tools] == [s.name for s in TOOL_SPECS]
    store_schema = next(t for t in tools if t.name == "memory_store").input_schema
    assert store_schema["required"] == ["slot", "value"]
    assert list(store_schema["properties"]) == ["slot", "value", "key", "tags", "context"]
    assert store_schema["properties"]["slot"]["enum"] == ["user", "project", "agent"]
    assert {t.name: (t.title, t.annotations.read_only_hint, t.annotations.destructive_hint)
            for t in tools} == {s.name: (s.title, s.read_only, s.destructive) for s in TOOL_SPECS}
    texts = [_text(r) for r in results]
    assert texts[0].startswith("Stored [id:2] (project, key deploy.day, today)")
    assert "[id:2]" in texts[1] and "Fridays" in texts[1] and "blog" not in texts[1]
    assert texts[2] == "Reinforced [id:2] (score now 3)."
    assert texts[3] == "Demoted [id:2] (score now 2)."
    assert texts[4].startswith("Updated [id:2]") and "Thursdays" in texts[4]
    assert "-> [id:2]" in texts[5]
    assert "Thursdays" in texts[6]
    assert texts[7] == f"Error: no memory with id {other.id}" and results[7].is_error
    assert texts[8].startswith("Error: 'id' must be an integer") and results[8].is_error
    assert texts[9] == "Error: missing required argument 'value'" and results[9].is_error
    assert texts[10].startswith("Error: unknown tool") and results[10].is_error
    assert texts[11].startswith("Forgot [id:2]") and not results[11].is_error
    with FactStore(db) as store:
        assert store.get(other.id) is not None                 # untouched
        gone = store.get(2, include_archive=True)
        assert gone.archived and gone.value == "The shop deploys on Thursdays."
        assert gone.scope == "shop" and gone.source == "tool"


def test_memory_store_takes_a_context_over_mcp(tmp_path):
    """memory_store's context goes through the official client into the store, where it
    finds the fact; a context over the limit is a tool error and writes nothing."""
    db = tmp_path / "memory.db"
    question = "Who did you meet at the robotics conference?"
    calls = [("memory_store", {"slot": "user", "value": "It was Ilse Varga.",
                               "context": question}),
             ("memory_query", {"query": "robotics conference"}),
             ("memory_store", {"slot": "user", "value": "Too much.", "context": "é" * 3000})]
    _, results = anyio.run(_session_calls, db, "shop", calls)
    texts = [_text(r) for r in results]
    assert texts[0] == "Stored [id:1] (user, today) It was Ilse Varga."
    assert texts[1].splitlines()[1:] == ["[id:1] (user, today) It was Ilse Varga."]
    assert results[2].is_error and texts[2].startswith("Error: context is 6000 bytes")
    with FactStore(db) as store:
        assert question == store.get(1).context
        assert [1] == [f.id for f in store.facts()]


def test_slot_option_narrows_the_tools(tmp_path):
    """--slot limits the slot enum and refuses the other slots as a tool error."""
    db = tmp_path / "memory.db"
    calls = [("memory_store", {"slot": "user", "value": "The user is Ada."}),
             ("memory_store", {"slot": "agent", "value": "Ask before deleting files."})]
    tools, results = anyio.run(_session_calls, db, "shop", calls, "--slot", "agent")
    query = next(t for t in tools if t.name == "memory_query").input_schema
    assert query["properties"]["slot"]["enum"] == ["agent"]
    assert results[0].is_error and _text(results[0]).startswith('Error: unknown slot "user" (known: agent)')
    assert not results[1].is_error and _text(results[1]).startswith("Stored [id:1] (agent, today)")


def _style_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Install a plugin registering a ``style`` slot whose facts belong to a workspace,
    loaded by the server processes the test starts."""
    site = install_plugin(
        tmp_path / "site", "style",
        "from ctxslots import hookimpl\n\n\n@hookimpl\ndef register_slots(register):\n"
        '    register("style", "How the team writes code.", "scope")\n')
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "style")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(site), os.environ.get("PYTHONPATH")])))


def test_a_plugin_slot_of_a_workspace_gets_the_servers_scope(tmp_path, monkeypatch):
    """``mcp --scope repo --slot style``: a plugin slot whose facts belong to a workspace
    is written to ``repo``, as ``project`` is (and as ``ctxslots flush`` writes it),
    never as a global fact every workspace sees."""
    _style_plugin(tmp_path, monkeypatch)
    db = tmp_path / "memory.db"
    calls = [("memory_store", {"slot": "style", "value": "The team indents with tabs."}),
             ("memory_store", {"slot": "project", "value": "The project is written in Rust."})]
    _, results = anyio.run(_session_calls, db, "repo", calls, "--slot", "style",
                           "--slot", "project")
    assert not any(r.is_error for r in results), [_text(r) for r in results]
    with FactStore(db, limits=Limits(slots=("style", "project"),
                                     slot_owners={"style": "scope"})) as store:
        assert [("style", "repo"), ("project", "repo")] == [
            (f.slot, f.scope) for f in store.facts(scope=ANY)]


def test_the_slot_argument_describes_the_slots_offered_and_only_those(tmp_path, monkeypatch):
    """memory_store's slot description, as the official client lists it, names each slot
    of --slot with what it holds (a plugin slot with its registered description) and
    says nothing of a slot the server does not offer."""
    _style_plugin(tmp_path, monkeypatch)

    def slot_description(*slots: str) -> str:
        options = [arg for slot in slots for arg in ("--slot", slot)]
        tools, _ = anyio.run(_session_calls, tmp_path / "memory.db", "repo", [], *options)
        schema = next(t for t in tools if t.name == "memory_store").input_schema
        assert list(slots) == schema["properties"]["slot"]["enum"]
        return str(schema["properties"]["slot"]["description"])

    assert slot_description("style", "project") == (
        "style: How the team writes code; project: about this workspace.")
    assert slot_description("user", "project") == (
        "user: about the user; project: about this workspace.")


def test_mcp_command_without_the_sdk_says_how_to_install(tmp_path):
    import subprocess

    code = ("import sys; sys.modules['mcp'] = None; sys.modules['mcp_types'] = None; "
            "from ctxslots.cli import main; main(['--db', sys.argv[1], 'mcp'])")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m.db")],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == ("Error: the mcp command needs the 'mcp' extra: "
                           "pip install 'ctxslots[mcp]'\n")
    assert not (tmp_path / "m.db").exists()


def test_mcp_command_refuses_a_bad_scope(tmp_path):
    """A malformed --scope is one error line and exit status 1, a blank one a usage error
    (exit status 2), before anything is served."""
    from click.testing import CliRunner

    from ctxslots.cli import cli

    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "m.db"), "mcp", "--scope", "a\nb"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "scope" in result.output
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "m.db"), "mcp", "--scope", ""])
    assert result.exit_code == 2
    assert result.output.startswith("Error: --scope must not be blank")


#: Lines the SDK cannot read, with the id and the code of the error answering each: the
#: request's id where Python's parser reads it (a lone surrogate escape is JSON to it).
UNREADABLE = [
    (('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"memory_store",'
      '"arguments":{"slot":"user","value":"\\ud800"}}}'), 9, -32700),
    (('{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"memory_query",'
      '"arguments":{"query":"tea \\ud83d"}}}'), "call-7", -32700),
    ('{"jsonrpc":"1.0","id":8,"method":"ping"}', 8, -32600),
    ('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":' + "[" * 5000 + "]" * 5000 + "}",
     None, -32700),
    ('{"jsonrpc":"2.0","id":9,"method":', None, -32700),
    ('{"id":9,"hello":"there"}', None, -32600),
    ('{"jsonrpc":"2.0","id":true,"method":"ping","params":"\\udc00"}', None, -32700),
]


def test_a_frame_the_stdio_server_cannot_read_gets_an_error_answer(tmp_path):
    """A line that is no JSON-RPC message (a lone surrogate escape, nesting 5,000 deep,
    cut-off JSON, an object of another kind) is answered with a JSON-RPC error, as over
    HTTP, carrying the request's id where the line has one that Python reads (so a
    client's call fails instead of waiting), and the server goes on answering; each
    answer read with the SDK's own message types."""
    from mcp_types import JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter

    server = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                               "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
    assert server.stdin is not None and server.stdout is not None

    def answers_until(last_id: int) -> list:
        """The messages the server writes, up to the answer to request ``last_id``."""
        read = [jsonrpc_message_adapter.validate_json(server.stdout.readline())]
        while getattr(read[-1], "id", None) != last_id:
            read.append(jsonrpc_message_adapter.validate_json(server.stdout.readline()))
        return read

    try:
        server.stdin.write(json.dumps({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}) + "\n")
        server.stdin.flush()
        assert isinstance(answers_until(0)[-1], JSONRPCResponse)
        # The unreadable lines, then a call: its answer comes after theirs, if any.
        lines = ['{"jsonrpc":"2.0","method":"notifications/initialized"}',
                 *(line for line, _, _ in UNREADABLE),
                 json.dumps({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {
                     "name": "memory_query", "arguments": {"query": "alive"}}})]
        server.stdin.write("".join(line + "\n" for line in lines))
        server.stdin.flush()
        *answers, alive = answers_until(10)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        server.stdout.close()
    assert [(found, code) for _, found, code in UNREADABLE] == [
        (a.id, a.error.code) for a in answers if isinstance(a, JSONRPCError)]
    assert isinstance(alive, JSONRPCResponse) and 10 == alive.id
    assert "No memories match 'alive'." == alive.result["content"][0]["text"]


def _initialize(server: subprocess.Popen) -> None:
    """Initialize a raw stdio session with ``server`` and read the answer."""
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}) + "\n"
        + '{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    server.stdin.flush()
    assert 0 == json.loads(server.stdout.readline())["id"]


def _interrupted_after_one_store(db: Path, interrupt: Callable[[subprocess.Popen[str]], None],
                                 said: str = "interrupted (Ctrl-C)") -> int:
    """Run ``ctxslots mcp`` on ``db``, store one fact through it, call ``interrupt(server)``
    with the client's stdin left open, check the server stops with the one line ``said``
    and the fact kept; its exit status."""
    import signal

    # A process started with SIGINT ignored keeps ignoring it (as a shell's background job
    # does), and the test runner's workers may be such processes: the server is started
    # with SIGINT handled, as a terminal starts it (only an ignored signal is inherited).
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        server = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(db), "mcp"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, encoding="utf-8")
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:
        _initialize(server)
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "memory_store", "arguments": {"slot": "user", "value": "Sam drinks tea."}}}) + "\n")
        server.stdin.flush()
        assert 1 == json.loads(server.stdout.readline())["id"]
        interrupt(server)
        # It stops within a second or two; a server that does not stop never would.
        server.wait(timeout=120)
        assert f"Error: {said}\n" == server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        server.stdin.close()
        server.stdout.close()
        server.stderr.close()
    with FactStore(db) as store:
        assert ["Sam drinks tea."] == [f.value for f in store.facts()]
    return int(server.returncode)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is how POSIX stops a program")
def test_ctrl_c_stops_the_stdio_server_while_the_client_keeps_stdin_open(tmp_path):
    """SIGINT (Ctrl-C in a terminal) stops the stdio server although its client neither
    writes nor closes stdin, closing the store on the way out: no second Ctrl-C, no wait
    for another line."""
    import signal

    assert 130 == _interrupted_after_one_store(tmp_path / "m.db",
                                               lambda s: s.send_signal(signal.SIGINT))


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is how POSIX stops a service")
def test_sigterm_stops_the_stdio_server_as_ctrl_c_does(tmp_path):
    """SIGTERM (how a host, systemd or a container stops a server) takes Ctrl-C's way out:
    the store closed, one line, exit status 143; it killed the process on the spot, saying
    nothing, before the interpreter's exit could write what the store still had queued."""
    import signal

    assert 143 == _interrupted_after_one_store(tmp_path / "m.db",
                                               lambda s: s.send_signal(signal.SIGTERM),
                                               said="stopped (SIGTERM)")


def test_ctrl_c_taken_by_another_thread_stops_the_stdio_server(tmp_path):
    """A SIGINT the kernel gives to a thread other than the main one (the stdin reader, a
    worker) stops the server too: the event loop, asleep in ``select``, is woken to run the
    handler (it slept on, and the server ran until killed). The signal goes, by
    ``tgkill``, to the server's first thread after its main one."""
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "tgkill") or not Path(f"/proc/{os.getpid()}/task").is_dir():
        pytest.skip("needs Linux's tgkill and /proc to signal one thread")

    def to_another_thread(server: subprocess.Popen[str]) -> None:
        others = sorted(int(t.name) for t in Path(f"/proc/{server.pid}/task").iterdir()
                        if int(t.name) != server.pid)
        assert others, "the server runs threads beside its main one"
        assert 0 == libc.tgkill(server.pid, others[0], signal.SIGINT)

    assert 130 == _interrupted_after_one_store(tmp_path / "m.db", to_another_thread)


def test_the_signal_wakeup_does_nothing_off_the_main_thread():
    """Serving from another thread's event loop is left as it was (signals are handled by
    the main thread only, where the wakeup can be set): no ValueError from
    ``signal.set_wakeup_fd``, and the block runs."""
    import asyncio
    import threading

    from ctxslots.tools._stdin import signals_wake_the_loop

    ran: list[str] = []
    failures: list[BaseException] = []

    def serve() -> None:
        async def main() -> None:
            with signals_wake_the_loop():
                ran.append("inside")
        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    thread.join()
    assert not failures and ["inside"] == ran


def test_what_a_plugin_prints_never_reaches_the_stdio_protocol(tmp_path):
    """A plugin that prints, when imported and on each search, writes to stderr: every line
    the client reads on stdout, from the first to the last, is a JSON-RPC message."""
    site = install_plugin(
        tmp_path / "site", "chatty",
        "from ctxslots import hookimpl\n\nprint('chatty plugin loaded')\n\n\n@hookimpl\n"
        "def rerank_hits(query, hits):\n    print(f'reranking {query}')\n    return hits\n")
    env = {**os.environ, "CTXSLOTS_LOAD_PLUGINS": "chatty",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    server = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                               "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, encoding="utf-8", env=env)
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:
        _initialize(server)
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "memory_query", "arguments": {"query": "tea"}}}) + "\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        server.stdin.close()
        rest = server.stdout.read()
        printed = server.stderr.read()
        server.wait(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        server.stdout.close()
        server.stderr.close()
    assert 1 == answer["id"] and "No memories match 'tea'." == answer["result"]["content"][0]["text"]
    assert "" == rest
    assert ["chatty plugin loaded", "reranking tea"] == printed.splitlines()
