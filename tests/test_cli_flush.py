"""``ctxslots flush`` against a scripted chat-completions server."""

from __future__ import annotations

import importlib
import json
import os

import pytest
from click.testing import CliRunner

from _installed_plugin import install_plugin
from ctxslots import FactStore
from ctxslots.cli import cli
from ctxslots.testing import ScriptedChatServer, ScriptedReply

UPSERT = {"op": "upsert", "slot": "project", "key": "deploy.day",
          "value": "The shop deploys on Friday.", "confidence": 0.9, "tags": ["deploy"]}


def reply(*operations: dict) -> ScriptedReply:
    return ScriptedReply(json.dumps({"operations": list(operations)}))


@pytest.fixture(name="conversation")
def fixture_conversation(tmp_path):
    """A JSONL conversation file of two messages."""
    path = tmp_path / "chat.jsonl"
    lines = [{"role": "user", "content": "We deploy the shop on Friday."},
             {"role": "assistant", "content": "Got it."}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    return path


def invoke(db_path, *args):
    return CliRunner().invoke(cli, ["--db", str(db_path), "flush", *map(str, args)],
                              catch_exceptions=False)


def test_flush_prints_the_report_and_writes_the_store(db_path, conversation):
    """A flush writes the facts and prints what it did; running it again finds nothing new."""
    with ScriptedChatServer([reply(UPSERT)]) as server:
        first = invoke(db_path, conversation, "--base-url", server.base_url, "--model", "m",
                       "--scope", "shop")
        again = invoke(db_path, conversation, "--base-url", server.base_url, "--model", "m",
                       "--scope", "shop", "--json")

    assert 0 == first.exit_code, first.output
    assert "applied" in first.output and "added project@shop deploy.day" in first.output
    assert 0 == again.exit_code
    assert "nothing_new" == json.loads(again.output)["status"]
    with FactStore(db_path) as store:
        assert "The shop deploys on Friday." == store.get_by_key(
            "project", "deploy.day", scope="shop").value


def test_json_report_layout(db_path, conversation):
    """--json prints the report's to_dict() layout with rejections and reasons."""
    bad = {**UPSERT, "slot": "secrets"}
    with ScriptedChatServer([reply(UPSERT, bad)]) as server:
        result = invoke(db_path, conversation, "--base-url", server.base_url, "--model", "m",
                        "--json", "--conversation", "chat-1")

    data = json.loads(result.output)
    assert ("applied", "chat-1", 2) == (data["status"], data["conversation"], data["messages_read"])
    assert ["deploy.day"] == [c["fact"]["key"] for c in data["added"]]
    assert "not one of this flush's slots" in data["rejected"][0]["reason"]


def test_failed_flush_exits_non_zero_and_changes_nothing(db_path, conversation):
    """When the model's replies cannot be read, the command exits 1 and prints the raw outputs."""
    with ScriptedChatServer([ScriptedReply("not json"), ScriptedReply("still not")]) as server:
        result = CliRunner().invoke(
            cli, ["--db", str(db_path), "flush", str(conversation), "--base-url",
                  server.base_url, "--model", "m", "--json"])

    assert 1 == result.exit_code
    data = json.loads(result.stdout)
    assert ("failed", ["not json", "still not"]) == (data["status"], data["raw_outputs"])
    assert "could not be read after one retry" in result.stderr
    with FactStore(db_path) as store:
        assert [] == store.facts()


def test_if_due_waits_for_the_policy(db_path, conversation):
    """--if-due asks the policy first: one user turn of four is not due."""
    with ScriptedChatServer([reply(UPSERT)]) as server:
        result = invoke(db_path, conversation, "--base-url", server.base_url, "--model", "m",
                        "--if-due", "--every-n-turns", "4", "--json")
        assert [] == server.requests

    assert "not_due" == json.loads(result.output)["status"]


def test_malformed_line_is_one_clear_error(db_path, tmp_path):
    """A line that is not a message object exits 1 naming the file and line."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n[1, 2]\n', encoding="utf-8")

    result = CliRunner().invoke(cli, ["--db", str(db_path), "flush", str(path), "--base-url",
                                      "http://127.0.0.1:9/v1", "--model", "m"])

    assert 1 == result.exit_code
    assert f"{path}:2" in result.stderr


def test_a_message_naming_a_field_twice_is_one_clear_error(db_path, tmp_path):
    """{"content": "a", "content": "b"} reads as either message: refused naming the line."""
    path = tmp_path / "twice.jsonl"
    path.write_text('{"role": "user", "content": "I use Vim.", "content": "I use Emacs."}\n',
                    encoding="utf-8")
    result = CliRunner().invoke(cli, ["--db", str(db_path), "flush", str(path), "--base-url",
                                      "http://127.0.0.1:9/v1", "--model", "m"])
    assert 1 == result.exit_code
    assert [f"Error: {path}:1: the message names 'content' twice"] == \
        result.stderr.splitlines()


DIARY = {"op": "upsert", "slot": "diary", "key": "mood", "value": "The user felt great today.",
         "confidence": 0.9, "tags": []}


@pytest.fixture(name="diary_plugin")
def fixture_diary_plugin(tmp_path, monkeypatch):
    """An installed plugin ``diary`` (an entry point on ``sys.path``) registering the slot
    ``diary`` of user facts and ``style`` of a workspace's, loaded by the command."""
    folder = install_plugin(
        tmp_path / "site", "diary",
        "from ctxslots import hookimpl\n\n\n@hookimpl\ndef register_slots(register):\n"
        '    register("diary", "What the user wrote in their diary.", "user")\n'
        '    register("style", "How the team writes code.", "scope")\n')
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "diary")
    importlib.invalidate_caches()


def test_slot_lets_a_flush_write_a_plugins_slot(location, conversation, diary_plugin):
    """Without --slot a flush writes the built-in slots only, and an upsert to a plugin's
    slot is rejected as not one of the flush's slots, saying how to add it; with --slot
    the model is shown the slot with the plugin's description and writes it; a slot the
    store does not accept is one error line, before the model is asked."""
    with ScriptedChatServer([reply(DIARY), reply(DIARY)]) as server:
        base = ["--base-url", server.base_url, "--model", "m", "--user", "alice", "--json"]
        before = invoke(location, conversation, *base)
        after = invoke(location, conversation, *base, "--conversation", "again",
                       "--slot", "user", "--slot", "diary")
        unknown = invoke(location, conversation, *base, "--slot", "nope")

    assert [("slot 'diary' is not one of this flush's slots (user, project, agent); give the "
             "flusher the slots it may write: MemoryFlusher(slots=...), ctxslots flush --slot")
            ] == [r["reason"] for r in json.loads(before.output)["rejected"]]
    assert 0 == after.exit_code, after.output
    assert [("diary", "mood")] == [(c["fact"]["slot"], c["fact"]["key"])
                                  for c in json.loads(after.output)["added"]]
    prompt = server.requests[1]["messages"][0]["content"]
    assert "- diary: What the user wrote in their diary." in prompt
    assert "- project:" not in prompt
    assert (1, 2) == (unknown.exit_code, len(server.requests))
    assert unknown.output.startswith("Error: unknown slot 'nope' (known: user, project, agent, "
                                     "diary")


def test_a_plugin_slot_of_a_workspace_gets_the_flushs_scope(location, conversation,
                                                             diary_plugin):
    """``--scope repo --slot style``: a plugin slot whose facts belong to a workspace is
    written to ``repo``, as ``project`` is, never as a global fact every workspace sees."""
    style = {"op": "upsert", "slot": "style", "key": "indent", "confidence": 0.9, "tags": [],
             "value": "The team indents with tabs."}
    lang = {"op": "upsert", "slot": "project", "key": "lang", "confidence": 0.9, "tags": [],
            "value": "The project is written in Rust."}
    with ScriptedChatServer([reply(style, lang)]) as server:
        done = invoke(location, conversation, "--base-url", server.base_url, "--model", "m",
                      "--scope", "repo", "--slot", "style", "--slot", "project", "--json")
    assert 0 == done.exit_code, done.output
    assert [("style", "repo"), ("project", "repo")] == [
        (c["fact"]["slot"], c["fact"]["scope"]) for c in json.loads(done.output)["added"]]



@pytest.mark.parametrize("model", [" ", "\t"])
def test_a_blank_model_variable_is_refused_before_any_request(db_path, conversation,
                                                              monkeypatch, model):
    """CTXSLOTS_LLM_MODEL set to a space was sent to the server as the model's name: the
    flush failed only at the server, after the request, naming no variable."""
    from ctxslots import InvalidArgumentError
    from ctxslots.flusher import OpenAIChatClient

    with ScriptedChatServer([reply(UPSERT)]) as server:
        monkeypatch.setenv("CTXSLOTS_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("CTXSLOTS_LLM_MODEL", model)
        result = invoke(db_path, conversation)
        assert [] == server.requests
        with pytest.raises(InvalidArgumentError, match="model must be a model name"):
            OpenAIChatClient(server.base_url, model)
        given = invoke(db_path, conversation, "--model", "m")
        assert 1 == len(server.requests)
    assert 1 == result.exit_code
    assert result.output.startswith("Error: the openai client needs model "), result.output
    assert "CTXSLOTS_LLM_MODEL" in result.output
    assert 0 == given.exit_code, given.output
    assert "m" == server.requests[0]["model"]


def test_a_malformed_conversation_leaves_no_new_store_file(tmp_path):
    """`ctxslots --db NEW.db flush BAD.json` made an empty store at NEW.db before reading
    the file and failing on it; the file is now read first."""
    bad = tmp_path / "chat.json"
    bad.write_text("not json\n", encoding="utf-8")
    new = tmp_path / "new.db"
    result = CliRunner().invoke(cli, ["--db", str(new), "flush", str(bad), "--base-url",
                                      "http://127.0.0.1:9/v1", "--model", "m"])
    assert 1 == result.exit_code and "not JSON" in result.output
    assert [] == sorted(p.name for p in tmp_path.glob("new.db*"))


def test_a_conversation_file_with_a_byte_order_mark_is_flushed(db_path, conversation):
    """A conversation saved with a UTF-8 byte-order mark (as Notepad saves one) is read as
    the same messages: its first line is not refused as not JSON."""
    conversation.write_bytes(b"\xef\xbb\xbf" + conversation.read_bytes().replace(b"\n", b"\r\n"))
    with ScriptedChatServer([reply(UPSERT)]) as server:
        result = invoke(db_path, conversation, "--base-url", server.base_url, "--model", "m",
                        "--scope", "shop")
    assert 0 == result.exit_code, result.output
    first = server.requests[0]["messages"][-1]["content"]
    assert "We deploy the shop on Friday." in first and "\ufeff" not in first
    with FactStore(db_path) as store:
        assert store.get_by_key("project", "deploy.day", scope="shop") is not None


def test_a_conversation_whose_file_name_is_not_utf8_is_flushed(db_path, conversation):
    """A file whose name holds a byte that is not UTF-8 (it reaches Python as a lone
    surrogate) is flushed, its conversation id naming it with U+FFFD, as is a file in a
    folder so named: no UnicodeEncodeError."""
    folder = conversation.parent / os.fsdecode(b"chats\xff")
    folder.mkdir()
    named = conversation.rename(folder / os.fsdecode(b"caf\xe9.jsonl"))
    with ScriptedChatServer([reply(UPSERT)]) as server:
        result = invoke(db_path, folder, "--base-url", server.base_url, "--model", "m",
                        "--scope", "shop", "--json")
    assert 0 == result.exit_code, result.output
    assert json.loads(result.output)["conversation"].startswith("file:caf\ufffd.jsonl:")
    assert named.exists()
    with FactStore(db_path) as store:
        assert store.get_by_key("project", "deploy.day", scope="shop") is not None
