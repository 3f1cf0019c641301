"""The same input gets the same answer whichever way it comes: an empty key is refused like an
empty scope, a message role the chat protocol does not have is refused before the model is
asked, and an expiry that is not in the future is refused instead of storing a fact no one
will see."""

from __future__ import annotations

import datetime as dt
import enum
import json

import pytest
from click.testing import CliRunner

from ctxslots import FactStore, InvalidFactError, MemoryFlusher, Message, OpenAIChatClient
from ctxslots.cli import cli
from ctxslots.errors import InvalidArgumentError
from ctxslots.testing import ScriptedChatServer

REPLY = '{"operations": []}'


def _run(db, *args):
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


#: What ``remember`` answers an empty or blank option with: a key is the library's to
#: refuse (exit 1); a blank owner option is a usage error in the command line's words.
EMPTY_OPTION = {
    "--key": (1, "Error: key must be a non-empty string"),
    "--scope": (2, "Error: --scope must not be blank: leave it out, or name a workspace"),
}


@pytest.mark.parametrize("option", sorted(EMPTY_OPTION))
@pytest.mark.parametrize("value", ["", "   "], ids=["empty", "blank"])
def test_an_empty_key_is_refused_like_an_empty_scope(db_path, option, value):
    """remember --key "" and --scope "" are both one-line errors naming the option;
    nothing is stored."""
    result = _run(db_path, "remember", "project", "The shop deploys on Fridays.", option, value)
    code, line = EMPTY_OPTION[option]
    assert code == result.exit_code
    assert result.output.startswith(line), result.output
    assert 1 == len(result.output.splitlines())
    with FactStore(db_path) as store:
        assert [] == store.facts()


@pytest.mark.parametrize("role", ["robot", "", "User", "function"])
def test_flush_refuses_a_role_before_calling_the_model(store, role):
    """A message whose role is not system, user, assistant or tool: InvalidArgumentError
    naming the role; the server is never asked and nothing is read."""
    with ScriptedChatServer([REPLY]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"))
        messages = [{"role": "user", "content": "Hello."}, {"role": role, "content": "Beep."}]
        with pytest.raises(InvalidArgumentError, match=rf"messages\[1\] has the role {role!r}"):
            flusher.flush(messages, force=True)
    assert [] == server.requests
    assert 0 == flusher.messages_read("default")


@pytest.mark.parametrize(("item", "said"), [
    ({"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
     ("messages[1] has no role (a 'function_call' item, not a chat message); a message's role "
      "is one of system, user, assistant, tool")),
    ({"content": "Beep."},
     "messages[1] has no role; a message's role is one of system, user, assistant, tool"),
])
def test_flush_says_a_message_has_no_role(store, item, said):
    """A mapping with no role (a Responses API item passed by mistake) is refused saying it
    has no role and what it is, not as a message of the role ''; nothing is sent or read."""
    with ScriptedChatServer([REPLY]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"))
        with pytest.raises(InvalidArgumentError) as caught:
            flusher.flush([{"role": "user", "content": "Hello."}, item], force=True)
    assert said == str(caught.value)
    assert [] == server.requests
    assert 0 == flusher.messages_read("default")


def test_flush_command_names_the_line_and_the_role(db_path, tmp_path):
    """ctxslots flush with a "robot" line: one error line naming file, line and role; no request."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "Hi."}\n{"role": "robot", "content": "Beep."}\n',
                    encoding="utf-8")
    with ScriptedChatServer([REPLY]) as server:
        result = _run(db_path, "flush", str(chat), "--base-url", server.base_url, "--model", "m")
    assert 1 == result.exit_code
    assert [(f"Error: {chat}:2: the role 'robot' is not one of system, user, assistant, tool; "
             "nothing was sent to the model")] == result.output.splitlines()
    assert [] == server.requests


@pytest.mark.parametrize("field", ["content", "id"])
def test_flush_refuses_half_a_character_before_calling_the_model(store, field):
    """A message cut between the two halves of an emoji (a lone surrogate): an
    InvalidArgumentError naming the message, not a failed model call; no request is sent."""
    with ScriptedChatServer([REPLY]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"))
        broken = {"role": "user", "content": "My cat is called Tom.", "id": "m2"}
        broken[field] += "\ud83d"
        messages = [{"role": "user", "content": "Hello."}, broken]
        with pytest.raises(InvalidArgumentError,
                           match=r"messages\[1\] is not valid Unicode text: it holds a lone "
                                 r"surrogate"):
            flusher.flush(messages, force=True)
    assert [] == server.requests
    assert 0 == flusher.messages_read("default")


@pytest.mark.parametrize(("message", "wrong"), [
    (Message("user", None), "content must be text, not NoneType"),  # type: ignore[arg-type]
    (Message("user", 5), "content must be text, not int"),  # type: ignore[arg-type]
    (Message("user", "Hi.", id=7), "id must be text, not int"),  # type: ignore[arg-type]
    (Message(None, "Hi."), "role must be text, not NoneType"),  # type: ignore[arg-type]
], ids=["no-content", "number-content", "number-id", "no-role"])
def test_flush_refuses_a_hand_built_message_of_the_wrong_types(store, message, wrong):
    """A Message built from a host's own rows (a deleted message's content None, a numeric
    id): an InvalidArgumentError naming the message and the field, not a TypeError from
    inside the flush; no request is sent."""
    with ScriptedChatServer([REPLY]) as server:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m"))
        with pytest.raises(InvalidArgumentError, match=rf"^messages\[1\]\.{wrong}$"):
            flusher.flush([Message("user", "Hello."), message], force=True)
    assert [] == server.requests
    assert 0 == flusher.messages_read("default")


def test_flush_reads_a_content_part_whose_text_is_not_text(db_path, tmp_path):
    """A message whose content parts hold a "text" that is a number, as the whole content may
    be: flushed as its text (ctxslots flush and the API alike), not a TypeError from inside
    the command."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": [{"type": "text", "text": 42}, '
                    '{"type": "text", "text": " cats."}, {"type": "image_url"}]}\n',
                    encoding="utf-8")
    with ScriptedChatServer([REPLY]) as server:
        result = _run(db_path, "flush", str(chat), "--base-url", server.base_url, "--model", "m")
    assert 0 == result.exit_code, result.output
    [request] = server.requests
    assert "42 cats." in request["messages"][-1]["content"]
    assert Message("user", "42") == Message.from_dict(
        {"role": "user", "content": [{"type": "text", "text": 42}, {"type": "text"}]})


def test_flush_reads_plain_string_parts_and_a_lone_part(store, db_path, tmp_path):
    """Content parts that are plain strings (LangChain's content lists hold them) and one
    part given without its list reach the model as the user's text, through the API and
    ctxslots flush alike, not as an empty message or a Python dict's repr."""
    messages = [{"role": "user", "content": ["I moved to Porto. ",
                                             {"type": "image_url", "image_url": {"url": "x"}},
                                             {"type": "text", "text": "I cook on Sundays."}]},
                {"role": "user", "content": {"type": "text", "text": "I ride a bike."}}]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    with ScriptedChatServer([REPLY, REPLY]) as server:
        MemoryFlusher(store, OpenAIChatClient(server.base_url, "m")).flush(messages, force=True)
        result = _run(db_path, "flush", str(chat), "--base-url", server.base_url, "--model", "m")
    assert 0 == result.exit_code, result.output
    for request in server.requests:
        prompt = request["messages"][-1]["content"]
        assert "```text\nI moved to Porto. I cook on Sundays.\n```" in prompt
        assert "```text\nI ride a bike.\n```" in prompt
        assert "'type'" not in prompt and "image_url" not in prompt


class _Role(str, enum.Enum):
    USER = "user"
    ASSISTANT = "assistant"


def test_flush_reads_a_role_given_as_a_str_enum(store):
    """A role that is a member of a host's ``str`` enum (as a pydantic model's
    ``model_dump()`` leaves it, or a Message built with it) is its value, "user", not its
    name "Role.USER": the mapping is not refused and the model is shown the role."""
    with ScriptedChatServer([REPLY]) as server:
        report = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m")).flush(
            [{"role": _Role.USER, "content": "I moved to Porto."},
             Message(_Role.ASSISTANT, "Noted.")], force=True)
        assert "applied" == report.status
        prompt = server.requests[0]["messages"][-1]["content"]
    assert "## Message 1 (user)\n" in prompt and "## Message 2 (assistant)\n" in prompt
    assert "_Role" not in prompt
    assert Message("user", "Hi.") == Message.from_dict({"role": _Role.USER, "content": "Hi."})


def test_flush_command_names_the_line_holding_half_a_character(db_path, tmp_path):
    """ctxslots flush with a "\\ud83d" escape alone in a line: one error line naming the
    file and line; no request."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "Hi."}\n'
                    '{"role": "user", "content": "My cat \\ud83d"}\n', encoding="utf-8")
    with ScriptedChatServer([REPLY]) as server:
        result = _run(db_path, "flush", str(chat), "--base-url", server.base_url, "--model", "m")
    assert 1 == result.exit_code
    [line] = result.output.splitlines()
    assert line.startswith(f"Error: {chat}:2: the message is not valid Unicode text"), line
    assert line.endswith("nothing was sent to the model"), line
    assert [] == server.requests


@pytest.mark.parametrize("when", ["zero", "an hour ago", "now", "a datetime in the past"])
@pytest.mark.parametrize("write", ["add", "upsert"])
def test_an_expiry_not_in_the_future_is_refused(store, clock, when, write):
    """expires_at=0, a past moment or the present: InvalidFactError on expires_at, nothing stored."""
    value = {"zero": 0, "an hour ago": clock.now - 3600, "now": clock.now,
             "a datetime in the past": dt.datetime(2020, 1, 1, tzinfo=dt.UTC)}[when]
    with pytest.raises(InvalidFactError, match="expires_at must be in the future") as info:
        if write == "add":
            store.add("agent", "A lesson.", expires_at=value)
        else:
            store.upsert("agent", "lesson", "A lesson.", expires_at=value)
    assert "expires_at" == info.value.field
    assert [] == store.facts()


def test_an_expiry_in_the_future_is_kept_and_ends_on_time(store, clock):
    """A second ahead is accepted; once the clock passes it the fact is gone from reads."""
    fact = store.add("agent", "A short lesson.", expires_at=clock.now + 1)
    assert [fact.id] == [f.id for f in store.facts()]
    clock.advance(seconds=2)
    assert [] == store.facts()


def test_updating_a_fact_keeps_its_future_expiry(store, clock):
    """update() re-checks a fact's fields: its stored expiry, still ahead, passes."""
    fact = store.add("agent", "A lesson.", expires_at=clock.now + 60)
    clock.advance(seconds=30)
    assert "A better lesson." == store.update(fact.id, value="A better lesson.").value
