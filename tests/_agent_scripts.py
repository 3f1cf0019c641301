"""What the framework integration tests share: scripted model answers (tool calls as a
chat completion, a flusher's reply), the scripted servers, a store of two users' facts
and a flusher of it."""

from __future__ import annotations

import json
import time

import pytest

from ctxslots import FactStore, FlushPolicy, MemoryFlusher, OpenAIChatClient
from ctxslots.testing import ScriptedChatServer, ScriptedReply


def tool_calls(*calls: tuple[str, object], prefix: str = "call") -> ScriptedReply:
    """A chat completion in which the assistant calls these tools, in order, each with
    its arguments as JSON (call ids ``{prefix}_0``, ``{prefix}_1``...)."""
    return ScriptedReply(body=json.dumps({
        "id": "chatcmpl-tools", "object": "chat.completion", "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"{prefix}_{i}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}
                           for i, (name, args) in enumerate(calls)]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }))


def store_call(slot: str, value: str, key: str | None = None) -> tuple[str, dict]:
    """A strict ``memory_store`` call (every argument given, the optional ones null)."""
    return ("memory_store", {"slot": slot, "value": value, "key": key, "tags": None})


def flush_reply(*upserts: tuple[str, str, str]) -> str:
    """The flusher model's answer: one upsert per ``(slot, key, value)``."""
    return json.dumps({"operations": [
        {"op": "upsert", "slot": slot, "key": key, "value": value, "confidence": 0.9,
         "tags": []} for slot, key, value in upserts]})


@pytest.fixture(name="store")
def fixture_store(db_path, clock):
    """A SQLite store with two users' facts."""
    store = FactStore(db_path, clock=clock)
    store.upsert("user", "editor", "The user edits code in Helix.", user="alice")
    store.upsert("user", "editor", "The user edits code in Emacs.", user="bob")
    yield store
    store.close()


@pytest.fixture(name="servers")
def fixture_servers():
    """``servers(agent_script, flush_script)``: scripted servers for the agent's model and
    the flusher's, closed after the test."""
    made: list[ScriptedChatServer] = []

    def make(agent_script, flush_script=()):
        pair = ScriptedChatServer(agent_script), ScriptedChatServer(flush_script)
        made.extend(pair)
        return pair

    yield make
    for server in made:
        server.close()


def scripted_flusher(store: FactStore, server: ScriptedChatServer, **policy) -> MemoryFlusher:
    """A flusher of ``store`` asking ``server``'s scripted model, with ``policy``."""
    client = OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=30)
    return MemoryFlusher(store, client, policy=FlushPolicy(**policy))
