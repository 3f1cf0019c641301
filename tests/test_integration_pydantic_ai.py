"""The pydantic-ai integration, run by pydantic-ai's own agent: over the real OpenAI
client against a scripted chat-completions server on 127.0.0.1, and with pydantic-ai's
own test model. Memory in the instructions, the tools, the flush after a run,
identity, and failures."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys

import pytest

pydantic_ai = pytest.importorskip("pydantic_ai")
pytest.importorskip("openai")

from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.openai import OpenAIProvider

from _agent_scripts import (  # noqa: F401  (fixtures, found by pytest by name)
    fixture_servers,
    fixture_store,
    flush_reply,
    scripted_flusher,
    tool_calls,
)
from ctxslots import FactStore, InvalidArgumentError
from ctxslots.errors import MemoryUnavailableError
from ctxslots.integrations import Memory, MemoryContext
from ctxslots.integrations.pydantic_ai import MemoryCapability, memory_toolset, to_messages
from ctxslots.testing import ScriptedReply

MEMORY_TOOLS = ["memory_query", "memory_store", "memory_update", "memory_reinforce",
                "memory_demote", "memory_forget", "memory_timeline"]


def _model(server) -> OpenAIChatModel:
    provider = OpenAIProvider(base_url=server.base_url, api_key="test-key")
    return OpenAIChatModel("scripted", provider=provider)


def _agent(model, memory: Memory, name: str = "assistant") -> pydantic_ai.Agent:
    return pydantic_ai.Agent(model, name=name, deps_type=MemoryContext,
                             instructions="Answer briefly.",
                             capabilities=[MemoryCapability(memory)])


def _system(request: dict) -> str:
    """Every system message of a request, joined."""
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "system")


def _store_call(slot: str, value: str) -> tuple[str, dict]:
    """A ``memory_store`` call as a model fills the plain schema (optional ones left out)."""
    return ("memory_store", {"slot": slot, "value": value})


def test_memory_reaches_the_instructions(store, servers):
    """The run's user sees their own facts after the agent's instructions, found by the
    user prompt."""
    model, _ = servers(["You use Helix."])
    agent = _agent(_model(model), Memory(store))
    result = agent.run_sync("Which editor do I use?", deps=MemoryContext(user="alice"))
    assert "You use Helix." == result.output
    system = _system(model.requests[0])
    assert system.startswith("Answer briefly.\n")
    assert "The user edits code in Helix." in system and "Emacs" not in system
    assert MEMORY_TOOLS == [t["function"]["name"] for t in model.requests[0]["tools"]]


def test_a_tool_call_writes_a_fact_for_the_runs_user(store, servers):
    """The memory tools run for the dependencies' user and scope; the other user's memory
    is untouched."""
    model, _ = servers([tool_calls(_store_call("user", "The user drinks green tea.")),
                        "Noted."])
    agent = _agent(_model(model), Memory(store))
    result = agent.run_sync("I drink green tea.", deps=MemoryContext(user="bob", scope="shop"))
    assert "Noted." == result.output
    assert ["The user drinks green tea.", "The user edits code in Emacs."] == sorted(
        f.value for f in store.facts(slots=["user"], user="bob"))
    assert "tea" not in " ".join(f.value for f in store.facts(slots=["user"], user="alice"))
    tool_answer = model.requests[1]["messages"][-1]
    assert tool_answer["role"] == "tool" and tool_answer["content"].startswith("Stored [id:")


def test_agent_facts_belong_to_the_agent_and_scope(store, servers):
    """A fact the model keeps in the agent slot is the run's agent's (the Agent's name,
    unless the deps name one); with the agent slot scoped, in the deps' scope."""
    model, _ = servers([tool_calls(_store_call("agent", "Refunds need a receipt.")), "Ok.",
                        tool_calls(_store_call("agent", "Refunds take a week.")), "Ok."])
    agent = _agent(_model(model), Memory(store, scoped_slots={"project", "agent"}),
                   name="support")

    async def main():
        await agent.run("Remember: receipts.", deps=MemoryContext(user="a", scope="shop"))
        await agent.run("Remember: a week.", deps=MemoryContext(agent="triage"))

    asyncio.run(main())
    assert store.find_memory("agent", "Refunds need a receipt.", agent="support",
                             scope="shop") is not None
    assert store.find_memory("agent", "Refunds need a receipt.", agent="support") is None
    assert store.find_memory("agent", "Refunds take a week.", agent="triage") is not None
    assert [] == store.facts(slots=["agent"])  # nothing for the default agent


def test_the_runs_messages_are_flushed_after_it(store, servers):
    """With a flusher whose policy is due, the run's messages are flushed for the
    dependencies' user and the agent's name; the report lands on the deps; the memory
    tools' own calls are not part of it."""
    model, flush = servers(
        [tool_calls(("memory_query", {"query": "tea"})), "Lisbon is lovely."],
        [flush_reply(("user", "city", "The user lives in Lisbon."))])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    deps = MemoryContext(user="alice", conversation="chat-1")
    _agent(_model(model), memory, name="concierge").run_sync("I moved to Lisbon.", deps=deps)
    report = deps.flush_report
    assert report is not None and report.status == "applied"
    assert ("alice", "concierge", "chat-1") == (report.user, report.agent, report.conversation)
    assert "The user lives in Lisbon." == store.get_by_key("user", "city", user="alice").value
    assert store.get_by_key("user", "city", user="bob") is None
    sent = flush.requests[0]["messages"][-1]["content"]
    assert "I moved to Lisbon." in sent and "Lisbon is lovely." in sent
    assert "memory_query" not in sent


def test_a_prompt_of_text_content_parts_is_the_users_text(store, servers):
    """A user prompt given as TextContent beside an image is what memory is searched with
    and what the flush reads, not a prompt with no text."""
    from pydantic_ai.messages import ImageUrl, TextContent

    store.add("user", "Salt cod needs a day of soaking before bacalhau.", user="alice")
    model, flush = servers(["Enjoy."], [flush_reply(("user", "dish", "The user cooks bacalhau."))])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    deps = MemoryContext(user="alice", conversation="chat-1")
    _agent(_model(model), memory).run_sync(
        [TextContent("In Porto I cook bacalhau."), ImageUrl("https://example.com/dish.png")],
        deps=deps)
    assert "Salt cod needs a day of soaking" in _system(model.requests[0])
    assert deps.flush_report is not None and deps.flush_report.status == "applied"
    assert "The user cooks bacalhau." == store.get_by_key("user", "dish", user="alice").value
    assert "```text\nIn Porto I cook bacalhau.\n```" in flush.requests[0]["messages"][-1][
        "content"]


def test_a_flush_not_due_is_logged_and_reported(store, servers, caplog):
    """The default policy waits; the report says why and a log line says so."""
    model, flush = servers(["Hello."])
    deps = MemoryContext(user="alice")
    agent = _agent(_model(model), Memory(store, flusher=scripted_flusher(store, flush)))
    with caplog.at_level(logging.INFO, logger="ctxslots.integrations"):
        agent.run_sync("Hi there.", deps=deps)
    assert deps.flush_report.status == "not_due"
    assert [] == flush.requests
    assert any("not_due" in r.getMessage() and "of 10 turns" in r.getMessage()
               for r in caplog.records)


def test_the_next_run_continues_the_conversation(store, servers):
    """A second run given the first one's history keeps its conversation id, and its
    flush reads on from where the first stopped."""
    model, flush = servers(["Hello.", "Noted."],
                           [flush_reply(("user", "pet", "The user has a cat."))])
    agent = _agent(_model(model), Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=2)))
    first, second = MemoryContext(user="alice"), MemoryContext(user="alice")

    async def main():
        result = await agent.run("Hi.", deps=first)
        await agent.run("I have a cat.", deps=second, message_history=result.all_messages())

    asyncio.run(main())
    assert first.flush_report.status == "not_due"
    report = second.flush_report
    assert first.flush_report.conversation == report.conversation
    assert (report.status, report.first, report.last, report.restarted) == \
        ("applied", 1, 4, False)
    assert store.get_by_key("user", "pet", user="alice") is not None


def test_identity_keeps_two_users_apart(store, servers):
    """Two runs of one agent, one per user (the second's deps a plain mapping): each
    sees and writes only its own memory."""
    model, _ = servers([tool_calls(_store_call("user", "The user is vegetarian.")), "Ok.",
                        "Ok."])
    agent = pydantic_ai.Agent(_model(model), capabilities=[MemoryCapability(Memory(store))])

    async def main():
        await agent.run("I am vegetarian.", deps=MemoryContext(user="alice"))
        await agent.run("What do I eat?", deps={"user": "bob"})

    asyncio.run(main())
    bob_system = _system(model.requests[2])
    assert "Emacs" in bob_system and "vegetarian" not in bob_system and "Helix" not in bob_system
    assert store.find_memory("user", "The user is vegetarian.", user="alice") is not None
    assert store.find_memory("user", "The user is vegetarian.", user="bob") is None


def test_a_streamed_run_keeps_memory_and_flushes(store, servers):
    """``run_stream`` over server-sent events: memory in the instructions, the flush after."""
    model, flush = servers(["You use Helix."],
                           [flush_reply(("user", "likes", "The user likes short answers."))])
    memory = Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1))
    deps = MemoryContext(user="alice")

    async def main():
        async with _agent(_model(model), memory).run_stream("My editor?", deps=deps) as run:
            return await run.get_output()

    assert "You use Helix." == asyncio.run(main())
    assert model.requests[0]["stream"] is True and "Helix" in _system(model.requests[0])
    assert deps.flush_report.status == "applied"
    assert store.get_by_key("user", "likes", user="alice") is not None


def test_the_schemas_work_with_pydantic_ais_test_model(store):
    """pydantic-ai's ``TestModel`` fills every memory tool's schema and calls it; the calls
    run for the deps' user (one stored fact, the others answering the model)."""
    agent = pydantic_ai.Agent(TestModel(), capabilities=[MemoryCapability(Memory(store))])
    result = agent.run_sync("hello", deps=MemoryContext(user="carol"))
    answers = json.loads(result.output)
    assert MEMORY_TOOLS == list(answers)
    assert answers["memory_store"].startswith("Stored [id:")
    assert [("user", "carol")] == [(f.slot, f.user) for f in store.facts(user="carol")]


def test_a_function_model_sees_the_memory_and_the_tools(store):
    """pydantic-ai's ``FunctionModel`` is shown the assembled memory and the tools' plain
    schemas."""
    seen: list[tuple[str, list[str]]] = []

    def reply(messages, info: AgentInfo):
        seen.append((info.instructions or "", sorted(t.name for t in info.function_tools)))
        return pydantic_ai.messages.ModelResponse(
            parts=[pydantic_ai.messages.TextPart("ok")])

    agent = pydantic_ai.Agent(FunctionModel(reply), instructions="Be kind.",
                              capabilities=[MemoryCapability(Memory(store))])
    assert "ok" == agent.run_sync("Editor?", deps=MemoryContext(user="bob")).output
    instructions, tools = seen[0]
    assert instructions.startswith("Be kind.") and "Emacs" in instructions
    assert sorted(MEMORY_TOOLS) == tools


def test_a_failing_store_does_not_stop_the_run(db_path, clock, servers, caplog):
    """A closed store: the run answers, without memory, and each failure is logged."""
    store = FactStore(db_path, clock=clock)
    model, flush = servers(["Still here."], [flush_reply()])
    agent = _agent(_model(model), Memory(store, flusher=scripted_flusher(store, flush, every_n_turns=1)))
    store.close()
    deps = MemoryContext(user="alice")
    with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
        result = agent.run_sync("Hello?", deps=deps)
    assert "Still here." == result.output
    assert "Answer briefly." == _system(model.requests[0]).strip()
    failures = [r.getMessage() for r in caplog.records if r.name == "ctxslots.integrations"]
    assert any("assembling the context failed" in m for m in failures)
    assert any("flushing the conversation failed" in m for m in failures)
    assert deps.flush_report is None


def test_a_context_used_again_never_keeps_an_earlier_runs_report(db_path, clock, servers):
    """One MemoryContext for two runs: the second run's flush fails before reporting
    (the store closed), so its report is None, not the first run's."""
    store = FactStore(db_path, clock=clock)
    model, flush = servers(["Noted.", "Noted again."],
                           [flush_reply(("user", "city", "The user lives in Lisbon."))])
    agent = _agent(_model(model), Memory(store, flusher=scripted_flusher(store, flush,
                                                                         every_n_turns=1)))
    deps = MemoryContext(user="alice", conversation="chat-1")
    agent.run_sync("I moved to Lisbon.", deps=deps)
    assert deps.flush_report is not None and "applied" == deps.flush_report.status
    store.close()
    agent.run_sync("I moved to Porto.", deps=deps)
    assert deps.flush_report is None


def test_a_failing_store_stops_a_strict_run(db_path, clock, servers):
    """With strict memory the failure is raised into the run, before the model is asked."""
    store = FactStore(db_path, clock=clock)
    model, _ = servers(["Never sent."])
    agent = _agent(_model(model), Memory(store, strict=True))
    store.close()
    with pytest.raises(MemoryUnavailableError, match="assembling the context failed"):
        agent.run_sync("Hello?", deps=MemoryContext(user="alice"))
    assert [] == model.requests


def test_a_failing_tool_answers_the_model(db_path, clock, servers):
    """A tool call on a closed store answers an error to the model; the run goes on."""
    store = FactStore(db_path, clock=clock)
    model, _ = servers([tool_calls(_store_call("user", "The user likes jazz.")), "Sorry."])
    agent = pydantic_ai.Agent(_model(model), toolsets=[memory_toolset(Memory(store))])
    store.close()
    assert "Sorry." == agent.run_sync("I like jazz.", deps=MemoryContext(user="a")).output
    answer = model.requests[1]["messages"][-1]["content"]
    assert "Error: the memory store is unavailable; try again later" == answer


def test_arguments_that_do_not_fit_are_answered_not_raised(store, servers):
    """Tool calls whose arguments name ``ctx`` or are not a JSON object at all (null, a
    list, a string) each get the dispatcher's error text; the run goes on."""
    calls = [("memory_query", {"query": "editor", "ctx": 1}), ("memory_query", None),
             ("memory_query", [1, 2]), ("memory_query", "editor")]
    model, _ = servers([tool_calls(*calls), "Sorry."])
    agent = _agent(_model(model), Memory(store))
    assert "Sorry." == agent.run_sync("Which editor?", deps=MemoryContext(user="alice")).output
    answers = {m["tool_call_id"]: m["content"] for m in model.requests[1]["messages"]
               if m["role"] == "tool"}
    assert answers["call_0"].startswith("Error: unknown argument(s) 'ctx'; memory_query takes")
    assert [f"Error: the arguments must be a JSON object, not {kind}" for kind in
            ("null (null)", "a list ([1, 2])", 'a string ("editor")')] == \
        [answers[f"call_{i}"] for i in (1, 2, 3)]


def _not_json(arguments: str, prefix: str) -> ScriptedReply:
    """A chat completion calling ``memory_store`` with ``arguments``, as sent (not JSON)."""
    body = json.loads(tool_calls(("memory_store", {}), prefix=prefix).body)
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    return ScriptedReply(body=json.dumps(body))


def test_arguments_that_are_not_json_are_answered_not_retried(store, servers):
    """Arguments cut off mid-string, three times over (past pydantic-ai's one retry of a
    tool): each call gets the dispatcher's error text, and the run goes on to its answer."""
    cut = '{"slot": "user", "value": "The user likes'
    model, _ = servers([_not_json(cut, "a"), _not_json(cut, "b"), _not_json("{", "c"),
                        "Sorry."])
    agent = _agent(_model(model), Memory(store))
    assert "Sorry." == agent.run_sync("I like tea.", deps=MemoryContext(user="alice")).output
    answers = [m["content"] for request in model.requests[1:]
               for m in request["messages"][-1:] if m["role"] == "tool"]
    assert 3 == len(answers)
    assert all(a.startswith("Error: the arguments are not valid JSON (") for a in answers)
    assert ["The user edits code in Helix."] == [f.value for f in
                                                 store.facts(slots=["user"], user="alice")]


def test_a_malformed_identity_runs_without_memory(store, servers, caplog):
    """Deps whose user is not a string: logged, and the run goes on without memory."""
    model, _ = servers(["Hi."])
    with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
        result = _agent(_model(model), Memory(store)).run_sync("Hi", deps={"user": 42})
    assert "Hi." == result.output and "Answer briefly." == _system(model.requests[0]).strip()
    assert any("the run's user must be a string" in r.getMessage() for r in caplog.records)


def test_bad_input_is_refused_with_a_clear_error(store):
    """A capability given something other than a Memory says so."""
    with pytest.raises(InvalidArgumentError, match="memory must be a ctxslots Memory"):
        MemoryCapability(store)


def test_messages_become_conversation_lines():
    """Prompts, text and tool lines are kept; memory tools, retries and thinking left out."""
    m = pydantic_ai.messages
    history = [
        m.ModelRequest(parts=[m.SystemPromptPart("Be kind."), m.UserPromptPart("Weather?")]),
        m.ModelResponse(parts=[m.ThinkingPart("hmm"),
                               m.ToolCallPart("weather", {"city": "Porto"}, "a"),
                               m.ToolCallPart("memory_store", {"value": "x"}, "b")]),
        m.ModelRequest(parts=[m.ToolReturnPart("weather", "sunny", "a"),
                              m.ToolReturnPart("memory_store", "Stored [id:1]", "b"),
                              m.ToolReturnPart("weather", "no such city", "c",
                                               outcome="retried")]),
        m.ModelResponse(parts=[m.TextPart("It is sunny.")]),
    ]
    assert [("system", "Be kind."), ("user", "Weather?"),
            ("assistant", '[called weather({"city":"Porto"})]'), ("tool", "sunny"),
            ("assistant", "It is sunny.")] == \
        [(x.role, x.content) for x in to_messages(history,
                                                  skip_tools=frozenset({"memory_store"}))]


def test_without_pydantic_ai_the_import_says_which_extra():
    """Importing the integration without pydantic-ai names the extra to install."""
    code = ("import sys; sys.modules['pydantic_ai'] = None\n"
            "try:\n    import ctxslots.integrations.pydantic_ai\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == ("IntegrationUnavailableError ctxslots.integrations.pydantic_ai "
                           "needs the 'pydantic-ai' extra: pip install 'ctxslots[pydantic-ai]'")


def test_a_run_that_names_no_user_gets_no_memory_when_one_is_required(store, servers, caplog):
    """deps naming the user under another field (or none): with require_user, no default
    user's memory is shown, no tool writes it, no flush runs; strict raises instead."""
    store.upsert("user", "pin", "The default user's PIN is 0000.")
    model, flush = servers([tool_calls(_store_call("user", "The user likes jazz.")), "Ok."],
                           [flush_reply()])
    memory = Memory(store, require_user=True,
                    flusher=scripted_flusher(store, flush, every_n_turns=1))
    deps = MemoryContext()
    with caplog.at_level(logging.WARNING, logger="ctxslots.integrations"):
        assert "Ok." == _agent(_model(model), memory).run_sync("My PIN?", deps=deps).output
    assert "0000" not in _system(model.requests[0])
    assert "names no user" in json.dumps(model.requests[1]["messages"])
    assert [f.value for f in store.facts()] == ["The default user's PIN is 0000."]
    assert deps.flush_report is None and flush.requests == []
    assert any("names no user" in r.getMessage() for r in caplog.records)
    strict, _ = servers(["Never sent."])
    with pytest.raises(MemoryUnavailableError, match="names no user"):
        _agent(_model(strict), Memory(store, require_user=True, strict=True)).run_sync(
            "My PIN?", deps=MemoryContext())
    assert strict.requests == []
