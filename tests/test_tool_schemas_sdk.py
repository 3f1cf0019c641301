"""The tool schemas checked by the libraries agents are built with: the OpenAI SDK's own types
and strict-mode checks, pydantic-ai's strict-compatibility walk, and a real run of the OpenAI
Agents SDK against a scripted chat-completions server on 127.0.0.1."""

from __future__ import annotations

import copy
import json
import time

import pytest

openai = pytest.importorskip("openai")

from openai.lib._parsing._completions import validate_input_tools
from openai.lib._pydantic import _ensure_strict_json_schema
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from ctxslots.testing import ScriptedChatServer, ScriptedReply
from ctxslots.tools import (
    TOOL_SPECS,
    MemoryTools,
    openai_tools,
    responses_tools,
)

#: JSON Schema keywords OpenAI's strict mode accepts (its structured-outputs subset).
STRICT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum",
                   "description", "minimum", "maximum", "minItems", "maxItems"}


def _keywords(schema: dict) -> set[str]:
    out = set(schema)
    for prop in schema.get("properties", {}).values():
        out |= _keywords(prop)
    if isinstance(schema.get("items"), dict):
        out |= _keywords(schema["items"])
    return out


def test_strict_tools_pass_the_openai_sdk_checks():
    """Every strict chat tool fits the SDK's tool type, passes its strict check and is a fixpoint
    of its strict-schema conversion."""
    tools = openai_tools(strict=True)
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    for tool in tools:
        assert tool == adapter.validate_python(tool)
        schema = tool["function"]["parameters"]
        assert schema == _ensure_strict_json_schema(copy.deepcopy(schema), path=(), root={})
        assert set(schema["required"]) == set(schema["properties"])
        assert _keywords(schema) <= STRICT_KEYWORDS
    assert validate_input_tools(tools) == tools


def test_plain_tools_fail_the_strict_check():
    """The default (non-strict) form is what the SDK's strict check refuses, so the check above
    can tell the two apart."""
    with pytest.raises(ValueError, match="`memory_query` is not strict"):
        validate_input_tools(openai_tools())


def test_responses_tools_fit_the_sdk_type():
    """The Responses-API shape is a flat function tool the SDK's ``FunctionToolParam`` accepts,
    strict by default, with the same parameters as the strict chat form."""
    adapter = TypeAdapter(FunctionToolParam)
    chat = openai_tools(strict=True)
    for tool, chat_tool in zip(responses_tools(), chat, strict=True):
        assert tool == adapter.validate_python(tool)
        assert tool["strict"] is True and tool["name"] == chat_tool["function"]["name"]
        assert tool["parameters"] == chat_tool["function"]["parameters"]
    assert responses_tools(strict=False)[0]["parameters"]["required"] == ["query"]


def test_pydantic_ai_finds_every_strict_tool_compatible():
    """pydantic-ai's OpenAI schema walk marks all seven strict schemas strict-compatible (and
    five of the plain ones not)."""
    profiles = pytest.importorskip("pydantic_ai.profiles.openai")

    def compatible(schema: dict) -> bool:
        walker = profiles.OpenAIJsonSchemaTransformer(copy.deepcopy(schema), strict=None)
        walker.walk()
        return bool(walker.is_strict_compatible)

    strict = [t["function"]["parameters"] for t in openai_tools(strict=True)]
    plain = [t["function"]["parameters"] for t in openai_tools()]
    assert [True] * len(TOOL_SPECS) == [compatible(s) for s in strict]
    assert 5 == sum(not compatible(s) for s in plain)


def test_null_means_not_given(store):
    """Strict callers send every argument: nulls search every slot and leave tags as they were."""
    tools = MemoryTools(store, scope="shop")
    tools.memory_store("user", "The user deploys from a laptop.", tags=["ops"])
    tools.memory_store("project", "The shop deploys on Fridays.")
    found = tools.dispatch("memory_query", '{"query": "deploys", "slot": null, "limit": null}')
    assert found.startswith("2 memories")
    updated = tools.dispatch("memory_update",
                             '{"id": 1, "value": "The user deploys from a desktop.", "tags": null}')
    assert updated.startswith("Updated [id:1]")
    assert ("ops",) == store.get(1).tags
    assert tools.dispatch("memory_update", '{"id": 1, "value": null, "tags": null}') == \
        "Error: give 'value', 'tags' or both to change"


def _tool_call_body(calls: list[tuple[str, dict]]) -> str:
    return json.dumps({
        "id": "chatcmpl-tools", "object": "chat.completion", "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{i}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}
                           for i, (name, args) in enumerate(calls)]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    })


def test_openai_agents_sdk_runs_the_strict_tools(store):
    """Loaded into the OpenAI Agents SDK (strict by default) the schemas stay as written, and a
    model's nulls reach the dispatcher as "not given"."""
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)
    tools = MemoryTools(store, scope="shop")
    tools.memory_store("user", "The user deploys from a laptop.", tags=["ops"])
    tools.memory_store("project", "The shop deploys on Fridays.")

    def function_tool(entry: dict) -> object:
        name = entry["function"]["name"]

        async def invoke(_ctx: object, arguments: str) -> str:
            return tools.dispatch(name, arguments)

        return agents.FunctionTool(name=name, description=entry["function"]["description"],
                                   params_json_schema=entry["function"]["parameters"],
                                   on_invoke_tool=invoke)

    loaded = [function_tool(entry) for entry in tools.openai_tools(strict=True)]
    assert [t.params_json_schema for t in loaded] == \
        [e["function"]["parameters"] for e in tools.openai_tools(strict=True)]

    script = [ScriptedReply(body=_tool_call_body([
        ("memory_query", {"query": "deploys", "slot": None, "limit": None}),
        ("memory_update", {"id": 1, "value": "The user deploys from a desktop.", "tags": None}),
    ])), "Done."]
    with ScriptedChatServer(script) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test-key")
        model = agents.OpenAIChatCompletionsModel(model="scripted", openai_client=client)
        agent = agents.Agent(name="memory", instructions="Use memory.", model=model,
                             tools=loaded)
        result = agents.Runner.run_sync(agent, "Where do I deploy from?")
    assert "Done." == result.final_output
    sent = server.requests[0]["tools"]
    assert all(t["function"]["strict"] is True for t in sent)
    outputs = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"]
               if m["role"] == "tool"}
    assert outputs["call_0"].startswith("2 memories")          # every slot, not none
    assert outputs["call_1"].startswith("Updated [id:1]")
    assert ("ops",) == store.get(1).tags                       # null tags did not wipe them
    assert "The user deploys from a desktop." == store.get(1).value
