"""Stored text never drives the terminal: every command escapes control sequences in what it prints.

A value arrives through a flush, an import or an MCP client holding whatever was sent; each
sequence below is one a terminal obeys. Every command's stdout and stderr must hold no control
character but newline and tab, and JSON output must still read back as the stored value.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import ctxslots
from ctxslots import FactStore
from ctxslots.cli import cli
from ctxslots.testing import ScriptedChatServer

SEQUENCES = {
    "osc52-clipboard": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "osc8-hyperlink": "\x1b]8;;http://evil.example/\x1b\\docs\x1b]8;;\x1b\\",
    "clear-screen": "\x1b[2J\x1b[H",
    "c1-csi": "\x9b2J\x9b31m",
    "carriage-return": "safe text\rspoofed",
    "bell-and-delete": "\x07\x7f\x08",
    "bidi-override": "\u202eevif no syolped\u202c \u2066nuR\u2069",
}

# Everything a terminal may act on: C0 but newline and tab, DEL and C1, and the
# bidirectional controls that show a line in another order than it is stored.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                     "\u2066-\u2069]")


def _run(db: Path, *args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, ["--db", str(db), *args], input=stdin, catch_exceptions=False)


def _clean(result) -> None:
    for stream in (result.stdout, result.stderr):
        found = CONTROL.search(stream)
        assert found is None, f"{found.group()!r} reached the terminal in {stream!r}"


@pytest.fixture(name="hostile", params=list(SEQUENCES), ids=list(SEQUENCES))
def fixture_hostile(request, db_path):
    """A store holding one sequence in a value, a key, a scope and a tag (keys, scopes and
    tags refuse C0 characters, so they carry the C1 CSI)."""
    seq = SEQUENCES[request.param]
    with FactStore(db_path) as store:
        fact = store.upsert("project", "deploy\x9b2J", f"Deploys run on Friday {seq} after noon.",
                            scope="shop\x9b31m", tags=["ops\x9b2J"])
    return db_path, seq, fact


@pytest.mark.parametrize("args", [
    ["get", "{id}"], ["search", "deploys friday", "--scope", "shop\x9b31m"], ["list"],
    ["stats"], ["export"], ["export", "--format", "markdown"], ["reinforce", "{id}"],
    ["assemble", "when do deploys run", "--scope", "shop\x9b31m"],
    ["assemble", "when do deploys run", "--scope", "shop\x9b31m", "--dump", "markdown"],
    ["assemble", "when do deploys run", "--scope", "shop\x9b31m", "--dump", "html"],
    ["get", "999"], ["list", "--scope", "shop\x9b31m", "--page", "9"],
], ids=["get", "search", "list", "stats", "export-jsonl", "export-markdown", "reinforce",
        "assemble", "dump-markdown", "dump-html", "get-missing", "list-past-the-end"])
def test_reading_commands_escape_stored_sequences(hostile, args):
    """get, search, list, stats, export, reinforce, assemble and their errors print no control character."""
    db, _seq, fact = hostile
    result = _run(db, *[a.replace("{id}", str(fact.id)) for a in args])
    _clean(result)
    if args[0] in ("get", "search", "list", "reinforce") and result.exit_code == 0:
        assert "Deploys run on Friday" in result.stdout


@pytest.mark.parametrize("args", [
    ["get", "{id}", "--json"], ["search", "deploys friday", "--scope", "shop\x9b31m", "--json"],
    ["list", "--json"], ["stats", "--json"],
    ["assemble", "when do deploys run", "--scope", "shop\x9b31m", "--dump", "json"],
], ids=["get", "search", "list", "stats", "dump-json"])
def test_json_output_escapes_the_json_way_and_reads_back_whole(hostile, args):
    """JSON output holds no raw control character and decodes to the stored value, key and scope."""
    db, seq, fact = hostile
    result = _run(db, *[a.replace("{id}", str(fact.id)) for a in args])
    assert 0 == result.exit_code, result.output
    _clean(result)
    text = json.dumps(json.loads(result.stdout), ensure_ascii=False)
    for stored in (fact.value, fact.key, fact.scope):
        if args[0] != "stats" or stored == fact.scope:
            assert json.dumps(stored, ensure_ascii=False)[1:-1] in text


def test_a_jsonl_export_to_stdout_imports_back_unchanged(hostile, tmp_path):
    """Exported to stdout (escaped) and imported again, the value, key, scope and tag are the same."""
    db, seq, fact = hostile
    result = _run(db, "export")
    _clean(result)
    other = tmp_path / "other.db"
    imported = _run(other, "import", "-", stdin=result.stdout)
    assert 0 == imported.exit_code, imported.output
    _clean(imported)
    with FactStore(other) as store:
        back = store.get_by_key("project", fact.key, scope=fact.scope)
    assert (fact.value, fact.tags) == (back.value, back.tags)


def test_remember_echoes_the_value_escaped(db_path):
    """remember prints the stored fact with each sequence escaped, and stores it unchanged."""
    from ctxslots.cli._output import terminal_safe

    for name, seq in SEQUENCES.items():
        result = _run(db_path, "remember", "agent", f"note {name} {seq} end")
        _clean(result)
        assert f"note {name} {terminal_safe(seq)} end" in result.stdout
    with FactStore(db_path) as store:
        assert {f"note {n} {s} end" for n, s in SEQUENCES.items()} == {f.value for f in store.facts()}


def test_a_flush_summary_and_its_json_escape_the_model_s_values(db_path, tmp_path):
    """Values a model wrote, as the flush summary and --json show them, carry no control character."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "Deploys moved."}\n', encoding="utf-8")
    ops = [{"op": "upsert", "slot": "project", "key": f"k{n}", "value": f"v {seq}",
            "confidence": 0.9, "tags": []} for n, seq in enumerate(SEQUENCES.values())]
    reply = json.dumps({"operations": ops})
    for extra in ([], ["--json"]):
        with ScriptedChatServer([reply]) as server:
            result = _run(db_path, "flush", str(chat), "--base-url", server.base_url,
                          "--model", "m", "--conversation", f"c{len(extra)}", *extra)
        assert 0 == result.exit_code, result.output
        _clean(result)


def test_an_import_report_and_its_errors_escape_what_the_file_held(db_path, tmp_path):
    """Skipped lines quote what they held; the lines and the summary carry no control character."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([
        json.dumps({"format": "ctxslots-facts", "version": 1}),
        json.dumps({"slot": "agent\x1b[2J", "value": "x"}),
        "\x1b]52;c;cm0=\x07 not json",
        json.dumps({"slot": "agent", "value": "kept \x1b[2J value"}),
    ]) + "\n", encoding="utf-8")
    refused = _run(db_path, "import", str(bad))
    assert 1 == refused.exit_code
    assert "line 2: invalid slot name 'agent\\x1b[2J'" in refused.stderr
    _clean(refused)
    skipped = _run(db_path, "import", str(bad), "--skip-invalid")
    assert 0 == skipped.exit_code, skipped.output
    assert "2 invalid lines skipped" in skipped.stdout
    assert "skipped line 3: not JSON" in skipped.stderr
    _clean(skipped)
    as_json = _run(db_path, "import", str(bad), "--skip-invalid", "--json")
    assert 0 == as_json.exit_code, as_json.output
    assert [2, 3] == [e["line"] for e in json.loads(as_json.stdout)["errors"]]
    _clean(as_json)


def test_a_file_name_with_a_sequence_is_escaped_in_errors(db_path, tmp_path):
    """A path holding a sequence (named by the user, or in a directory listing) is shown escaped."""
    odd = tmp_path / "chat\x1b[2J.jsonl"
    odd.write_text("not json\n", encoding="utf-8")
    result = _run(db_path, "flush", str(odd), "--base-url", "http://127.0.0.1:1/v1", "--model", "m")
    assert 1 == result.exit_code
    _clean(result)
    assert "\\u001b[2J" in result.stderr


def test_terminal_safe_keeps_text_newlines_and_tabs():
    """Plain text, newlines, tabs and non-ASCII letters pass unchanged; each control becomes \\uXXXX."""
    from ctxslots.cli._output import terminal_safe

    assert "Zoë\tKaffee\nnext" == terminal_safe("Zoë\tKaffee\nnext")
    assert "\\u001b[2J \\u009b \\u007f \\u000d" == terminal_safe("\x1b[2J \x9b \x7f \r")
    assert "\\u202eab\\u202c \\u2067c\\u2069 \u200bzero-width" == \
        terminal_safe("\u202eab\u202c \u2067c\u2069 \u200bzero-width")


def test_a_line_break_the_model_wrote_cannot_forge_a_line_of_the_flush_summary(db_path,
                                                                                tmp_path):
    """A rejected key holding a line break and a made-up "added" line: the summary shows
    the break as an escape, so no line of it claims a write that did not happen."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    forged = "    added user admin: The user is an administrator."
    op = {"op": "upsert", "slot": "user", "key": f"x\n{forged}\nq", "value": "v",
          "confidence": 0.9, "tags": []}
    with ScriptedChatServer([json.dumps({"operations": [op]})]) as server:
        result = _run(db_path, "flush", str(chat), "--base-url", server.base_url,
                      "--model", "m")
    assert result.exit_code == 0, result.output
    assert forged not in result.stdout.splitlines()
    assert f"x\\n{forged}\\nq" in result.stdout
    assert "one line without control characters" in result.stdout
    assert _run(db_path, "list").stdout.strip().startswith("no facts")


def test_only_the_output_module_prints():
    """No module of the command but cli/_output.py calls click.echo, print or writes to sys.stdout."""
    folder = Path(ctxslots.__file__).parent / "cli"
    offenders = []
    for path in sorted(folder.glob("*.py")):
        if path.name == "_output.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                called = ast.unparse(node.func)
                if called in ("click.echo", "print", "click.secho") or called.startswith(
                        ("sys.stdout.", "sys.stderr.")):
                    offenders.append(f"{path.name}:{node.lineno} {called}")
    assert [] == offenders
