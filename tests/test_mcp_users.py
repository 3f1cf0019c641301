"""One MCP server for a team: each bearer token reaches its own user's memory, driven by the
official SDK's client over streamable HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ctxslots import ANY, FactStore, InvalidArgumentError
from ctxslots.tools.token_users import TokenUsers

ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210ab"


def _serve(db: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(db), "mcp",
                             "--transport", "http", "--port", "0", "--scope", "shop", *extra],
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


@pytest.fixture(name="team_server", params=["file", "variable"])
def fixture_team_server(request, tmp_path: Path):
    """``ctxslots mcp`` with a token per user, from a private file or the variable."""
    db = tmp_path / "memory.db"
    if request.param == "file":
        tokens = tmp_path / "tokens"
        tokens.write_text(f"# who may use the server\nalice {ALICE}\nbob {BOB}\n")
        tokens.chmod(0o600)
        proc = _serve(db, "--tokens", str(tokens))
    else:
        proc = _serve(db, env={"CTXSLOTS_MCP_TOKENS": f"alice={ALICE}, bob={BOB}"})
    try:
        line = proc.stderr.readline()
        assert line.startswith("Serving MCP at http://127.0.0.1:"), line
        yield db, line.split(" at ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stderr.close()


async def _calls(url: str, token: str, calls: list[tuple[str, dict]]) -> list[str]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        results = [await session.call_tool(name, args) for name, args in calls]
    return ["".join(block.text for block in r.content) for r in results]


def _id(answer: str) -> int:
    return int(answer.split("[id:", 1)[1].split("]", 1)[0])


def test_each_token_reaches_its_own_users_memory(team_server):
    db, url = team_server
    stored = anyio.run(_calls, url, ALICE, [
        ("memory_store", {"slot": "user", "key": "editor", "value": "Alice edits in Helix."}),
        ("memory_store", {"slot": "project", "value": "The shop deploys on Fridays."})])
    alices = _id(stored[0])
    bob = anyio.run(_calls, url, BOB, [
        ("memory_query", {"query": "which editor and when does the shop deploy"}),
        ("memory_reinforce", {"id": alices}),
        ("memory_timeline", {"id": alices}),
        ("memory_store", {"slot": "user", "key": "editor", "value": "Bob edits in Emacs."})])
    assert "Fridays" in bob[0] and "Helix" not in bob[0] and "Alice" not in bob[0]
    assert bob[1] == bob[2] == f"Error: no memory with id {alices}"
    again = anyio.run(_calls, url, ALICE, [("memory_query", {"query": "which editor"})])
    assert "Helix" in again[0] and "Emacs" not in again[0]
    with FactStore(db) as store:
        assert store.get(alices).user == "alice" and store.get(alices).score == 0
        assert store.get(_id(bob[3])).user == "bob"


def test_a_token_users_reinforcement_links_what_their_query_returned(team_server):
    """Searching and reinforcing through the server as a token's user grows the co-recall
    link between the facts that query returned together."""
    db, url = team_server
    answers = anyio.run(_calls, url, ALICE, [
        ("memory_store", {"slot": "user", "value": "The deploy runs on Friday."}),
        ("memory_store", {"slot": "user", "value": "The deploy needs a green build."}),
        ("memory_query", {"query": "deploy"})])
    first, second = _id(answers[0]), _id(answers[1])
    assert f"[id:{first}]" in answers[2] and f"[id:{second}]" in answers[2]
    anyio.run(_calls, url, ALICE, [("memory_reinforce", {"id": first})])
    with FactStore(db) as store:
        assert {second: 1.0} == store.links(first)


def test_an_unknown_or_missing_token_is_refused(team_server):
    _db, url = team_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer nope-nope-nope-nope"},
                 {"Authorization": f"Basic {ALICE}"}, {"Authorization": f"Bearer {ALICE}x"}):
        assert httpx2.post(url, json=body, headers={**headers, **auth}).status_code == 401


def test_a_hash_inside_a_token_of_the_file_is_part_of_the_token(tmp_path):
    """A token holding '#' (a password manager makes such) reaches its user's memory as
    written; the file cut it there as a comment, so the written token got 401 and the part
    before the '#' was accepted. A '#' after a space still starts a comment."""
    carol = "carol-token-0123#456789"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# who may use the server\ncarol {carol}  # Carol, from 1 May\n")
    tokens.chmod(0o600)
    proc = _serve(tmp_path / "memory.db", "--tokens", str(tokens))
    try:
        line = proc.stderr.readline()
        assert line.startswith("Serving MCP at http://127.0.0.1:"), line
        url = line.split(" at ", 1)[1].strip()
        stored = anyio.run(_calls, url, carol, [
            ("memory_store", {"slot": "user", "key": "editor", "value": "Carol edits in Zed."})])
        assert stored[0].startswith("Stored [id:"), stored
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {carol.split('#')[0]}"}
        assert 401 == httpx2.post(url, json=body, headers=headers).status_code
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stderr.close()
    with FactStore(tmp_path / "memory.db") as store:
        assert ["carol"] == [f.user for f in store.facts(user=ANY)]


def test_a_token_file_others_can_read_is_refused_in_one_line(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n")
    tokens.chmod(0o644)
    proc = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                           "mcp", "--transport", "http", "--tokens", str(tokens)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"Error: the token file {tokens} may be read by others (mode 0644): "
                           "chmod 600 it\n")
    assert ALICE not in proc.stderr and not (tmp_path / "m.db").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX only")
def test_a_token_file_that_is_a_named_pipe_is_refused_at_once(tmp_path):
    """`--tokens` naming a named pipe (a process substitution, say): refused as no regular
    file, at once; opening it waited for a writer, and the server never started."""
    tokens = tmp_path / "tokens"
    os.mkfifo(tokens, 0o600)
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                             "mcp", "--transport", "http", "--tokens", str(tokens)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=120)  # the old code waited here for a writer
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1
    assert err == f"Error: the token file {tokens} is not a regular file\n"


def test_a_token_file_with_a_byte_order_mark_names_the_users_as_written(tmp_path):
    """A token file saved with a byte-order mark (as Notepad writes UTF-8) maps the first
    line's token to 'alice', not to an invisible '\\ufeffalice'."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\r\nbob {BOB}\r\n", encoding="utf-8-sig")
    tokens.chmod(0o600)
    assert {ALICE: "alice", BOB: "bob"} == TokenUsers.from_file(tokens).by_token


@pytest.mark.parametrize(("mark", "text", "encoding", "line", "reason"), [
    (b"", "alice {a}\nZoë {b}\n", "latin-1", 2, "invalid continuation byte"),
    (b"", "alice {a}\nbob {b}\n", "utf-16", 1, "invalid start byte"),
    (b"\xef\xbb\xbf", "alice {a}\nZoë {b}\n", "latin-1", 2, "invalid continuation byte"),
])
def test_a_token_file_that_is_not_utf8_is_refused_naming_the_line(tmp_path, mark, text,
                                                                  encoding, line, reason):
    """A token file saved in Latin-1 or UTF-16, or with a UTF-8 byte-order mark and then
    Latin-1, is refused in one line naming the file, the first line that is not UTF-8
    (counted after the mark) and why, never a token."""
    tokens = tmp_path / "tokens"
    tokens.write_bytes(mark + text.format(a=ALICE, b=BOB).encode(encoding))
    tokens.chmod(0o600)
    with pytest.raises(InvalidArgumentError) as caught:
        TokenUsers.from_file(tokens)
    assert str(caught.value) == (f"{tokens} line {line}: not UTF-8 text ({reason}); save the "
                                 "token file in UTF-8")
    assert ALICE not in str(caught.value)


@pytest.mark.parametrize(("user", "token", "message"), [
    ("\u200balice", ALICE, r"line 2: .*invisible characters \(it holds U\+200B\), not '\\u200balice'"),
    ("ali\ufeffce", ALICE, r"line 2: .*\(it holds U\+FEFF\)"),
    ("alice\u00ad", ALICE, r"line 2: .*\(it holds U\+00AD\)"),
    ("al\x7fice", ALICE, r"line 2: .*\(it holds U\+007F\)"),
    ("alice", f"\u2060{ALICE}", r"line 2: the token of user 'alice' must be .* invisible"),
])
def test_a_user_or_token_with_an_invisible_character_is_refused(user, token, message):
    """A user name or token holding a format, control or separator character is refused,
    naming the line and the user, never the token."""
    with pytest.raises(InvalidArgumentError, match=message) as caught:
        TokenUsers.parse_lines(f"bob {BOB}\n{user} {token}\n", "tokens")
    assert ALICE not in str(caught.value) and len(str(caught.value).splitlines()) == 1
    with pytest.raises(InvalidArgumentError, match=message.removeprefix("line 2: ")):
        TokenUsers.parse_variable(json.dumps({user: token}), "CTXSLOTS_MCP_TOKENS")


def test_a_token_file_with_an_invisible_user_is_refused_in_one_line(tmp_path):
    """The server refuses to start on such a file, in one line naming the file and line."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"bob {BOB}\n\u200balice {ALICE}\n")
    tokens.chmod(0o600)
    proc = _refused_at_start(tmp_path, "--tokens", str(tokens))
    assert 1 == proc.returncode
    expected = (f"Error: {tokens} line 2: a user name must be non-empty, without spaces "
                "around it or control or invisible characters (it holds U+200B), not "
                "'\\u200balice'")
    assert [expected] == proc.stderr.splitlines()


@pytest.mark.parametrize(("text", "message"), [
    ("alice", "line 1: write USER TOKEN"),
    (f"alice {ALICE}\nbob {ALICE}", "line 2: this token is already given to 'alice'"),
    ("alice short", "at least 16 characters"),
    ("# nobody\n", "names no user"),
])
def test_a_malformed_token_file_names_the_line_never_a_token(tmp_path, text, message):
    with pytest.raises(InvalidArgumentError, match=message) as caught:
        TokenUsers.parse_lines(text, "tokens")
    assert ALICE not in str(caught.value)


@pytest.mark.parametrize(("text", "message"), [
    ("alice", "pair 1: write USER=TOKEN"),
    (f"alice={ALICE},bob={ALICE}", "share a token"),
    ('{"alice": 3}', "map user names to tokens"),
    ("{not json", "not a valid JSON object"),
    (f'{{"alice": "{ALICE}", "alice": "{ALICE}-other"}}', "names user 'alice' twice"),
])
def test_a_malformed_token_variable_is_refused(text, message):
    with pytest.raises(InvalidArgumentError, match=message):
        TokenUsers.parse_variable(text, "CTXSLOTS_MCP_TOKENS")
    assert TokenUsers.parse_variable(f'{{"alice": "{ALICE}"}}', "X").users == ["alice"]


def test_per_user_tokens_go_with_http_alone(tmp_path):
    env = {**os.environ, "CTXSLOTS_MCP_TOKENS": f"alice={ALICE}"}
    for extra in (["--transport", "stdio"], ["--transport", "http", "--token", BOB],
                  ["--transport", "http", "--user", "bob"]):
        proc = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                               "mcp", *extra], capture_output=True, text=True, timeout=120,
                              env=env, check=False)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def _refused_at_start(tmp_path, *args: str, env: dict[str, str] | None = None):
    return subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                           "mcp", "--transport", "http", "--port", "0", *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("token", ["a", " ", "short-token", "a token with spaces ok",
                                   "\ufeffa-long-enough-token-0123"])
def test_a_shared_token_easy_to_guess_is_refused_at_start(tmp_path, token):
    """As per-user tokens, the shared --token needs 16 characters without spaces or invisible
    characters; another is refused in one line before the server listens, never printed,
    and before the store is opened: no store file is made."""
    proc = _refused_at_start(tmp_path, "--token", token)
    assert 1 == proc.returncode
    assert 1 == len(proc.stderr.splitlines()), proc.stderr
    assert "the token must be at least 16 characters" in proc.stderr
    assert "Serving MCP" not in proc.stderr
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize(("name", "value"), [
    ("CTXSLOTS_MCP_TOKEN", ""), ("CTXSLOTS_MCP_TOKENS", ""), ("CTXSLOTS_MCP_TOKENS", " "),
    ("CTXSLOTS_MCP_TOKENS_FILE", ""), ("CTXSLOTS_MCP_TOKEN", " "),
    ("CTXSLOTS_MCP_TOKENS_FILE", " ")])
def test_a_token_variable_set_but_empty_is_refused_at_start(tmp_path, name, value):
    """A token variable that is set but empty (an unset ${TOKEN} in a unit file) stops the
    server in one line naming the variable, instead of serving without a token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXSLOTS_MCP_")}
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                             "mcp", "--transport", "http", "--port", "0"],
                            stderr=subprocess.PIPE, text=True, env={**env, name: value})
    with proc:
        first = proc.stderr.readline()
        if first.startswith("Serving"):
            proc.terminate()
        rest = proc.stderr.read()
    assert first.startswith(f"Error: ${name} is set but empty: "), first
    assert (2, "") == (proc.returncode, rest)
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_token_file_and_the_tokens_variable_together_are_refused_at_start(tmp_path, how):
    """With a token file and $CTXSLOTS_MCP_TOKENS both set, the server used the file alone:
    the users of the variable got 401 without a word at start."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n")
    tokens.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXSLOTS_MCP_")}
    env["CTXSLOTS_MCP_TOKENS"] = f"bob={BOB}"
    args = ["--tokens", str(tokens)] if how == "option" else []
    if how == "variable":
        env["CTXSLOTS_MCP_TOKENS_FILE"] = str(tokens)
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                             "mcp", "--transport", "http", "--port", "0", *args],
                            stderr=subprocess.PIPE, text=True, env=env)
    with proc:
        first = proc.stderr.readline()
        if first.startswith("Serving"):
            proc.terminate()
        rest = proc.stderr.read()
    assert first.startswith("Error: give the per-user tokens in --tokens"), first
    assert "$CTXSLOTS_MCP_TOKENS, not both" in first
    assert ALICE not in first and BOB not in first
    assert (2, "") == (proc.returncode, rest)
    assert not (tmp_path / "m.db").exists()


def test_a_token_user_the_store_refuses_is_refused_at_start(tmp_path):
    """A user of the token file the store would refuse (300 characters) stops the server at
    start in one line, instead of failing every call made with that token."""
    env = {"CTXSLOTS_MCP_TOKENS": f"{'a' * 300}={ALICE}"}
    proc = _refused_at_start(tmp_path, env=env)
    assert 1 == proc.returncode
    assert 1 == len(proc.stderr.splitlines()), proc.stderr
    assert "user" in proc.stderr and "Serving MCP" not in proc.stderr
    assert ALICE not in proc.stderr


async def _slot_description(url: str, token: str) -> str:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
    store = next(t for t in listed.tools if t.name == "memory_store")
    return str(store.input_schema["properties"]["slot"]["description"])


def test_agent_facts_are_the_agents_and_every_token_user_is_told_so(team_server):
    """As documented, the agent slot is one set of lessons: what Bob's client stores there
    Alice's client reads and updates, and the slot's description tells the model that
    every user it serves sees it."""
    _db, url = team_server
    assert "agent: lessons for yourself, visible to every user you serve" in \
        anyio.run(_slot_description, url, ALICE)
    stored = anyio.run(_calls, url, BOB, [
        ("memory_store", {"slot": "agent", "value": "Answer build questions with the make target."})])
    lesson = _id(stored[0])
    alice = anyio.run(_calls, url, ALICE, [
        ("memory_query", {"query": "build questions make target", "slot": "agent"}),
        ("memory_update", {"id": lesson, "value": "Answer build questions with just."})])
    assert f"[id:{lesson}] (agent, today) Answer build questions with the make target." in alice[0]
    assert alice[1].startswith(f"Updated [id:{lesson}]")
    again = anyio.run(_calls, url, BOB, [("memory_query", {"query": "build questions"})])
    assert "with just." in again[0]
