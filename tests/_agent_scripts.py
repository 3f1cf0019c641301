"""Scripted model answers shared by the framework integration tests: tool calls as a
chat completion, and a flusher's reply."""

from __future__ import annotations

import json
import time

from ctxslots.testing import ScriptedReply


def tool_calls(*calls: tuple[str, dict]) -> ScriptedReply:
    """A chat completion in which the assistant calls these tools, in order."""
    return ScriptedReply(body=json.dumps({
        "id": "chatcmpl-tools", "object": "chat.completion", "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{i}", "type": "function",
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
