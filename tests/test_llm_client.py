"""OpenAIChatClient against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import pytest

from ctxslots import LLMClientError, Message
from ctxslots.flusher import ChatResult, LLMClient, OpenAIChatClient
from ctxslots.testing import ScriptedChatServer, ScriptedReply

HELLO = [Message("user", "Say hello.")]
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def client(server: ScriptedChatServer, **options: Any) -> OpenAIChatClient:
    options.setdefault("backoff", 0.01)
    return OpenAIChatClient(server.base_url, "scripted", **options)


def test_good_reply_with_usage() -> None:
    """A reply's content, model and token usage come back in a ChatResult."""
    with ScriptedChatServer(["hello there"]) as server:
        result = client(server).complete(HELLO)
    assert isinstance(result, ChatResult)
    assert "hello there" == result.text
    assert "scripted" == result.model
    assert (2, 2) == (result.prompt_tokens, result.completion_tokens)
    assert "chat.completion" == result.raw["object"]
    assert [{"role": "user", "content": "Say hello."}] == server.requests[0]["messages"]


def test_max_tokens_is_sent_only_when_set() -> None:
    """max_tokens travels in the request when given, and is absent otherwise."""
    with ScriptedChatServer(["a", "b"]) as server:
        client(server, max_tokens=256).complete(HELLO)
        client(server).complete(HELLO)
    assert 256 == server.requests[0]["max_tokens"]
    assert "max_tokens" not in server.requests[1]


@pytest.mark.parametrize("bad", [0, -5, 2.5, "100", True])
def test_bad_max_tokens_is_refused(bad: Any) -> None:
    """max_tokens must be a positive integer (booleans are not integers here)."""
    with pytest.raises((TypeError, ValueError)):
        OpenAIChatClient("http://127.0.0.1:1/v1", "m", max_tokens=bad)


def test_satisfies_the_protocol() -> None:
    """The shipped client is an LLMClient, named after its model."""
    c = OpenAIChatClient("http://127.0.0.1:1/v1/", "m")
    assert isinstance(c, LLMClient)
    assert ("openai:m", "http://127.0.0.1:1/v1") == (c.name, c.base_url)


def test_schema_is_sent_as_json_schema_response_format() -> None:
    """A JSON schema travels as a strict response_format of type json_schema."""
    with ScriptedChatServer(['{"ok": true}']) as server:
        client(server).complete(HELLO, json_schema=SCHEMA)
    sent = server.requests[0]["response_format"]
    assert "json_schema" == sent["type"]
    assert (SCHEMA, True) == (sent["json_schema"]["schema"], sent["json_schema"]["strict"])


def test_no_schema_sends_no_response_format() -> None:
    """Without a schema the request carries no response_format."""
    with ScriptedChatServer(["hi"]) as server:
        client(server).complete(HELLO)
    assert "response_format" not in server.requests[0]


def test_falls_back_when_server_rejects_response_format() -> None:
    """A 400 about response_format is retried with a weaker mode, which the client keeps."""
    script: list[str | ScriptedReply] = [ScriptedReply("response_format json_schema is not supported", status=400),
              '{"ok": true}', '{"ok": true}']
    with ScriptedChatServer(script) as server:
        c = client(server)
        assert '{"ok": true}' == c.complete(HELLO, json_schema=SCHEMA).text
        c.complete(HELLO, json_schema=SCHEMA)
    assert ["json_schema", "json_object", "json_object"] == [
        r["response_format"]["type"] for r in server.requests]
    assert SCHEMA == server.requests[1]["response_format"]["schema"]
    assert "json_object_schema" == c.response_format


def test_json_object_schema_sends_the_schema_inside_json_object_mode() -> None:
    """The mode llama-cpp-python's server understands: json_object with the schema attached."""
    with ScriptedChatServer(['{"ok": true}']) as server:
        client(server, response_format="json_object_schema").complete(HELLO, json_schema=SCHEMA)
    assert {"type": "json_object", "schema": SCHEMA} == server.requests[0]["response_format"]


def test_falls_back_down_to_no_response_format() -> None:
    """A server that rejects every JSON mode is finally asked with no response_format."""
    script: list[str | ScriptedReply] = [ScriptedReply("unsupported response_format", status=400),
              ScriptedReply("response_format schema: unknown field", status=400),
              ScriptedReply("response_format json_object unsupported", status=400), '{"ok": true}']
    with ScriptedChatServer(script) as server:
        c = client(server, max_retries=0)
        assert '{"ok": true}' == c.complete(HELLO, json_schema=SCHEMA).text
    assert 4 == len(server.requests)
    assert "response_format" in server.requests[2]
    assert "response_format" not in server.requests[3]
    assert "none" == c.response_format


def test_other_400_does_not_fall_back() -> None:
    """A 400 that is not about the response format fails at once."""
    with ScriptedChatServer([ScriptedReply("messages must not be empty", status=400), "never"]) as server:
        c = client(server)
        with pytest.raises(LLMClientError) as info:
            c.complete(HELLO, json_schema=SCHEMA)
    assert (400, 1, "json_schema") == (info.value.status, len(server.requests), c.response_format)


def test_500_then_success_is_retried() -> None:
    """A server error is retried and the second answer used."""
    with ScriptedChatServer([ScriptedReply("boom", status=500), "fine"]) as server:
        assert "fine" == client(server).complete(HELLO).text
    assert 2 == len(server.requests)


def test_429_with_retry_after_is_retried() -> None:
    """Rate limiting honours Retry-After and succeeds afterwards."""
    script: list[str | ScriptedReply] = [ScriptedReply("slow down", status=429, headers={"Retry-After": "0"}), "fine"]
    with ScriptedChatServer(script) as server:
        assert "fine" == client(server).complete(HELLO).text
    assert 2 == len(server.requests)


def test_other_4xx_is_not_retried() -> None:
    """A 401 fails at once with its status."""
    with ScriptedChatServer([ScriptedReply("bad key", status=401), "never"]) as server, \
            pytest.raises(LLMClientError) as info:
        client(server).complete(HELLO)
    assert 401 == info.value.status
    assert 1 == len(server.requests)


def test_retries_run_out() -> None:
    """After max_retries server errors the client fails with the last status and body."""
    with ScriptedChatServer([ScriptedReply("down", status=500)] * 3) as server, \
            pytest.raises(LLMClientError, match="after 3 tries") as info:
        client(server, max_retries=2).complete(HELLO)
    assert 500 == info.value.status
    assert "down" in (info.value.body or "")
    assert 3 == len(server.requests)


def test_timeout_is_a_clear_error() -> None:
    """A reply slower than the timeout gives an error that says so."""
    with ScriptedChatServer([ScriptedReply("late", delay=1.0)]) as server, \
            pytest.raises(LLMClientError, match="timeout: no reply within 0.3 s") as info:
        client(server, timeout=0.3, max_retries=0).complete(HELLO)
    assert None is info.value.status


def test_timeout_then_success_is_retried() -> None:
    """A timed-out request is tried again: the first answer is held until the test ends, the
    second comes at once (a 2 s timeout leaves it time on a loaded machine)."""
    held = threading.Event()
    with ScriptedChatServer([ScriptedReply("late", gate=held), "fine"]) as server:
        try:
            assert "fine" == client(server, timeout=2.0).complete(HELLO).text
        finally:
            held.set()
    assert 2 == len(server.requests)


@pytest.mark.parametrize("body", ["{not json", '{"choices": []}', "[]",
                                  '{"choices": [{"message": {"content": 7}}]}'])
def test_malformed_replies_are_errors(body: str) -> None:
    """A body that is not JSON, has no choices, or non-text content is an LLMClientError."""
    with ScriptedChatServer([ScriptedReply(body=body)]) as server, \
            pytest.raises(LLMClientError, match="chat/completions") as info:
        client(server).complete(HELLO)
    assert 200 == info.value.status
    assert 1 == len(server.requests)


def completion(message: dict[str, Any], finish_reason: str = "stop") -> str:
    """A chat-completion body holding one choice with this message."""
    return json.dumps({"object": "chat.completion", "model": "scripted", "choices": [
        {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", **message}}]})


@pytest.mark.parametrize(("body", "said"), [
    (json.dumps({"error": {"message": "Rate limit exceeded: free-models-per-day", "code": 429}}),
     "no answer but an error: Rate limit exceeded: free-models-per-day"),
    (json.dumps({"error": "upstream model overloaded"}),
     "no answer but an error: upstream model overloaded"),
    (completion({"content": None, "refusal": "I can't help with that."}),
     "no answer but the model's refusal: I can't help with that."),
    (completion({"content": None, "tool_calls": [{"id": "1", "type": "function", "function": {
        "name": "remember", "arguments": "{}"}}]}), "tool calls instead of text content"),
    (completion({"content": None}, "content_filter"), "the server's content filter stopped it"),
], ids=["error-object", "error-string", "refusal", "tool-calls", "content-filter"])
def test_a_reply_without_text_says_what_it_holds_instead(body: str, said: str) -> None:
    """A 200 reply without text content names what came instead: a gateway's error, the
    model's refusal, tool calls, a content filter (it said only "no content", hiding why)."""
    with ScriptedChatServer([ScriptedReply(body=body)]) as server, \
            pytest.raises(LLMClientError) as info:
        client(server).complete(HELLO)
    assert said in str(info.value)
    assert (200, 1) == (info.value.status, len(server.requests))


def test_content_given_as_parts_is_read_as_its_text() -> None:
    """Content sent as a list of parts (a reasoning model's thinking, then its text) is
    read as the text parts, the thinking left out (it failed as "non-text content")."""
    parts = completion({"content": [
        {"type": "thinking", "thinking": [{"type": "text", "text": "Let me see {"}]},
        {"type": "text", "text": '{"operations": '}, {"type": "text", "text": "[]}"}]})
    with ScriptedChatServer([ScriptedReply(body=parts)]) as server:
        assert '{"operations": []}' == client(server).complete(HELLO).text


def test_the_finish_reason_comes_back() -> None:
    """Why the model stopped comes back in the ChatResult (``None`` when not said)."""
    cut = completion({"content": '{"operations": ['}, "length")
    with ScriptedChatServer([ScriptedReply(body=cut), "whole"]) as server:
        c = client(server)
        assert ("length", "stop") == (c.complete(HELLO).finish_reason,
                                      c.complete(HELLO).finish_reason)


def test_api_key_from_environment_is_sent_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key is read from the environment, sent as a Bearer token, and absent from errors."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    echo = ScriptedReply(status=403, body='{"error": "key sk-secret-123\\nis revoked"}')
    with ScriptedChatServer(["ok", echo]) as server:
        c = client(server)
        c.complete(HELLO)
        with pytest.raises(LLMClientError) as info:
            c.complete(HELLO)
    assert "Bearer sk-secret-123" == server.request_headers[0]["Authorization"]
    assert "sk-secret-123" not in str(info.value)
    assert "sk-secret-123" not in (info.value.body or "")
    assert 1 == len(str(info.value).splitlines())


def test_explicit_key_and_extra_headers_are_sent() -> None:
    """An explicit api_key wins over the environment; extra headers travel too."""
    with ScriptedChatServer(["ok"]) as server:
        client(server, api_key="k1", extra_headers={"X-Team": "mem"}).complete(HELLO)
    headers = server.request_headers[0]
    assert ("Bearer k1", "mem") == (headers["Authorization"], headers["X-Team"])


def test_no_key_sends_no_authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a key no Authorization header is sent (local servers need none)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedChatServer(["ok"]) as server:
        client(server).complete(HELLO)
    assert "Authorization" not in server.request_headers[0]


@pytest.mark.parametrize("url", ["ftp://x/v1", "localhost:8080", "", "http://"])
def test_bad_base_url_is_a_value_error(url: str) -> None:
    """A base URL that is not http(s) is refused when the client is built."""
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatClient(url, "m")


def test_refused_connection_fails_at_once_with_a_clear_error(caplog) -> None:
    """A closed port is not retried: one LLMClientError naming the URL, and no retry logged
    (a retry would log "try 2 of 4" and wait 2 s first)."""
    server = ScriptedChatServer([])
    url = server.base_url
    server.close()
    with caplog.at_level(logging.WARNING, logger="ctxslots"), \
            pytest.raises(LLMClientError, match=r"127\.0\.0\.1.*connection refused") as info:
        OpenAIChatClient(url, "m", max_retries=3, backoff=2.0).complete(HELLO)
    assert [] == [r.getMessage() for r in caplog.records if "try 2" in r.getMessage()]
    assert None is info.value.status
    assert "tries" not in str(info.value)


def test_exhausted_script_answers_500() -> None:
    """The scripted server says so when its script is used up."""
    with ScriptedChatServer([]) as server, pytest.raises(LLMClientError, match="used up"):
        client(server, max_retries=0).complete(HELLO)


def test_acomplete() -> None:
    """The async variant returns the same result."""
    with ScriptedChatServer([json.dumps({"ok": True})]) as server:
        result = asyncio.run(client(server).acomplete(HELLO))
    assert '{"ok": true}' == result.text
