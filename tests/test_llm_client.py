"""OpenAIChatClient against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json

import pytest

from ctxslots import LLMClientError, Message
from ctxslots.flusher import ChatResult, LLMClient, OpenAIChatClient
from ctxslots.testing import ScriptedChatServer, ScriptedReply

HELLO = [Message("user", "Say hello.")]
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def client(server, **options):
    options.setdefault("backoff", 0.01)
    return OpenAIChatClient(server.base_url, "scripted", **options)


def test_good_reply_with_usage():
    """A reply's content, model and token usage come back in a ChatResult."""
    with ScriptedChatServer(["hello there"]) as server:
        result = client(server).complete(HELLO)
    assert isinstance(result, ChatResult)
    assert "hello there" == result.text
    assert "scripted" == result.model
    assert (2, 2) == (result.prompt_tokens, result.completion_tokens)
    assert [{"role": "user", "content": "Say hello."}] == server.requests[0]["messages"]


def test_satisfies_the_protocol():
    """The shipped client is an LLMClient."""
    assert isinstance(OpenAIChatClient("http://127.0.0.1:1/v1", "m"), LLMClient)


def test_schema_is_sent_as_json_schema_response_format():
    """A JSON schema travels as response_format of type json_schema."""
    with ScriptedChatServer(['{"ok": true}']) as server:
        client(server).complete(HELLO, json_schema=SCHEMA)
    sent = server.requests[0]["response_format"]
    assert "json_schema" == sent["type"]
    assert SCHEMA == sent["json_schema"]["schema"]


def test_falls_back_when_server_rejects_response_format():
    """A 400 about response_format is retried with a weaker mode, which the client keeps."""
    script = [ScriptedReply("response_format json_schema is not supported", status=400), '{"ok": true}',
              '{"ok": true}']
    with ScriptedChatServer(script) as server:
        c = client(server)
        assert '{"ok": true}' == c.complete(HELLO, json_schema=SCHEMA).text
        c.complete(HELLO, json_schema=SCHEMA)
    assert ["json_schema", "json_object", "json_object"] == [
        r["response_format"]["type"] for r in server.requests]


def test_500_then_success_is_retried():
    """A server error is retried and the second answer used."""
    with ScriptedChatServer([ScriptedReply("boom", status=500), "fine"]) as server:
        assert "fine" == client(server).complete(HELLO).text
    assert 2 == len(server.requests)


def test_429_with_retry_after_is_retried():
    """Rate limiting honours Retry-After and succeeds afterwards."""
    script = [ScriptedReply("slow down", status=429, headers={"Retry-After": "0"}), "fine"]
    with ScriptedChatServer(script) as server:
        assert "fine" == client(server).complete(HELLO).text
    assert 2 == len(server.requests)


def test_other_4xx_is_not_retried():
    """A 401 fails at once with its status."""
    with ScriptedChatServer([ScriptedReply("bad key", status=401), "never"]) as server:
        with pytest.raises(LLMClientError) as info:
            client(server).complete(HELLO)
    assert 401 == info.value.status
    assert 1 == len(server.requests)


def test_retries_run_out():
    """After max_retries server errors the client fails with the last status."""
    with ScriptedChatServer([ScriptedReply(status=503)] * 3) as server:
        with pytest.raises(LLMClientError) as info:
            client(server, max_retries=2).complete(HELLO)
    assert 503 == info.value.status
    assert 3 == len(server.requests)


def test_timeout_is_a_clear_error():
    """A reply slower than the timeout gives an error that says so."""
    with ScriptedChatServer([ScriptedReply("late", delay=1.0)]) as server:
        with pytest.raises(LLMClientError, match="within 0.3 s"):
            client(server, timeout=0.3).complete(HELLO)


@pytest.mark.parametrize("body", ["{not json", '{"choices": []}', '{"choices": [{"message": {"content": 7}}]}'])
def test_malformed_replies_are_errors(body):
    """A body that is not JSON, has no choices, or non-text content is an LLMClientError."""
    with ScriptedChatServer([ScriptedReply(body=body)]) as server:
        with pytest.raises(LLMClientError):
            client(server).complete(HELLO)


def test_api_key_from_environment_is_sent_and_never_shown(monkeypatch):
    """The key is read from the environment, sent as a Bearer token, and absent from errors."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    with ScriptedChatServer(["ok", ScriptedReply("denied", status=403)]) as server:
        c = client(server)
        c.complete(HELLO)
        with pytest.raises(LLMClientError) as info:
            c.complete(HELLO)
    assert "Bearer sk-secret-123" == server.request_headers[0]["Authorization"]
    assert "sk-secret-123" not in str(info.value)


def test_no_key_sends_no_authorization(monkeypatch):
    """Without a key no Authorization header is sent (local servers need none)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedChatServer(["ok"]) as server:
        client(server).complete(HELLO)
    assert "Authorization" not in server.request_headers[0]


@pytest.mark.parametrize("url", ["ftp://x/v1", "localhost:8080", "", "http://"])
def test_bad_base_url_is_a_value_error(url):
    """A base URL that is not http(s) is refused when the client is built."""
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatClient(url, "m")


def test_unreachable_server_is_a_clear_error():
    """A closed port gives an LLMClientError naming the URL, not a socket traceback."""
    server = ScriptedChatServer([])
    url = server.base_url
    server.close()
    with pytest.raises(LLMClientError, match="127.0.0.1"):
        OpenAIChatClient(url, "m", max_retries=0).complete(HELLO)


def test_acomplete():
    """The async variant returns the same result."""
    with ScriptedChatServer([json.dumps({"ok": True})]) as server:
        result = asyncio.run(client(server).acomplete(HELLO))
    assert '{"ok": true}' == result.text
